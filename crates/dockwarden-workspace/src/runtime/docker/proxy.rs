//! The dockwarden proxy in front of a workspace's dockerd: the same `dockwarden proxy` code,
//! run as a child process of the service (see ARCHITECTURE.md for why a child), in the
//! workspace's network namespace so the routes it reads for network checks are the daemon's.

use std::path::Path;

use super::Layout;
use dockwarden_proxy::cli::budget::BudgetArgs;
use dockwarden_proxy::cli::proxy::ProxyArgs;
use dockwarden_proxy::limits::Amount;

/// Most containers one workspace's daemon may hold.
pub const MAX_CONTAINERS: u64 = 64;

/// The proxy's arguments (pure, so they are unit-tested). A typed struct, written to
/// `layout.proxy_args` and read by the child with the proxy's own reader: renaming a field of
/// `ProxyArgs` fails to compile here.
pub fn args(layout: &Layout, worktree: &Path, uid: u32, gid: u32) -> ProxyArgs {
    let burst = crate::resources::cgroup::burst_of(super::dockerd::workspace_cgroup(layout));
    args_with(layout, worktree, uid, gid, burst)
}

/// The container budget: half of the workspace's burst memory and pids (half of the machine
/// where it has none).
pub fn budget(burst: Option<(Option<u64>, Option<u64>)>) -> (Amount, Amount) {
    let half = |v: Option<u64>| {
        v.map(|v| Amount::Absolute((v / 2).max(1)))
            .unwrap_or(Amount::Fraction(0.5))
    };
    match burst {
        Some((mem, pids)) => (half(mem), half(pids)),
        None => (Amount::Fraction(0.5), Amount::Fraction(0.5)),
    }
}

/// `args` with the workspace's burst limit given (memory bytes, pids), for tests.
pub fn args_with(
    layout: &Layout,
    worktree: &Path,
    uid: u32,
    gid: u32,
    burst: Option<(Option<u64>, Option<u64>)>,
) -> ProxyArgs {
    let (memory, pids) = budget(burst);
    ProxyArgs {
        listen: layout.proxy_socket.clone(),
        upstream: layout.daemon_socket.clone(),
        workspace: worktree.to_path_buf(),
        uid: Some(uid),
        gid: Some(gid),
        socket_mode: 0o660,
        policy: Some(layout.policy.clone()),
        audit_log: Some(layout.audit_log.clone()),
        dry_run: false,
        header_timeout: 30,
        max_connections: 1024,
        budget: BudgetArgs {
            max_containers: Some(MAX_CONTAINERS),
            memory_budget: Some(memory),
            pids_budget: Some(pids),
            cgroup_name: layout.cgroup_name.clone(),
            cgroup_root: dockwarden_sys::cgroupfs::ROOT.into(),
            no_cgroup_budget: false,
            daemon_config: layout.daemon_json.clone(),
            allow_unbudgeted_builds: false,
        },
        pin_dir: Some(layout.pin_dir.clone()),
        show_pins: false,
        // Container users other than root are the workspace's subordinate ids (userns-remap):
        // what they write into binds is handed back like root's (`subid.rs`).
        hand_back_ids: layout.ranges.hand_back_range(),
        log: dockwarden_proxy::cli::logging::LogArgs::default(),
    }
}

/// Writes `bytes` to `path`, root-only (0600), replacing what was there.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)
}

/// The embedded default policy with the `private-daemon` profile: prune and builds on user
/// networks are the workspace's own business when the daemon is its own. Checked to parse to
/// that profile, so a changed default policy fails here rather than running with another.
pub fn policy_text() -> Result<String, String> {
    use dockwarden_policy::policy::config::{DEFAULT_POLICY, Policy, Profile};
    let text = DEFAULT_POLICY.replacen("profile = \"default\"", "profile = \"private-daemon\"", 1);
    match Policy::from_toml(&text) {
        Ok(p) if p.profile == Profile::PrivateDaemon => Ok(text),
        Ok(_) => Err("the embedded policy has no `profile = \"default\"` line to switch".into()),
        Err(e) => Err(format!("the private-daemon policy does not load: {e}")),
    }
}

/// Starts the proxy; its log goes to `layout.proxy_log`, its pid to `layout.proxy_pidfile`.
pub fn spawn(
    exe: &Path,
    layout: &Layout,
    worktree: &Path,
    uid: u32,
    gid: u32,
) -> std::io::Result<std::process::Child> {
    let typed = args(layout, worktree, uid, gid);
    let json = serde_json::to_vec_pretty(&typed).map_err(std::io::Error::other)?;
    write_private(&layout.proxy_args, &json)?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("proxy-args").arg(&layout.proxy_args);
    let child = super::spawn::spawn_daemon(
        cmd,
        &[
            ("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
            ("RUST_LOG", "info"),
        ],
        &layout.proxy_log,
        super::spawn::Stdout::Null,
        layout,
    )?;
    std::fs::write(&layout.proxy_pidfile, child.id().to_string())?;
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_is_held_to_the_workspace() {
        let layout = Layout::new(Path::new("/s/workspaces/a"), 20001);
        let a = args(&layout, Path::new("/s/workspaces/a/worktree"), 20001, 20001);
        assert_eq!(a.workspace, Path::new("/s/workspaces/a/worktree"));
        assert_eq!(a.uid, Some(20001));
        assert_eq!(a.budget.max_containers, Some(64));
        assert_eq!(a.upstream, layout.daemon_socket);
        assert_eq!(a.budget.cgroup_name, "dockwarden_ws_20001/containers");
        assert_eq!(a.policy, Some(layout.policy.clone()));
        let a = args_with(
            &layout,
            Path::new("/w"),
            20001,
            20001,
            Some((Some(64 << 20), Some(256))),
        );
        assert_eq!(a.budget.memory_budget, Some(Amount::Absolute(33554432)));
        assert_eq!(a.budget.pids_budget, Some(Amount::Absolute(128)));
        assert_eq!(budget(None), (Amount::Fraction(0.5), Amount::Fraction(0.5)));
        assert_eq!(
            budget(Some((None, Some(100)))),
            (Amount::Fraction(0.5), Amount::Absolute(50))
        );
    }

    /// What the service writes is read by the proxy's own reader (`dockwarden proxy-args`),
    /// field for field; an unknown field is refused, not ignored.
    #[test]
    fn the_proxy_reads_the_arguments_the_service_writes() {
        let layout = Layout::new(Path::new("/s/workspaces/a"), 20001);
        let typed = args_with(&layout, Path::new("/w"), 20001, 20001, None);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("proxy.json");
        write_private(&file, &serde_json::to_vec(&typed).expect("json")).expect("write");
        let parsed =
            dockwarden_proxy::cli::proxy::read_args_file(&file).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(parsed.uid, Some(20001));
        assert_eq!(parsed.listen, layout.proxy_socket);
        assert_eq!(parsed.budget.daemon_config, layout.daemon_json);
        let r = layout.ranges;
        assert_eq!(
            parsed.hand_back_ids,
            dockwarden_proxy::hostfs::watch::IdRange::new(r.base, super::super::subid::SUB_LEN),
            "container users' files are handed back"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A field the proxy does not have (say, renamed on one side only) fails the start.
        let mut v = serde_json::to_value(&typed).expect("json");
        v["listen_socket"] = v["listen"].take();
        v.as_object_mut().expect("object").remove("listen");
        std::fs::write(&file, v.to_string()).expect("write");
        let e = dockwarden_proxy::cli::proxy::read_args_file(&file).expect_err("refused");
        assert!(format!("{e:#}").contains("listen_socket"), "{e:#}");
    }

    #[test]
    fn the_private_daemon_policy_loads_with_that_profile() {
        let text = policy_text().expect("loads");
        assert!(text.contains("profile = \"private-daemon\""));
    }
}
