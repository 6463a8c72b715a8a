//! Network rules: only local bridge networks with a short list of options, and containers may
//! only join networks that meet the same rules (`docs/networks-build.md` has the decisions).
//!
//! Three entry points share one check ([`spec::check`]):
//! - `POST /networks/create` checks the body;
//! - `POST /networks/{id}/connect` checks the daemon's inspect of the target network and the
//!   `EndpointConfig`;
//! - container create checks every user-defined network named in `HostConfig.NetworkMode` or
//!   `NetworkingConfig.EndpointsConfig` ([`needs_endpoints`] and [`check_endpoints`]).

pub mod spec;

use super::catalogue::Rule;
use super::facts::NetworkFact;
use super::{Denial, FactQuery, Facts, Permitted, Policy, Request};
use crate::api::json::{Json, Object};

pub const RULES: &[Rule] = &[
    Rule {
        id: "network.driver",
        rationale: "macvlan and ipvlan attach to host interfaces, overlay needs swarm, host and null share or drop the host's stack, and other names load plugins; only bridge is allowed",
        hint: "create the network without `--driver` (bridge)",
    },
    Rule {
        id: "network.option",
        rationale: "bridge options can adopt host bridges, change published-port addresses, routing or NAT; only MTU (in the policy's range) and IP masquerade on are allowed",
        hint: "drop `--opt` except `com.docker.network.driver.mtu`",
    },
    Rule {
        id: "network.scope",
        rationale: "swarm-scoped and ingress networks belong to swarm mode, which is not available (`Attachable` only matters there and is accepted)",
        hint: "create a local network without `--scope` or `--ingress`",
    },
    Rule {
        id: "network.config_from",
        rationale: "config-only networks and `ConfigFrom` take driver options and IPAM from another network, bypassing the option checks",
        hint: "give the options directly on `docker network create`",
    },
    Rule {
        id: "network.ipam",
        rationale: "a custom IPAM driver is a plugin, and a user-chosen subnet that overlaps a host route (LAN, VPN) captures the host's traffic to it",
        hint: "let the daemon pick the subnet, or pick one that no host route covers (see `ip route`)",
    },
    Rule {
        id: "network.ipv6",
        rationale: "IPv6 bridge networks hand out routable addresses without the IPv4 NAT and filtering",
        hint: "drop `--ipv6`",
    },
    Rule {
        id: "network.connect",
        rationale: "a container may only join networks that meet the network rules; never the host network",
        hint: "connect to a network created through this proxy, or the default `bridge`",
    },
    Rule {
        id: "network.connect.route",
        rationale: "a network whose subnet a route of the daemon's network namespace now covers (LAN, VPN) would capture that traffic, even if the proxy created it",
        hint: "a host route now covers this network's subnet: remove the network and create it again through the proxy, so the daemon picks a free subnet",
    },
    Rule {
        id: "network.endpoint",
        rationale: "endpoint driver options set sysctls and interface names inside the container's network namespace",
        hint: "drop `--driver-opt` from the network attachment",
    },
];

/// Names that always mean the daemon's default bridge (allowed without a look-up).
const DEFAULT_BRIDGE: &[&str] = &["bridge", "default"];

fn body_object(req: &Request) -> Result<Object, Denial> {
    match &req.body {
        None | Some(Json::Null) => Ok(Object::new()),
        Some(Json::Object(o)) => Ok(o.clone()),
        Some(_) => Err(Denial::new(
            "request.body.invalid",
            "the body must be a JSON object",
        )),
    }
}

pub fn needs_create(_req: &Request) -> Result<Vec<FactQuery>, Denial> {
    Ok(vec![FactQuery::HostRoutes])
}

pub fn needs_connect(_req: &Request, id: &str) -> Result<Vec<FactQuery>, Denial> {
    Ok(vec![
        FactQuery::Network(id.to_owned()),
        FactQuery::HostRoutes,
    ])
}

/// `POST /networks/create`.
pub fn decide_create(req: &Request, facts: &Facts, policy: &Policy) -> Result<Permitted, Denial> {
    let body = body_object(req)?;
    let cx = spec::Context {
        policy,
        routes: facts.host_routes.as_deref(),
        own_iface: None,
    };
    spec::check(&body, &cx)?;
    Ok(Permitted::allow(req))
}

/// `POST /networks/{id}/connect`.
pub fn decide_connect(req: &Request, facts: &Facts, policy: &Policy) -> Result<Permitted, Denial> {
    let crate::api::route::Endpoint::NetworkConnect(id) = &req.route.endpoint else {
        return Err(Denial::new(
            "network.connect",
            "not a network connect request",
        ));
    };
    check_joinable(id, facts, policy)?;
    let body = body_object(req)?;
    if let Some(ep) = body.object("EndpointConfig")? {
        check_endpoint_settings(id, ep)?;
    }
    Ok(Permitted::allow(req))
}

/// The user-defined networks a container create names, as the daemon will resolve them.
fn create_networks(body: &Object) -> Result<Vec<(String, Option<Object>)>, Denial> {
    let mut out: Vec<(String, Option<Object>)> = Vec::new();
    let hc = body.object("HostConfig")?;
    if let Some(mode) = hc.map(|h| h.str("NetworkMode")).transpose()?.flatten() {
        out.push((mode.to_owned(), None));
    }
    let eps = body
        .object("NetworkingConfig")?
        .map(|n| n.object("EndpointsConfig"))
        .transpose()?
        .flatten();
    for (name, v) in eps
        .map(|e| e.entries().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        let settings = match v {
            Json::Null => None,
            Json::Object(o) => Some(o.clone()),
            _ => {
                return Err(Denial::new(
                    "request.body.invalid",
                    "field `EndpointsConfig` must map names to objects",
                ));
            }
        };
        out.push((name.to_owned(), settings));
    }
    Ok(out)
}

/// True for network-mode values the container rules own (`host`, `none`, `container:<id>`)
/// and the default bridge, which need no look-up.
fn is_builtin(name: &str) -> bool {
    name.is_empty()
        || name == "none"
        || name == "host"
        || name.starts_with("container:")
        || DEFAULT_BRIDGE.contains(&name)
}

/// Facts container create needs for its networks: each user-defined network named in
/// `HostConfig.NetworkMode` or `NetworkingConfig.EndpointsConfig`, and the host's routes.
///
/// For the integrator: `endpoints::needs` appends this to `container::needs_create`.
pub fn needs_endpoints(req: &Request) -> Result<Vec<FactQuery>, Denial> {
    let body = body_object(req)?;
    let mut qs: Vec<FactQuery> = create_networks(&body)?
        .into_iter()
        .filter(|(n, _)| !is_builtin(n))
        .map(|(n, _)| FactQuery::Network(n))
        .collect();
    if !qs.is_empty() {
        qs.push(FactQuery::HostRoutes);
    }
    qs.sort();
    qs.dedup();
    Ok(qs)
}

/// Checks the networks a container create joins: every user-defined network must meet the
/// network rules, the host network is refused, and endpoint driver options are refused.
/// `host`/`container:` network modes are judged by the container rules before this runs.
///
/// For the integrator: `endpoints::decide` calls this after `container::decide_create`.
pub fn check_endpoints(req: &Request, facts: &Facts, policy: &Policy) -> Result<(), Denial> {
    let body = body_object(req)?;
    for (name, settings) in create_networks(&body)? {
        if name == "host" {
            return Err(Denial::new(
                "network.connect",
                "joining the host network is not allowed",
            ));
        }
        if !is_builtin(&name) {
            check_joinable(&name, facts, policy)?;
        }
        if let Some(s) = settings {
            check_endpoint_settings(&name, &s)?;
        }
    }
    Ok(())
}

/// The network a container would join must exist and meet the same rules as a new one.
pub(crate) fn check_joinable(
    reference: &str,
    facts: &Facts,
    policy: &Policy,
) -> Result<(), Denial> {
    let rule = "network.connect";
    let nf = match facts.networks.get(reference) {
        None => {
            return Err(Denial::new(
                rule,
                format!("network `{reference}` was not looked up"),
            ));
        }
        Some(None) => {
            return Err(Denial::new(
                rule,
                format!("network `{reference}` not found"),
            ));
        }
        Some(Some(nf)) => nf,
    };
    if nf.name == "host" || nf.driver == "host" {
        return Err(Denial::new(rule, "joining the host network is not allowed"));
    }
    if is_default_bridge(nf) {
        return Ok(());
    }
    let raw = nf.raw.as_object().cloned().unwrap_or_default();
    let own = nf.id.get(..12).map(|short| format!("br-{short}"));
    // First every rule but the route overlap: a network made through the proxy passed them at
    // create, so failing one means it was made elsewhere (the `network.connect` hint). Only a
    // route that appeared since can refuse a network the proxy made (`network.connect.route`).
    // Either way the refusal names one rule.
    let no_routes = spec::Context {
        policy,
        routes: Some(&[]),
        own_iface: own.clone(),
    };
    spec::check(&raw, &no_routes).map_err(|d| {
        Denial::new(
            rule,
            format!(
                "network `{}` does not meet the network rules: {}",
                nf.name, d.message
            ),
        )
    })?;
    let cx = spec::Context {
        policy,
        routes: facts.host_routes.as_deref(),
        own_iface: own,
    };
    spec::check(&raw, &cx).map_err(|d| {
        Denial::new(
            "network.connect.route",
            format!("network `{}`: {}", nf.name, d.message),
        )
    })
}

/// The daemon's own default bridge (`docker0`), which every container joins by default.
fn is_default_bridge(nf: &NetworkFact) -> bool {
    nf.name == "bridge"
        && nf
            .options
            .iter()
            .any(|(k, v)| k == "com.docker.network.bridge.default_bridge" && v == "true")
}

fn check_endpoint_settings(network: &str, ep: &Object) -> Result<(), Denial> {
    if let Some((k, _)) = ep.str_map("DriverOpts")?.unwrap_or_default().first() {
        return Err(Denial::new(
            "network.endpoint",
            format!("endpoint driver option `{k}` on network `{network}` is not allowed"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
