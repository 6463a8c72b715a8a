//! The rules one network must meet, whether it is being created (`POST /networks/create`) or
//! already exists and a container is joining it (the daemon's inspect output has the same
//! field names as the create body, so one check reads both).

use std::net::Ipv4Addr;

use crate::api::json::Object;
use crate::policy::facts::HostRoute;
use crate::policy::{Denial, Policy};

/// Driver options a network may carry. Everything else is refused.
pub const MASQUERADE: &str = "com.docker.network.bridge.enable_ip_masquerade";
pub const MTU: &str = "com.docker.network.driver.mtu";

/// Known options with a specific reason, so the refusal says why.
const EXPLAINED: &[(&str, &str)] = &[
    (
        "com.docker.network.bridge.name",
        "it adopts an existing host bridge such as `docker0` or a LAN bridge",
    ),
    (
        "com.docker.network.bridge.host_binding_ipv4",
        "it changes the host address published ports bind to",
    ),
    (
        "com.docker.network.bridge.enable_icc",
        "inter-container traffic settings are fixed",
    ),
    (
        "com.docker.network.bridge.gateway_mode_ipv4",
        "routed gateway modes expose container addresses without NAT",
    ),
    (
        "com.docker.network.bridge.gateway_mode_ipv6",
        "routed gateway modes expose container addresses without NAT",
    ),
    (
        "com.docker.network.bridge.inhibit_ipv4",
        "it hands the bridge's addressing to the host",
    ),
    (
        "com.docker.network.bridge.trusted_host_interfaces",
        "it gives host interfaces direct routed access to containers",
    ),
    (
        "com.docker.network.bridge.default_bridge",
        "it marks the network as the daemon's default bridge",
    ),
    (
        "com.docker.network.host_ipv4",
        "it picks the host source address for outbound traffic",
    ),
    (
        "com.docker.network.host_ipv6",
        "it picks the host source address for outbound traffic",
    ),
    (
        "com.docker.network.enable_ipv6",
        "IPv6 networks are not available",
    ),
];

/// What a network's subnets are checked against.
pub struct Context<'a> {
    pub policy: &'a Policy,
    /// The host's routes; `None` when they were not gathered (a subnet is then refused).
    pub routes: Option<&'a [HostRoute]>,
    /// The bridge device of an existing network, whose own route is not a conflict.
    pub own_iface: Option<String>,
}

/// Checks one network description against every network rule.
pub fn check(o: &Object, cx: &Context<'_>) -> Result<(), Denial> {
    check_driver(o)?;
    check_scope(o)?;
    if o.bool("EnableIPv6")? == Some(true) {
        return Err(Denial::new("network.ipv6", "IPv6 networks are not allowed"));
    }
    check_options(o, cx.policy)?;
    check_ipam(o, cx)
}

fn check_driver(o: &Object) -> Result<(), Denial> {
    // dockerd looks drivers up by exact name ("" means the default, bridge); any other
    // spelling is a plugin lookup, so only these two are accepted.
    match o.str("Driver")? {
        None | Some("") | Some("bridge") => Ok(()),
        Some(d) => Err(Denial::new(
            "network.driver",
            format!("network driver `{d}` is not allowed; only `bridge` networks are"),
        )),
    }
}

fn check_scope(o: &Object) -> Result<(), Denial> {
    let rule = "network.scope";
    match o.str("Scope")? {
        None | Some("") | Some("local") => {}
        Some(s) => {
            return Err(Denial::new(
                rule,
                format!("network scope `{s}` is not allowed; only `local` networks are"),
            ));
        }
    }
    // `Attachable` only matters for swarm-scoped networks (refused above); docker-compose 1.x
    // sends `Attachable: true` for its local bridge networks, so it is accepted and ignored.
    o.bool("Attachable")?;
    if o.bool("Ingress")? == Some(true) {
        return Err(Denial::new(
            rule,
            "ingress networks belong to swarm mode and are not allowed",
        ));
    }
    if o.bool("ConfigOnly")? == Some(true) {
        return Err(Denial::new(
            "network.config_from",
            "config-only networks are not allowed",
        ));
    }
    let from = o
        .object("ConfigFrom")?
        .map(|c| c.str("Network"))
        .transpose()?
        .flatten();
    if let Some(n) = from.filter(|n| !n.is_empty()) {
        return Err(Denial::new(
            "network.config_from",
            format!("taking a network's configuration from `{n}` is not allowed"),
        ));
    }
    Ok(())
}

fn check_options(o: &Object, policy: &Policy) -> Result<(), Denial> {
    let rule = "network.option";
    for (k, v) in o.str_map("Options")?.unwrap_or_default() {
        match k.as_str() {
            MASQUERADE if matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True") => {}
            MASQUERADE => {
                return Err(Denial::new(
                    rule,
                    format!("`{MASQUERADE}` must stay `true`, not `{v}`"),
                ));
            }
            MTU => check_mtu(&v, policy)?,
            _ => {
                let why = EXPLAINED
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, why)| *why);
                let msg = match why {
                    Some(why) => format!("network option `{k}` is not allowed: {why}"),
                    None => format!("network option `{k}` is not allowed"),
                };
                return Err(Denial::new(rule, msg));
            }
        }
    }
    Ok(())
}

fn check_mtu(v: &str, policy: &Policy) -> Result<(), Denial> {
    let (lo, hi) = (policy.network.min_mtu, policy.network.max_mtu);
    let n = if v.bytes().all(|b| b.is_ascii_digit()) && (1..=5).contains(&v.len()) {
        v.parse::<u32>().ok()
    } else {
        None
    };
    match n {
        Some(n) if (lo..=hi).contains(&n) => Ok(()),
        _ => Err(Denial::new(
            "network.option",
            format!("network MTU `{v}` must be a whole number from {lo} to {hi}"),
        )),
    }
}

fn check_ipam(o: &Object, cx: &Context<'_>) -> Result<(), Denial> {
    let rule = "network.ipam";
    let Some(ipam) = o.object("IPAM")? else {
        return Ok(());
    };
    match ipam.str("Driver")? {
        None | Some("") | Some("default") => {}
        Some(d) => {
            return Err(Denial::new(
                rule,
                format!("IPAM driver `{d}` is not allowed; only the default one is"),
            ));
        }
    }
    if let Some((k, _)) = ipam.str_map("Options")?.unwrap_or_default().first() {
        return Err(Denial::new(
            rule,
            format!("IPAM option `{k}` is not allowed"),
        ));
    }
    for cfg in ipam.object_list("Config")?.unwrap_or_default() {
        match cfg.str("Subnet")? {
            None | Some("") => {}
            Some(s) => check_subnet(s, cx)?,
        }
    }
    Ok(())
}

fn check_subnet(s: &str, cx: &Context<'_>) -> Result<(), Denial> {
    let rule = "network.ipam";
    let Some((net, prefix)) = parse_cidr(s) else {
        return Err(Denial::new(
            rule,
            format!("subnet `{s}` is not an IPv4 CIDR (IPv6 networks are not allowed)"),
        ));
    };
    let Some(routes) = cx.routes else {
        return Err(Denial::new(
            rule,
            format!("subnet `{s}` cannot be checked: the host's routes are unknown"),
        ));
    };
    let clash = routes
        .iter()
        .filter(|r| r.prefix > 0 && Some(&r.iface) != cx.own_iface.as_ref())
        .find(|r| overlaps(net, prefix, r.network, r.prefix));
    match clash {
        Some(r) => Err(Denial::new(
            rule,
            format!(
                "subnet `{s}` overlaps the host route {}/{} on `{}`",
                r.network, r.prefix, r.iface
            ),
        )),
        None => Ok(()),
    }
}

/// Parses `a.b.c.d/n` as Go's `net.ParseCIDR` does for IPv4 (no leading zeros in the address).
pub fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (a, p) = s.split_once('/')?;
    if !p.bytes().all(|b| b.is_ascii_digit()) || !(1..=2).contains(&p.len()) {
        return None;
    }
    let prefix: u8 = p.parse().ok().filter(|n| *n <= 32)?;
    Some((a.parse().ok()?, prefix))
}

/// Two prefixes overlap when they agree on the shorter prefix's bits.
pub fn overlaps(a: Ipv4Addr, ap: u8, b: Ipv4Addr, bp: u8) -> bool {
    let p = ap.min(bp);
    let mask = if p == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(p))
    };
    (u32::from(a) & mask) == (u32::from(b) & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_like_go() {
        assert_eq!(
            parse_cidr("10.1.2.0/24"),
            Some((Ipv4Addr::new(10, 1, 2, 0), 24))
        );
        assert_eq!(
            parse_cidr("10.1.2.3/32"),
            Some((Ipv4Addr::new(10, 1, 2, 3), 32))
        );
        for bad in [
            "10.1.2.0",
            "10.1.2.0/33",
            "010.1.2.0/24",
            "10.1.2.0/+8",
            "fd00::/64",
            "10.1.2.0/ 8",
            "10.1.2.0/",
        ] {
            assert_eq!(parse_cidr(bad), None, "{bad}");
        }
    }

    #[test]
    fn overlap_is_symmetric_and_exact() {
        let ip = |s: &str| s.parse::<Ipv4Addr>().expect("ip");
        assert!(overlaps(ip("192.0.2.128"), 25, ip("192.0.2.0"), 24));
        assert!(overlaps(ip("192.0.2.0"), 24, ip("192.0.2.128"), 25));
        assert!(overlaps(ip("10.0.0.0"), 8, ip("10.200.0.0"), 16));
        assert!(!overlaps(ip("192.0.3.0"), 24, ip("192.0.2.0"), 24));
        assert!(overlaps(ip("1.2.3.4"), 0, ip("9.9.9.9"), 32));
    }
}
