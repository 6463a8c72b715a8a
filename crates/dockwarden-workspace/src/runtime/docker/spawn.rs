//! The one way a runtime daemon (containerd, dockerd, the dockwarden proxy) is started.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::{Layout, dockerd, netns};

/// Where a daemon's standard output goes; its standard error always goes to its log.
pub enum Stdout {
    Log,
    Null,
}

/// Starts `cmd` as one of the workspace's daemons: its environment cleared but for `env`, its
/// output appended to `log`, in a process group of its own (a terminal's ^C to the service
/// does not reach it), inside the workspace's network namespace and its cgroup (every process
/// of the workspace counts against its limits).
pub fn spawn_daemon(
    mut cmd: Command,
    env: &[(&str, &str)],
    log: &Path,
    stdout: Stdout,
    layout: &Layout,
) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let out = match stdout {
        Stdout::Log => Stdio::from(log.try_clone()?),
        Stdout::Null => Stdio::null(),
    };
    cmd.env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(log)
        .process_group(0);
    let ws = dockerd::workspace_cgroup(layout);
    netns::spawn_in(&layout.netns, || {
        crate::resources::cgroup::join_for_spawn(ws)?;
        cmd.spawn()
    })
}
