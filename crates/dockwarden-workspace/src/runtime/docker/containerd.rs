//! The workspace's own containerd, started before its dockerd (daemon.json `containerd`).
//! A dockerd that starts its managed containerd dials the socket before containerd listens,
//! and its gRPC client then waits out a one-second reconnect back-off (Engine 26.1: ~0.9 s
//! of its ~1.5 s start, see benches/README.md). Started here first and awaited on its
//! socket, containerd answers dockerd's first dial. Its root and state are where dockerd
//! would have put them (`<data-root>/containerd/daemon`, `<exec-root>/containerd/daemon`),
//! so a data root moves between the two ways unchanged; it is stopped with the daemon
//! (`stop_daemon`: every process naming the exec root).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Layout;

/// Paths of the workspace's containerd, all under its data and exec roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub debug_socket: PathBuf,
    pub root: PathBuf,
    pub state: PathBuf,
    pub log: PathBuf,
}

impl Paths {
    pub fn of(l: &Layout) -> Paths {
        let dir = l.exec_root.join("containerd");
        Paths {
            config: dir.join("containerd.toml"),
            socket: dir.join("containerd.sock"),
            debug_socket: dir.join("containerd-debug.sock"),
            root: l.data_root.join("containerd/daemon"),
            state: dir.join("daemon"),
            log: l.dir.join("containerd.log"),
            dir,
        }
    }
}

/// Pure: the containerd config, as dockerd writes it for its managed containerd (CRI off).
pub fn config(p: &Paths) -> String {
    let q = |p: &Path| toml::Value::String(p.display().to_string()).to_string();
    format!(
        "version = 2\n\
         disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
         root = {}\n\
         state = {}\n\
         oom_score = 0\n\
         \n\
         [grpc]\n  address = {}\n  uid = 0\n  gid = 0\n\
         \n\
         [debug]\n  address = {}\n  uid = 0\n  gid = 0\n",
        q(&p.root),
        q(&p.state),
        q(&p.socket),
        q(&p.debug_socket),
    )
}

/// The containerd binary next to the engine's dockerd (`/opt/docker26/usr/bin/containerd`),
/// else the first on dockerd's PATH.
pub fn binary(dockerd: &Path) -> Option<PathBuf> {
    super::dockerd::path_for(dockerd)
        .split(':')
        .map(|d| Path::new(d).join("containerd"))
        .find(|p| p.is_file())
}

/// Writes the config and starts containerd in the namespace and the workspace cgroup.
pub fn spawn(bin: &Path, dockerd: &Path, l: &Layout) -> std::io::Result<std::process::Child> {
    let p = Paths::of(l);
    std::fs::create_dir_all(&p.dir)?;
    std::fs::create_dir_all(&p.root)?;
    std::fs::write(&p.config, config(&p))?;
    let _ = std::fs::remove_file(&p.socket);
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("--config").arg(&p.config);
    let path = super::dockerd::path_for(dockerd);
    super::spawn::spawn_daemon(
        cmd,
        &[("PATH", &path), ("HOME", "/root")],
        &p.log,
        super::spawn::Stdout::Log,
        l,
    )
}

/// Waits until containerd accepts connections on its socket; false on timeout or death.
pub async fn wait_listening(
    socket: &Path,
    within: Duration,
    mut alive: impl FnMut() -> bool,
) -> bool {
    use dockwarden_sys::poll::{Probe, poll_until};
    poll_until(within, Duration::from_millis(5), || {
        let dead = !alive();
        async move {
            match (tokio::net::UnixStream::connect(socket).await.is_ok(), dead) {
                (true, _) => Probe::Done,
                (false, true) => Probe::Stop,
                (false, false) => Probe::Retry,
            }
        }
    })
    .await
    .is_done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_lives_under_the_workspace_roots_with_cri_off() {
        let l = Layout::new(Path::new("/s/workspaces/a"), 20001);
        let p = Paths::of(&l);
        let text = config(&p);
        let v: toml::Value = toml::from_str(&text).expect("valid toml");
        assert_eq!(v["version"].as_integer(), Some(2));
        assert_eq!(
            v["root"].as_str(),
            Some("/s/workspaces/a/docker/data/containerd/daemon")
        );
        assert_eq!(
            v["state"].as_str(),
            Some("/s/workspaces/a/docker/exec/containerd/daemon")
        );
        assert_eq!(
            v["grpc"]["address"].as_str(),
            Some("/s/workspaces/a/docker/exec/containerd/containerd.sock")
        );
        assert_eq!(
            v["disabled_plugins"][0].as_str(),
            Some("io.containerd.grpc.v1.cri")
        );
        // Named by the exec root, so `stop_daemon` finds it with dockerd's leftovers.
        assert!(p.config.starts_with(&l.exec_root));
    }
}
