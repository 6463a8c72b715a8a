//! The dockwarden proxy in front of a workspace's dockerd: the same `dockwarden proxy` code,
//! run as a child process of the service (see ARCHITECTURE.md for why a child), in the
//! workspace's network namespace so the routes it reads for network checks are the daemon's.

use std::path::Path;
use std::process::Stdio;

use super::{Layout, netns};

/// Most containers one workspace's daemon may hold.
pub const MAX_CONTAINERS: u64 = 64;

/// The proxy's arguments (pure, so the flags are unit-tested).
pub fn args(layout: &Layout, worktree: &Path, uid: u32, gid: u32) -> Vec<String> {
    let burst =
        crate::workspace::resources::cgroup::burst_of(super::dockerd::workspace_cgroup(layout));
    args_with(layout, worktree, uid, gid, burst)
}

/// The container budget: half of the workspace's burst memory and pids.
pub fn budget(burst: Option<(Option<u64>, Option<u64>)>) -> (String, String) {
    let half = |v: Option<u64>| {
        v.map(|v| (v / 2).max(1).to_string())
            .unwrap_or_else(|| "0.5".into())
    };
    match burst {
        Some((mem, pids)) => (half(mem), half(pids)),
        None => ("0.5".into(), "0.5".into()),
    }
}

/// `args` with the workspace's burst limit given (memory bytes, pids), for tests.
pub fn args_with(
    layout: &Layout,
    worktree: &Path,
    uid: u32,
    gid: u32,
    burst: Option<(Option<u64>, Option<u64>)>,
) -> Vec<String> {
    let (memory, pids) = budget(burst);
    let s = |p: &Path| p.display().to_string();
    vec![
        "proxy".into(),
        "--listen".into(),
        s(&layout.proxy_socket),
        "--upstream".into(),
        s(&layout.daemon_socket),
        "--workspace".into(),
        s(worktree),
        "--uid".into(),
        uid.to_string(),
        "--gid".into(),
        gid.to_string(),
        "--socket-mode".into(),
        "660".into(),
        "--pin-dir".into(),
        s(&layout.pin_dir),
        "--audit-log".into(),
        s(&layout.audit_log),
        "--max-containers".into(),
        MAX_CONTAINERS.to_string(),
        // Half of the workspace's burst limit (half of the machine when it has none).
        "--memory-budget".into(),
        memory,
        "--pids-budget".into(),
        pids,
        "--cgroup-name".into(),
        layout.cgroup_name.clone(),
        "--daemon-config".into(),
        s(&layout.daemon_json),
        "--policy".into(),
        s(&layout.policy),
        // Container users other than root are the workspace's subordinate ids (userns-remap):
        // what they write into binds is handed back like root's (`subid.rs`).
        "--hand-back-ids".into(),
        layout.ranges.hand_back(),
    ]
}

/// The embedded default policy with the `private-daemon` profile: prune and builds on user
/// networks are the workspace's own business when the daemon is its own. Checked to parse to
/// that profile, so a changed default policy fails here rather than running with another.
pub fn policy_text() -> Result<String, String> {
    use crate::policy::config::{DEFAULT_POLICY, Policy, Profile};
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
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&layout.proxy_log)?;
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(args(layout, worktree, uid, gid))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0);
    let ws = super::dockerd::workspace_cgroup(layout);
    let child = netns::spawn_in(&layout.netns, || {
        crate::workspace::resources::cgroup::join_for_spawn(ws)?;
        cmd.spawn()
    })?;
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
        let flag = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].clone());
        assert_eq!(
            flag("--workspace").as_deref(),
            Some("/s/workspaces/a/worktree")
        );
        assert_eq!(flag("--uid").as_deref(), Some("20001"));
        assert_eq!(flag("--max-containers").as_deref(), Some("64"));
        assert_eq!(
            flag("--upstream"),
            Some(layout.daemon_socket.display().to_string())
        );
        assert_eq!(
            flag("--cgroup-name").as_deref(),
            Some("dockwarden_ws_20001/containers")
        );
        let a = args_with(
            &layout,
            Path::new("/w"),
            20001,
            20001,
            Some((Some(64 << 20), Some(256))),
        );
        let flag = |f: &str| a.iter().position(|x| x == f).map(|i| a[i + 1].clone());
        assert_eq!(flag("--memory-budget").as_deref(), Some("33554432"));
        assert_eq!(flag("--pids-budget").as_deref(), Some("128"));
        assert_eq!(budget(None), ("0.5".to_string(), "0.5".to_string()));
        assert_eq!(
            budget(Some((None, Some(100)))),
            ("0.5".to_string(), "50".to_string())
        );
        assert_eq!(flag("--policy"), Some(layout.policy.display().to_string()));
    }

    /// The argv the service builds is read by the proxy's own parser: a renamed or removed
    /// flag fails here, not in every docker-compose workspace at run time.
    #[test]
    fn the_proxy_parses_the_arguments_the_service_passes() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            a: crate::cli::proxy::ProxyArgs,
        }
        let layout = Layout::new(Path::new("/s/workspaces/a"), 20001);
        let argv = args_with(&layout, Path::new("/w"), 20001, 20001, None);
        let parsed = Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{e}"))
            .a;
        assert_eq!(parsed.uid, Some(20001));
        let r = layout.ranges;
        assert_eq!(
            parsed.hand_back_ids,
            crate::hostfs::watch::IdRange::new(r.base, super::super::subid::SUB_LEN),
            "container users' files are handed back"
        );
    }

    #[test]
    fn the_private_daemon_policy_loads_with_that_profile() {
        let text = policy_text().expect("loads");
        assert!(text.contains("profile = \"private-daemon\""));
    }
}
