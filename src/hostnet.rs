//! Host network facts the policy needs: the IPv4 routing table, read from `/proc/net/route`.
//!
//! The proxy reads its own network namespace, which is the daemon's in every supported
//! deployment (both run on the host). A daemon in another namespace needs its own proxy there.

use std::net::Ipv4Addr;

use crate::policy::facts::HostRoute;

/// Why the routing table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("reading `/proc/net/route`: {0}")]
    Read(#[from] std::io::Error),
    #[error("unexpected line in `/proc/net/route`: `{0}`")]
    Parse(String),
}

/// The main table's IPv4 routes.
pub fn routes() -> Result<Vec<HostRoute>, RouteError> {
    parse(&std::fs::read_to_string("/proc/net/route")?)
}

/// Parses the kernel's route table text (header line, then one route a line; addresses are
/// hexadecimal 32-bit values in host byte order).
pub fn parse(text: &str) -> Result<Vec<HostRoute>, RouteError> {
    let mut out = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || RouteError::Parse(line.to_owned());
        let (Some(iface), Some(dest), Some(mask)) = (f.first(), f.get(1), f.get(7)) else { return Err(bad()) };
        let addr = |h: &str| u32::from_str_radix(h, 16).map(|v| Ipv4Addr::from(v.to_ne_bytes())).map_err(|_| bad());
        let (network, mask) = (addr(dest)?, addr(mask)?);
        let prefix = u32::from(mask).leading_ones() as u8;
        out.push(HostRoute { network, prefix, iface: (*iface).to_owned() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_format() {
        let text = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                    eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                    docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let r = parse(text).expect("parses");
        if cfg!(target_endian = "little") {
            assert_eq!(r[0], HostRoute { network: Ipv4Addr::UNSPECIFIED, prefix: 0, iface: "eth0".into() });
            assert_eq!(r[1], HostRoute { network: Ipv4Addr::new(172, 17, 0, 0), prefix: 16, iface: "docker0".into() });
        }
    }

    #[test]
    fn this_host_has_a_readable_table() {
        assert!(routes().is_ok());
    }
}
