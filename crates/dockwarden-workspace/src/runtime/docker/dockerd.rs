//! The workspace's private dockerd: its generated `daemon.json`, start in the workspace's
//! network namespace, readiness, and stop. Data root, exec root, pidfile and socket are the
//! workspace's own; so is its containerd, which the runtime starts first (`containerd.rs`)
//! and dockerd is pointed at.

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::Layout;
use dockwarden_policy::policy::facts::HostRoute;

/// Address space the workspaces' daemons take their networks from: 2048 slots of /20.
const POOL_BASE: u32 = u32::from_be_bytes([10, 128, 0, 0]);
const SLOTS: u32 = 2048;
const SLOT_BITS: u32 = 12;

/// The networks of one daemon: the default bridge and the pool compose networks come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    /// `bip`: the default bridge's gateway address with its prefix (`10.128.16.1/24`).
    pub bip: String,
    /// The `/20` this daemon allocates user networks from (in `/24`s).
    pub pool: String,
}

/// Whether the networks `a/a_len` and `b/b_len` share an address.
pub(crate) fn overlaps(a: u32, a_len: u32, b: u32, b_len: u32) -> bool {
    let len = a_len.min(b_len);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a & mask == b & mask
}

/// No address slot is free of the host's routes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "every one of the {} /{} address slots in {}/9 overlaps a host route; \
     a workspace daemon would clash with the host's networks",
    SLOTS,
    32 - SLOT_BITS,
    Ipv4Addr::from(POOL_BASE)
)]
pub struct NoFreeSlot;

/// Pure: the address slot of the workspace with `uid`, moved past any slot that overlaps a
/// host route (the default route aside). Distinct uids below 2048 apart get distinct slots.
/// When every slot clashes, an error: a clashing pool is never handed out.
pub fn addresses(uid: u32, host_routes: &[HostRoute]) -> Result<Addresses, NoFreeSlot> {
    let clashes = |net: u32| {
        host_routes.iter().any(|r| {
            r.prefix > 0
                && overlaps(
                    net,
                    32 - SLOT_BITS,
                    u32::from(r.network),
                    u32::from(r.prefix),
                )
        })
    };
    let net = (0..SLOTS)
        .map(|i| POOL_BASE + (((uid % SLOTS + i) % SLOTS) << SLOT_BITS))
        .find(|net| !clashes(*net))
        .ok_or(NoFreeSlot)?;
    // The bridge takes the last /24 of the slot; the pool hands out the first fifteen.
    let bridge = net + (15 << 8);
    Ok(Addresses {
        bip: format!("{}/24", Ipv4Addr::from(bridge + 1)),
        pool: format!("{}/20", Ipv4Addr::from(net)),
    })
}

/// Pure: the generated `daemon.json`.
pub fn config(layout: &Layout, addrs: &Addresses) -> serde_json::Value {
    json!({
        "data-root": layout.data_root,
        "exec-root": layout.exec_root,
        "pidfile": layout.pidfile,
        "hosts": [format!("unix://{}", layout.daemon_socket.display())],
        // Its own containerd, started before it (`containerd.rs`).
        "containerd": super::containerd::Paths::of(layout).socket,
        "group": "root",
        // Container root is the workspace's own uid; container users are its subordinate
        // range (`subid.rs`). No container process is ever host root.
        "userns-remap": format!("{0}:{0}", layout.ranges.name()),
        "bip": addrs.bip,
        "default-address-pools": [{ "base": addrs.pool, "size": 24 }],
        "log-driver": "json-file",
        "log-opts": { "max-size": "10m", "max-file": "3" },
        "builder": { "entitlements": { "network-host": false, "security-insecure": false } },
        // BuildKit RUN steps of `/build?version=2` (and 20.10's `/grpc`) ignore the per-build
        // cgroup parent; only the daemon's own setting keeps them in the workspace's budget
        // (cgroupfs driver: the proxy's parent is `/<name>`, see `limits::install`).
        "cgroup-parent": format!("/{}", layout.cgroup_name),
        "live-restore": false,
        // No iptables of its own: its start would make about a hundred `iptables` calls
        // (~230 ms of a ~340 ms start, benches/README.md). The namespace's one masquerade
        // on the link (`wsnet::masquerade_inside`) stands for its per-network ones, and
        // published ports are its userland proxy's, which answered them inside already.
        "iptables": false,
        "ip-masq": false,
        "shutdown-timeout": 5,
        "userland-proxy": true,
    })
}

/// PATH for dockerd: its own directory first (containerd, docker-proxy, runc next to it,
/// as in the `/opt/docker26` layout), then the system's.
pub fn path_for(dockerd: &Path) -> String {
    let mut dirs: Vec<String> = Vec::new();
    if let Some(sbin) = dockerd.parent() {
        if let Some(prefix) = sbin.parent() {
            dirs.push(prefix.join("bin").display().to_string());
        }
        dirs.push(sbin.display().to_string());
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        if !dirs.iter().any(|x| x == d) {
            dirs.push(d.to_string());
        }
    }
    dirs.join(":")
}

/// Starts dockerd in the namespace; its output goes to `layout.dockerd_log`.
pub fn spawn(dockerd: &Path, layout: &Layout) -> std::io::Result<std::process::Child> {
    let mut cmd = std::process::Command::new(dockerd);
    cmd.arg("--config-file").arg(&layout.daemon_json);
    let path = path_for(dockerd);
    super::spawn::spawn_daemon(
        cmd,
        &[("PATH", &path), ("HOME", "/root")],
        &layout.dockerd_log,
        super::spawn::Stdout::Log,
        layout,
    )
}

/// The workspace's own cgroup: the first segment of the container parent.
pub fn workspace_cgroup(layout: &Layout) -> &str {
    layout.cgroup_name.split('/').next().unwrap_or_default()
}

/// Reads a pid file and checks that the process is still `exe_name` (pids get reused).
pub fn live_pid(pidfile: &Path, exe_name: &str) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let pid: i32 = std::fs::read_to_string(pidfile).ok()?.trim().parse().ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let name = Path::new(std::ffi::OsStr::from_bytes(argv0));
    (alive(pid)
        && name
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == exe_name))
    .then_some(pid)
}

/// How often `terminate` looks whether the process is gone: a daemon with nothing left to
/// stop exits within a few milliseconds of its SIGTERM.
const GONE_EVERY: Duration = Duration::from_millis(5);

/// SIGTERMs `pid`, waits up to `grace`, then SIGKILLs; returns once it is gone.
pub async fn terminate(pid: i32, grace: Duration) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let p = Pid::from_raw(pid);
    if kill(p, Signal::SIGTERM).is_err() {
        return;
    }
    use dockwarden_sys::poll::{Probe, poll_until};
    let gone = || {
        std::future::ready(if alive(pid) {
            Probe::Retry
        } else {
            Probe::Done
        })
    };
    if poll_until(grace, GONE_EVERY, gone).await.is_done() {
        return;
    }
    let _ = kill(p, Signal::SIGKILL);
    poll_until(Duration::from_secs(5), GONE_EVERY, gone).await;
}

/// Alive and not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Pids whose cmdline mentions `needle` (used to find a containerd or shim left behind).
pub fn pids_mentioning(needle: &Path) -> Vec<i32> {
    let needle = needle.as_os_str().as_encoded_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_config_turns_entitlements_off_and_keeps_build_steps_in_the_budget() {
        let l = Layout::new(Path::new("/state/ws/a"), 20007);
        let c = config(&l, &addresses(20007, &[]).expect("free"));
        assert_eq!(c["cgroup-parent"], "/dockwarden_ws_20007/containers");
        assert_eq!(c["builder"]["entitlements"]["network-host"], false);
        assert_eq!(c["builder"]["entitlements"]["security-insecure"], false);
        assert_eq!(c["log-driver"], "json-file");
        assert_eq!(
            c["log-opts"]["max-size"], "10m",
            "the json-file logs are size-capped"
        );
        assert_eq!(c["log-opts"]["max-file"], "3");
        assert_eq!(c["hosts"][0], "unix:///state/ws/a/docker/docker.sock");
        assert_eq!(c["live-restore"], false);
        assert_eq!(c["iptables"], false, "the namespace masquerades instead");
        assert_eq!(c["ip-masq"], false);
        assert_eq!(c["userland-proxy"], true, "published ports need it then");
        assert_eq!(
            c["userns-remap"],
            format!("dw{0}:dw{0}", l.ranges.uid),
            "container root is never host root"
        );
        assert_eq!(
            c["containerd"],
            "/state/ws/a/docker/exec/containerd/containerd.sock"
        );
    }

    #[test]
    fn data_root_exec_root_and_pidfile_are_the_workspace_own() {
        let ws = Path::new("/state/workspaces/a");
        let l = Layout::new(ws, 20007);
        let c = config(&l, &addresses(20007, &[]).expect("free"));
        let root = ws.join("docker");
        for (key, leaf) in [
            ("data-root", "data"),
            ("exec-root", "exec"),
            ("pidfile", "docker.pid"),
        ] {
            let got = std::path::PathBuf::from(c[key].as_str().expect(key));
            assert_eq!(got, root.join(leaf), "{key}");
            assert!(
                got.starts_with(ws),
                "{key} is under the workspace directory"
            );
        }
        // And never the host daemon's.
        for host in ["/var/lib/docker", "/var/run/docker", "/run/docker"] {
            assert!(!c.to_string().contains(&format!("\"{host}")), "{c}");
        }
    }

    fn route(net: u32, prefix: u8) -> HostRoute {
        HostRoute {
            network: Ipv4Addr::from(net),
            prefix,
            iface: "eth1".into(),
        }
    }

    #[test]
    fn slots_are_distinct_and_skip_host_routes() {
        let a = addresses(20000, &[]).expect("free");
        let b = addresses(20001, &[]).expect("free");
        assert_ne!(a, b);
        assert!(a.bip.ends_with(".1/24"));
        let narrow = vec![route(POOL_BASE + ((20000 % SLOTS) << SLOT_BITS), 24)];
        let moved = addresses(20000, &narrow).expect("the next slot is free");
        assert_ne!(moved, a, "the clashing slot is skipped");
        assert_eq!(moved, b);
        // The default route is no clash.
        assert_eq!(addresses(20000, &[route(0, 0)]), Ok(a));
        // The last slot wraps around to the first.
        let last = vec![route(POOL_BASE + ((SLOTS - 1) << SLOT_BITS), 20)];
        assert_eq!(addresses(SLOTS - 1, &last), addresses(0, &[]));
    }

    #[test]
    fn every_slot_clashing_is_an_error_not_a_clashing_pool() {
        // One /9 route over the whole space.
        assert_eq!(addresses(1, &[route(POOL_BASE, 9)]), Err(NoFreeSlot));
        // Or a wider one (10.0.0.0/8).
        assert_eq!(addresses(77, &[route(10 << 24, 8)]), Err(NoFreeSlot));
        // Two halves, each a /10: still nothing free.
        let halves = vec![route(POOL_BASE, 10), route(POOL_BASE + (1 << 22), 10)];
        assert_eq!(addresses(5, &halves), Err(NoFreeSlot));
        // One /20 left free among many routes is found from any uid.
        let all_but_one: Vec<HostRoute> = (0..SLOTS)
            .filter(|s| *s != 1234)
            .map(|s| route(POOL_BASE + (s << SLOT_BITS), 20))
            .collect();
        let free = addresses(9, &all_but_one).expect("one slot is free");
        let want = Ipv4Addr::from(POOL_BASE + (1234 << SLOT_BITS));
        assert_eq!(free.pool, format!("{want}/20"));
        assert!(NoFreeSlot.to_string().contains("overlaps a host route"));
    }

    #[test]
    fn path_puts_the_engine_directory_first() {
        let p = path_for(Path::new("/opt/docker26/usr/sbin/dockerd"));
        assert!(p.starts_with("/opt/docker26/usr/bin:/opt/docker26/usr/sbin:"));
        assert!(p.contains(":/usr/sbin:"));
    }
}
