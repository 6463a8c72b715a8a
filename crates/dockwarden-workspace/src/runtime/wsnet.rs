//! Every workspace's network, the same for both runtimes: a network namespace of its own
//! with its loopback up and one veth to the host (`eth0` inside, `dwe<uid>` or `dwi<uid>` on
//! the host), a /31 of `10.127.0.0/16` on it, and a default route through the host side,
//! which masquerades what the workspace sends out. A standard workspace's namespace is made
//! here and kept at `<workspace dir>/netns`; a docker-compose workspace's is its daemon's
//! (`docker::netns`), which gets its link here and one masquerade on it inside
//! (`masquerade_inside`: its dockerd adds no iptables rules of its own). docs/isolation.md, "Network", says why.
//!
//! The walls are host-wide chains installed once at service start and matched by the link
//! names' prefixes; nothing is installed per workspace, so a crash leaves no rule behind:
//! - `mangle DOCKWARDEN-WS-IN` (first in INPUT): a workspace link reaches nothing of the host
//!   itself (any of its addresses, the Docker bridges' gateways) but replies to the host;
//! - `mangle DOCKWARDEN-WS` (first in FORWARD): nothing is forwarded into a workspace link but
//!   replies, and nothing from one to the Docker bridges (`docker*`, `br-*`), the link pool,
//!   the private daemons' pools, link-local addresses (`169.254.169.254`) or loopback. It is
//!   in `mangle`, which runs before every `filter` rule: Docker inserts its own FORWARD jumps
//!   (and ACCEPTs for published ports) at the top of `filter` whenever it starts;
//! - `filter DOCKWARDEN-WS` (appended to FORWARD): accepts the rest, past a FORWARD policy of
//!   DROP, after the host's own FORWARD rules;
//! - `nat DOCKWARDEN-WS` (POSTROUTING): masquerades the link pool going anywhere but a link.
//!
//! INVARIANT: while the service is root, no workspace command runs in the host's network
//! namespace: `Runtimes` hands LocalRuntime the standard workspace's namespace, made here if
//! it is missing, and fails the command if it cannot be made.
//! INVARIANT: a link's /31 overlaps no host route when it is chosen, under a host-wide lock;
//! every other link's /31 is a host route, so no two links share addresses.
//! INVARIANT: the host-side name carries the egress mode: `dwe` links are forwarded (past the
//! drops), `dwi` links never are (no default route inside, forwarding off on the host side,
//! and every forwarded packet from one dropped in `mangle`).
//! INVARIANT: IPv6 is off on both ends of every link (the chains are IPv4 only); the host side
//! filters by source (`rp_filter`, and the pool in `mangle`).
//! INVARIANT: nothing of a link outlives its namespace's release: the host side is deleted
//! with it (the kernel tears a namespace down later), and at start the links of uids no
//! workspace holds are deleted.

use std::collections::HashSet;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::docker::{dockerd, netns};
use dockwarden_policy::policy::facts::HostRoute;

/// The links' addresses: 32768 /31s, one per uid modulo 32768 (`serve --uid-count` is at most
/// that), moved past any that overlaps a host route.
const LINK_BASE: u32 = u32::from_be_bytes([10, 127, 0, 0]);
const LINK_POOL: &str = "10.127.0.0/16";
const LINK_SLOTS: u32 = 1 << 15;
/// The private daemons' address pools (`dockerd::addresses`).
const DAEMON_POOLS: &str = "10.128.0.0/9";
/// The workspace's end of its link.
pub const INSIDE: &str = "eth0";
/// Host-wide: chain install and link set-up of every service on this host.
const LOCK: &str = "/run/dockwarden-wsnet.lock";
pub const CHAIN: &str = "DOCKWARDEN-WS";
pub const CHAIN_IN: &str = "DOCKWARDEN-WS-IN";
/// (table, built-in chain, our chain, insert first): the jumps to the chains.
const JUMPS: [(&str, &str, &str, bool); 4] = [
    ("mangle", "FORWARD", CHAIN, true),
    ("mangle", "INPUT", CHAIN_IN, true),
    ("filter", "FORWARD", CHAIN, false),
    ("nat", "POSTROUTING", CHAIN, false),
];

/// What a workspace may reach beyond the walls (`serve --egress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Egress {
    /// Anything else, masqueraded by the host.
    #[default]
    Nat,
    /// Nothing: no default route, nothing forwarded.
    None,
}

impl std::str::FromStr for Egress {
    type Err = String;
    fn from_str(s: &str) -> Result<Egress, String> {
        match s {
            "nat" => Ok(Egress::Nat),
            "none" => Ok(Egress::None),
            _ => Err(format!("egress `{s}` is neither `nat` nor `none`")),
        }
    }
}

impl Egress {
    fn prefix(self) -> &'static str {
        match self {
            Egress::Nat => "dwe",
            Egress::None => "dwi",
        }
    }
}

/// The host side of the link of `uid` (at most 13 bytes: an interface name has 15).
pub fn link_name(uid: u32, egress: Egress) -> String {
    format!("{}{uid}", egress.prefix())
}

/// The standard runtime's namespace file in a workspace directory.
pub fn ns_path(ws_dir: &Path) -> PathBuf {
    ws_dir.join("netns")
}

/// The two ends of a link's /31.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkAddrs {
    pub host: Ipv4Addr,
    pub inside: Ipv4Addr,
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error(
        "every /31 of {LINK_POOL} overlaps a host route; a workspace link would clash with the host's networks"
    )]
    NoFreeLink,
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetError {
    let what = what.into();
    move |source| NetError::Io { what, source }
}

/// Pure: the /31 of `uid`, moved past any that overlaps a host route (the default route aside).
pub fn link_addrs(uid: u32, host_routes: &[HostRoute]) -> Result<LinkAddrs, NetError> {
    let clashes = |net: u32| {
        host_routes.iter().any(|r| {
            r.prefix > 0 && dockerd::overlaps(net, 31, u32::from(r.network), u32::from(r.prefix))
        })
    };
    let net = (0..LINK_SLOTS)
        .map(|i| LINK_BASE + (((uid % LINK_SLOTS + i) % LINK_SLOTS) << 1))
        .find(|net| !clashes(*net))
        .ok_or(NetError::NoFreeLink)?;
    Ok(LinkAddrs {
        host: Ipv4Addr::from(net),
        inside: Ipv4Addr::from(net + 1),
    })
}

/// Pure: the `iptables-restore --noflush` input that (re)writes the chains whole.
pub fn rules() -> String {
    let mut r = vec![
        "*mangle".to_string(),
        format!(":{CHAIN} - [0:0]"),
        format!(":{CHAIN_IN} - [0:0]"),
    ];
    let fwd = |spec: &str| format!("-A {CHAIN} {spec}");
    r.extend([
        fwd("-i dwi+ -j DROP"),
        fwd("-o dwi+ -j DROP"),
        fwd("-o dwe+ -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"),
        fwd("-o dwe+ -j DROP"),
        fwd(&format!("-i dwe+ ! -s {LINK_POOL} -j DROP")),
    ]);
    for dst in [LINK_POOL, DAEMON_POOLS, "169.254.0.0/16", "127.0.0.0/8"] {
        r.push(fwd(&format!("-i dwe+ -d {dst} -j DROP")));
    }
    for out in ["docker+", "br-+"] {
        r.push(fwd(&format!("-i dwe+ -o {out} -j DROP")));
    }
    for link in ["dwe+", "dwi+"] {
        r.push(format!(
            "-A {CHAIN_IN} -i {link} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"
        ));
        r.push(format!("-A {CHAIN_IN} -i {link} -j DROP"));
    }
    r.push("COMMIT".into());
    r.extend([
        "*filter".into(),
        format!(":{CHAIN} - [0:0]"),
        fwd("-i dwe+ -j ACCEPT"),
    ]);
    r.push(fwd(
        "-o dwe+ -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
    ));
    r.extend(["COMMIT".into(), "*nat".into(), format!(":{CHAIN} - [0:0]")]);
    r.push(fwd(&format!("-s {LINK_POOL} -o dwe+ -j RETURN")));
    r.push(fwd(&format!("-s {LINK_POOL} -j MASQUERADE")));
    r.push("COMMIT".into());
    r.join("\n") + "\n"
}

/// Pure: the `ip -batch` run inside the namespace: loopback, the veth (its host end sent to
/// the service's namespace), the inside address, and a default route unless egress is off.
fn inside_batch(host_link: &str, a: LinkAddrs, egress: Egress, service_pid: u32) -> String {
    let mut b = format!(
        "link set lo up\n\
         link add {INSIDE} type veth peer name {host_link} netns /proc/{service_pid}/ns/net\n\
         addr add {}/31 dev {INSIDE}\n\
         link set {INSIDE} up\n",
        a.inside
    );
    if egress == Egress::Nat {
        b.push_str(&format!("route add default via {} dev {INSIDE}\n", a.host));
    }
    b
}

/// Pure: the `iptables-restore --noflush` input of a docker-compose workspace's namespace:
/// whatever leaves through the link (its containers' traffic, from any of the daemon's
/// networks) leaves with the link's address, the only source the host forwards from a link.
pub fn masquerade_rules() -> String {
    format!("*nat\n-A POSTROUTING -o {INSIDE} -j MASQUERADE\nCOMMIT\n")
}

/// Installs [`masquerade_rules`] in the namespace at `ns`. Its private dockerd runs with
/// `iptables: false` (`dockerd::config`): this one rule stands for the per-network
/// masquerades it would add, and its start skips about a hundred `iptables` calls.
pub fn masquerade_inside(ns: &Path) -> Result<(), NetError> {
    let child = netns::spawn_in(ns, || {
        spawn("iptables-restore", &["-w", "--noflush"]).map_err(io::Error::from)
    })
    .map_err(io_err(format!(
        "running `iptables-restore` in the namespace at `{}`",
        ns.display()
    )))?;
    feed(
        child,
        "iptables-restore -w --noflush (in the namespace)",
        &masquerade_rules(),
    )
}

/// Pure: the links among `names` that belong to a uid of `range` no workspace holds.
pub fn stale_links<'a>(
    names: impl IntoIterator<Item = &'a str>,
    range: &Range<u32>,
    held: &HashSet<u32>,
) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| {
            let digits = n.strip_prefix("dwe").or_else(|| n.strip_prefix("dwi"));
            digits
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<u32>().ok())
                .is_some_and(|uid| range.contains(&uid) && !held.contains(&uid))
        })
        .map(str::to_owned)
        .collect()
}

/// Workspace networks for this service: the chains are installed, the egress mode chosen.
#[derive(Debug)]
pub struct Net {
    egress: Egress,
}

impl Net {
    /// Installs the chains (rewritten whole, jumps added if missing) and, for egress, turns
    /// IPv4 forwarding on if it is off. An error refuses to start: workspaces are never left
    /// on the host's network.
    pub fn install(egress: Egress) -> Result<Net, NetError> {
        let _lock = host_lock()?;
        run("iptables-restore", &["-w", "--noflush"], Some(&rules()))?;
        for (table, builtin, chain, first) in JUMPS {
            if run(
                "iptables",
                &["-w", "-t", table, "-C", builtin, "-j", chain],
                None,
            )
            .is_err()
            {
                let at: &[&str] = if first {
                    &["-I", builtin, "1"]
                } else {
                    &["-A", builtin]
                };
                let args: Vec<&str> = ["-w", "-t", table]
                    .iter()
                    .chain(at)
                    .chain(&["-j", chain])
                    .copied()
                    .collect();
                run("iptables", &args, None)?;
            }
        }
        if egress == Egress::Nat {
            let f = "/proc/sys/net/ipv4/ip_forward";
            if std::fs::read_to_string(f).map_err(io_err(f))?.trim() == "0" {
                sysctl(f, "1")?;
                info!(
                    "net.ipv4.ip_forward was 0: turned on, host-wide, for workspace egress (`serve --egress nat`)"
                );
            }
        }
        info!(egress = ?egress, chain = CHAIN, "workspace networks ready");
        Ok(Net { egress })
    }

    /// Whether the namespace at `ns` is there with this mode's link (a stat each).
    pub fn is_ready(&self, ns: &Path, uid: u32) -> bool {
        netns::exists(ns) && link_exists(&link_name(uid, self.egress))
    }

    /// The standard runtime: the namespace at `ns` with its link, made (after whatever was
    /// left there is released) unless it is ready.
    pub fn ensure(&self, ns: &Path, uid: u32) -> Result<(), NetError> {
        let _lock = host_lock()?;
        if self.is_ready(ns, uid) {
            return Ok(());
        }
        release_locked(ns, uid)?;
        let t0 = Instant::now();
        netns::create_bare(ns)
            .map_err(io_err(format!("a network namespace at `{}`", ns.display())))?;
        let a = self.attach_locked(ns, uid).inspect_err(|_| {
            let _ = release_locked(ns, uid);
        })?;
        info!(uid, link = %link_name(uid, self.egress), inside = %a.inside, ms = t0.elapsed().as_millis(), "workspace network up");
        Ok(())
    }

    /// Gives the fresh namespace at `ns` (a docker-compose workspace's) its link.
    pub fn attach(&self, ns: &Path, uid: u32) -> Result<LinkAddrs, NetError> {
        let _lock = host_lock()?;
        self.attach_locked(ns, uid)
    }

    fn attach_locked(&self, ns: &Path, uid: u32) -> Result<LinkAddrs, NetError> {
        // A link left by an earlier namespace of this uid (being torn down, or a crash's).
        detach(uid)?;
        let routes = dockwarden_proxy::hostnet::routes().map_err(|e| NetError::Io {
            what: "the host's routes".into(),
            source: io::Error::other(e.to_string()),
        })?;
        let a = link_addrs(uid, &routes)?;
        let host = link_name(uid, self.egress);
        let batch = inside_batch(&host, a, self.egress, std::process::id());
        let child = netns::spawn_in(ns, || {
            // Every link made in here from now on, ours first, has IPv6 off from the start.
            ipv6_off("default")?;
            spawn("ip", &["-batch", "-"]).map_err(|e| io::Error::other(e.to_string()))
        })
        .map_err(io_err(format!(
            "configuring the namespace at `{}`",
            ns.display()
        )))?;
        let done = feed(child, "ip -batch - (in the namespace)", &batch).and_then(|()| {
            ipv6_off(&host)?;
            sysctl(&format!("/proc/sys/net/ipv4/conf/{host}/rp_filter"), "1")?;
            if self.egress == Egress::None {
                sysctl(&format!("/proc/sys/net/ipv4/conf/{host}/forwarding"), "0")?;
            }
            let up = format!("addr add {}/31 dev {host}\nlink set {host} up\n", a.host);
            run("ip", &["-batch", "-"], Some(&up))
        });
        done.inspect_err(|_| {
            let _ = detach(uid);
        })?;
        Ok(a)
    }

    /// Unmounts the namespace at `ns` (if any) and deletes the link of `uid`.
    pub fn release(&self, ns: &Path, uid: u32) -> Result<(), NetError> {
        let _lock = host_lock()?;
        release_locked(ns, uid)
    }
}

fn release_locked(ns: &Path, uid: u32) -> Result<(), NetError> {
    netns::release(ns).map_err(io_err(format!(
        "releasing the namespace at `{}`",
        ns.display()
    )))?;
    detach(uid)
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Deletes the host side of `uid`'s link in either mode (its peer goes with it) and waits
/// until the name is free.
pub fn detach(uid: u32) -> Result<(), NetError> {
    for name in [link_name(uid, Egress::Nat), link_name(uid, Egress::None)] {
        if !link_exists(&name) {
            continue;
        }
        // Gone meanwhile (its namespace's teardown) is as good as deleted.
        let deleted = run("ip", &["link", "del", &name], None);
        let deadline = Instant::now() + Duration::from_secs(2);
        while link_exists(&name) {
            if Instant::now() > deadline {
                return deleted.and(Err(NetError::Command {
                    cmd: format!("ip link del {name}"),
                    stderr: "the link is still there after 2 s".into(),
                }));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

/// At start: deletes the links of uids in `range` that no workspace holds (a crash's).
pub fn sweep_links(range: Range<u32>, held: &HashSet<u32>) {
    let names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    for name in stale_links(names.iter().map(String::as_str), &range, held) {
        match run("ip", &["link", "del", &name], None) {
            Ok(()) => warn!(link = %name, "deleted a workspace link no workspace holds"),
            Err(e) => warn!(link = %name, error = %e, "deleting a stale workspace link"),
        }
    }
}

/// Unmounts the standard namespace file of a workspace directory with no record, so the
/// directory can be removed.
pub fn release_ns(ws_dir: &Path) {
    let _ = netns::release(&ns_path(ws_dir));
}

fn host_lock() -> Result<nix::fcntl::Flock<std::fs::File>, NetError> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)
        .map_err(io_err(LOCK))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).map_err(|(_, e)| NetError::Io {
        what: format!("locking `{LOCK}`"),
        source: e.into(),
    })
}

fn sysctl(path: &str, value: &str) -> Result<(), NetError> {
    std::fs::write(path, value).map_err(io_err(format!("writing `{path}`")))
}

/// Turns IPv6 off on `dev` (`default`: every link made from now on), in the calling
/// thread's network namespace; a kernel without IPv6 has nothing to turn off.
fn ipv6_off(dev: &str) -> Result<(), NetError> {
    if !Path::new("/proc/sys/net/ipv6").exists() {
        return Ok(());
    }
    sysctl(&format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1")
}

impl From<NetError> for io::Error {
    fn from(e: NetError) -> io::Error {
        io::Error::other(e.to_string())
    }
}

fn spawn(prog: &str, args: &[&str]) -> Result<Child, NetError> {
    Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("running `{prog}`")))
}

fn feed(mut child: Child, cmd: &str, input: &str) -> Result<(), NetError> {
    if let Some(mut stdin) = child.stdin.take() {
        // A child that exited early says why on stderr; the write error adds nothing.
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(io_err(format!("waiting for `{cmd}`")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetError::Command {
            cmd: cmd.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn run(prog: &str, args: &[&str], input: Option<&str>) -> Result<(), NetError> {
    let child = spawn(prog, args)?;
    feed(
        child,
        &format!("{prog} {}", args.join(" ")),
        input.unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(net: [u8; 4], prefix: u8, iface: &str) -> HostRoute {
        HostRoute {
            network: Ipv4Addr::from(net),
            prefix,
            iface: iface.into(),
        }
    }

    #[test]
    fn a_link_is_a_31_of_the_pool_by_uid_and_skips_host_routes() {
        let a = link_addrs(20000, &[]).expect("free");
        assert_eq!(
            a.host,
            Ipv4Addr::new(10, 127, 0x9c, 0x40),
            "20000 mod 32768 = 20000, times 2"
        );
        assert_eq!(u32::from(a.inside), u32::from(a.host) + 1);
        assert_ne!(link_addrs(20001, &[]).expect("free"), a);
        // Uids 32768 apart would share a slot; another link's /31 is a host route, so the
        // second one moves on.
        let taken = vec![route(a.host.octets(), 31, "dwe20000")];
        let moved = link_addrs(20000 + LINK_SLOTS, &taken).expect("the next slot is free");
        assert_eq!(moved, link_addrs(20001, &[]).expect("free"));
        // The default route and unrelated networks are no clash.
        let host = vec![
            route([0, 0, 0, 0], 0, "eth0"),
            route([172, 17, 0, 0], 16, "docker0"),
        ];
        assert_eq!(link_addrs(20000, &host).expect("free"), a);
        // The last slot wraps to the first.
        let last = vec![route([10, 127, 255, 254], 31, "x")];
        assert_eq!(
            link_addrs(LINK_SLOTS - 1, &last).expect("free").host,
            Ipv4Addr::new(10, 127, 0, 0)
        );
    }

    #[test]
    fn a_route_over_the_whole_pool_is_an_error_not_a_clashing_link() {
        for r in [
            route([10, 127, 0, 0], 16, "vpn0"),
            route([10, 0, 0, 0], 8, "vpn0"),
        ] {
            assert!(matches!(link_addrs(7, &[r]), Err(NetError::NoFreeLink)));
        }
        assert!(
            NetError::NoFreeLink
                .to_string()
                .contains("overlaps a host route")
        );
    }

    #[test]
    fn the_link_pool_lies_outside_the_daemons_pools() {
        for uid in [0, 20000, 32767, 32768, u32::MAX] {
            let a = link_addrs(uid, &[]).expect("free");
            let pools = crate::runtime::docker::dockerd::addresses(uid, &[]).expect("free");
            let (net, len) = pools.pool.split_once('/').expect("cidr");
            let net: Ipv4Addr = net.parse().expect("addr");
            assert!(!dockerd::overlaps(
                u32::from(a.host),
                31,
                u32::from(net),
                len.parse().expect("len")
            ));
            assert!(!dockerd::overlaps(
                u32::from(a.host),
                31,
                u32::from(Ipv4Addr::new(10, 128, 0, 0)),
                9
            ));
            assert!(
                link_name(uid, Egress::Nat).len() <= 15,
                "an interface name has at most 15 bytes"
            );
        }
    }

    #[test]
    fn egress_none_gets_no_default_route_and_its_own_link_prefix() {
        let a = link_addrs(20000, &[]).expect("free");
        let nat = inside_batch("dwe20000", a, Egress::Nat, 42);
        assert!(
            nat.contains("peer name dwe20000 netns /proc/42/ns/net"),
            "{nat}"
        );
        assert!(
            nat.contains(&format!("route add default via {} dev eth0", a.host)),
            "{nat}"
        );
        let none = inside_batch("dwi20000", a, Egress::None, 42);
        assert!(!none.contains("route"), "{none}");
        assert!(none.starts_with("link set lo up\n"));
        assert_eq!(link_name(20000, Egress::None), "dwi20000");
        assert_eq!("none".parse::<Egress>(), Ok(Egress::None));
        assert_eq!("nat".parse::<Egress>(), Ok(Egress::Nat));
        assert!("open".parse::<Egress>().is_err());
    }

    #[test]
    fn a_compose_namespace_masquerades_only_what_leaves_through_its_link() {
        let text = masquerade_rules();
        assert_eq!(
            text, "*nat\n-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n",
            "one rule, on the link's inside end"
        );
    }

    #[test]
    fn the_chains_drop_before_they_accept() {
        let text = rules();
        let mangle = &text[..text.find("*filter").expect("filter")];
        for want in [
            "-A DOCKWARDEN-WS -i dwi+ -j DROP",
            "-A DOCKWARDEN-WS -o dwe+ -j DROP",
            "-A DOCKWARDEN-WS -i dwe+ -d 169.254.0.0/16 -j DROP",
            "-A DOCKWARDEN-WS -i dwe+ -d 10.128.0.0/9 -j DROP",
            "-A DOCKWARDEN-WS -i dwe+ -d 10.127.0.0/16 -j DROP",
            "-A DOCKWARDEN-WS -i dwe+ -o docker+ -j DROP",
            "-A DOCKWARDEN-WS -i dwe+ -o br-+ -j DROP",
            "-A DOCKWARDEN-WS-IN -i dwe+ -j DROP",
            "-A DOCKWARDEN-WS-IN -i dwi+ -j DROP",
        ] {
            assert!(mangle.contains(want), "{want} in\n{mangle}");
        }
        assert!(!mangle.contains("ACCEPT"), "mangle only drops");
        // Replies are let back in before the drop of everything else into a link.
        let reply = mangle.find("-o dwe+ -m conntrack").expect("replies");
        assert!(reply < mangle.find("-o dwe+ -j DROP").expect("drop"));
        // Egress-off links are never accepted or masqueraded.
        let rest = &text[text.find("*filter").expect("filter")..];
        assert!(!rest.contains("dwi"), "{rest}");
        assert_eq!(text.matches("COMMIT").count(), 3);
    }

    #[test]
    fn only_links_of_free_uids_in_range_are_stale() {
        let held: HashSet<u32> = [20001].into_iter().collect();
        let names = [
            "lo",
            "eth0",
            "dwe20000",
            "dwi20002",
            "dwe20001",
            "dwe30000",
            "dwe",
            "dwe2x",
            "docker0",
            "dwex20003",
        ];
        assert_eq!(
            stale_links(names, &(20000..20050), &held),
            vec!["dwe20000".to_string(), "dwi20002".to_string()]
        );
    }
}
