//! Host network facts the policy needs: the IPv4 routing table of the daemon's network
//! namespace.
//!
//! The daemon may run in another network namespace than the proxy (a per-workspace private
//! dockerd, or the 26.1 engine in `/run/netns/docker26`): its bridges, and the subnets it picks,
//! are judged against *its* routes. [`daemon_routes`] finds the daemon's pid with `SO_PEERCRED`
//! on a fresh connection to its socket and reads `/proc/<pid>/net/route`, which shows the table
//! of that process's network namespace.

use std::net::Ipv4Addr;
use std::path::Path;

use crate::policy::facts::HostRoute;

/// Why the routing table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("reading `/proc/net/route`: {0}")]
    Read(#[from] std::io::Error),
    #[error("unexpected line in `/proc/net/route`: `{0}`")]
    Parse(String),
    #[error("the daemon at `{0}` has no pid visible here (another pid namespace)")]
    NoPid(String),
}

/// The main table's IPv4 routes of the proxy's own network namespace.
pub fn routes() -> Result<Vec<HostRoute>, RouteError> {
    parse(&std::fs::read_to_string("/proc/net/route")?)
}

/// The pid at the other end of the daemon socket (`SO_PEERCRED`: the process that listens).
pub fn daemon_pid(socket: &Path) -> Result<i32, RouteError> {
    let s = std::os::unix::net::UnixStream::connect(socket)?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(std::io::Error::from)?;
    match cred.pid() {
        p if p > 0 => Ok(p),
        _ => Err(RouteError::NoPid(socket.display().to_string())),
    }
}

/// The IPv4 routes of the network namespace of the daemon listening on `socket`.
///
/// INVARIANT: errors are returned, never replaced by the proxy's own table: the wrong
/// namespace's routes would judge subnets against the wrong host.
pub fn daemon_routes(socket: &Path) -> Result<Vec<HostRoute>, RouteError> {
    let pid = daemon_pid(socket)?;
    parse(&std::fs::read_to_string(format!("/proc/{pid}/net/route"))?)
}

/// Parses the kernel's route table text (header line, then one route a line; addresses are
/// hexadecimal 32-bit values in host byte order).
pub fn parse(text: &str) -> Result<Vec<HostRoute>, RouteError> {
    let mut out = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || RouteError::Parse(line.to_owned());
        let (Some(iface), Some(dest), Some(mask)) = (f.first(), f.get(1), f.get(7)) else {
            return Err(bad());
        };
        let addr = |h: &str| {
            u32::from_str_radix(h, 16)
                .map(|v| Ipv4Addr::from(v.to_ne_bytes()))
                .map_err(|_| bad())
        };
        let (network, mask) = (addr(dest)?, addr(mask)?);
        let prefix = u32::from(mask).leading_ones() as u8;
        out.push(HostRoute {
            network,
            prefix,
            iface: (*iface).to_owned(),
        });
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
            assert_eq!(
                r[0],
                HostRoute {
                    network: Ipv4Addr::UNSPECIFIED,
                    prefix: 0,
                    iface: "eth0".into()
                }
            );
            assert_eq!(
                r[1],
                HostRoute {
                    network: Ipv4Addr::new(172, 17, 0, 0),
                    prefix: 16,
                    iface: "docker0".into()
                }
            );
        }
    }

    #[test]
    fn this_host_has_a_readable_table() {
        assert!(routes().is_ok());
    }

    #[test]
    fn reads_the_table_of_the_socket_owners_namespace() {
        // Our own listener: its peer is this process, so the table is our namespace's.
        let dir = std::env::temp_dir().join(format!("dwhostnet-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let sock = dir.join("s.sock");
        let _ = std::fs::remove_file(&sock);
        let _l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        assert_eq!(daemon_pid(&sock).expect("pid"), std::process::id() as i32);
        assert_eq!(
            daemon_routes(&sock).expect("routes"),
            routes().expect("routes")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
