//! Shared helpers for the workspace integration tests: start the real `dockwarden serve`
//! on a temporary socket, talk raw HTTP/1.1 to it, and run the real `dockwarden ws` CLI.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{http, poll_until};

pub const BIN: &str = env!("CARGO_BIN_EXE_dockwarden");

/// A running service with its own state directory.
pub struct Svc {
    child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub state: PathBuf,
    /// The secrets key (`--secrets-key`), beside the state directory: tests never share `/etc`.
    pub key: PathBuf,
    args: Vec<String>,
    uid_base: u32,
}

impl Svc {
    /// Starts `dockwarden serve` with `uid_base` (distinct per test) and extra flags.
    pub fn start(uid_base: u32, extra: &[&str], env: &[(&str, &str)]) -> Svc {
        Svc::start_in(&std::env::temp_dir(), uid_base, extra, env)
    }

    /// Like [`Svc::start`], with the state directory on the filesystem of `parent`.
    pub fn start_in(parent: &Path, uid_base: u32, extra: &[&str], env: &[(&str, &str)]) -> Svc {
        let dir = tempfile::tempdir_in(parent).unwrap();
        let socket = dir.path().join("ws.sock");
        let state = dir.path().join("state");
        let key = dir.path().join("secrets.key");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--socket".into(),
            socket.display().to_string(),
            "--state-dir".into(),
            state.display().to_string(),
            "--uid-base".into(),
            uid_base.to_string(),
            "--uid-count".into(),
            "50".into(),
            "--secrets-key".into(),
            key.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut svc = Svc {
            child: None,
            dir,
            socket,
            state,
            key,
            args,
            uid_base,
        };
        svc.spawn(env);
        svc
    }

    /// The last lines of every service log of this harness, for a failing test's output.
    fn print_log_tail(&self) {
        let Ok(rd) = std::fs::read_dir(self.dir.path()) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !(name.starts_with("serve-") && name.ends_with(".log")) {
                continue;
            }
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "---- last {} lines of {name} ----\n{}",
                tail.len(),
                tail.join("\n")
            );
        }
    }

    fn spawn(&mut self, env: &[(&str, &str)]) {
        let log = std::fs::File::create(
            self.dir
                .path()
                .join(format!("serve-{}.log", Instant::now().elapsed().as_nanos())),
        )
        .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(&self.args).stdout(Stdio::null()).stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().unwrap());
        let up = poll_until(Duration::from_secs(20), || {
            self.try_get("/v1/health").is_some()
        });
        assert!(up, "service did not start");
    }

    /// SIGKILLs the service (no cleanup on its side).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    /// Starts the service again on the same state directory.
    pub fn restart(&mut self, env: &[(&str, &str)]) {
        self.kill9();
        self.spawn(env);
    }

    fn try_get(&self, path: &str) -> Option<(u16, Vec<u8>)> {
        http(&self.socket, "GET", path, &[]).ok()
    }

    /// Sends JSON (or nothing) and returns the status and decoded JSON.
    pub fn api(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, data) = http(&self.socket, method, path, &body).unwrap();
        (status, serde_json::from_slice(&data).unwrap_or(Value::Null))
    }

    /// Sends raw bytes and returns the raw answer.
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        http(&self.socket, method, path, body).unwrap()
    }

    /// `api` that must succeed with 2xx.
    pub fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.api(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path} -> {status}: {v}"
        );
        v
    }

    /// Runs `dockwarden ws --socket <this> <args>`.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("ws")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap()
    }

    pub fn exec(&self, id: &str, cmd: &str) -> Value {
        self.ok(
            "POST",
            &format!("/v1/workspaces/{id}/exec"),
            Some(serde_json::json!({ "cmd": cmd })),
        )
    }

    pub fn read(&self, id: &str, path: &str) -> (u16, Vec<u8>) {
        self.raw(
            "GET",
            &format!("/v1/workspaces/{id}/files/content?path={path}"),
            &[],
        )
    }

    pub fn worktree(&self, id: &str) -> PathBuf {
        self.state.join("workspaces").join(id).join("worktree")
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log_tail();
        }
        self.kill9();
        // A suspended workspace's processes are frozen: a frozen task takes no SIGKILL
        // until it is thawed.
        thaw_workspace_cgroups(self.uid_base, 50);
        // Workspace processes outlive a killed service (as they would a crash); end them.
        for uid in self.uid_base..self.uid_base + 50 {
            for pid in pids_of(uid) {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        }
        // The sandboxes' PID 1s (root's; a restarted service would sweep them), waited for:
        // a zombie still holds its cgroup.
        let inits = sandbox_inits(&self.state);
        for pid in &inits {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for pid in inits {
            let dir = PathBuf::from(format!("/proc/{pid}"));
            poll_until(Duration::from_secs(2), || !dir.exists());
        }
        // And the (now empty) workspace cgroups a killed service could not remove.
        remove_workspace_cgroups(self.uid_base, 50);
        // And the network namespaces it kept mounted, with their links to the host.
        remove_workspace_networks(&self.state, self.uid_base, 50);
        // And every other mount under the state directory: worktree disk images (their loop
        // devices go with them: `mount -o loop` clears them at unmount), staging mounts.
        dockwarden::sys::mountinfo::detach_beneath(&self.state);
    }
}

/// Unmounts the network namespace files under `state` and deletes the host side of the
/// workspace links (`dwe<uid>`, `dwi<uid>`) of the uid range.
pub fn remove_workspace_networks(state: &Path, base: u32, count: u32) {
    for m in dockwarden::sys::mountinfo::own() {
        if m.fstype == "nsfs" && m.point.starts_with(state) && m.point != state {
            let _ = Command::new("umount").arg("-l").arg(&m.point).status();
        }
    }
    for uid in base..base + count {
        for name in [format!("dwe{uid}"), format!("dwi{uid}")] {
            if Path::new("/sys/class/net").join(&name).exists() {
                let _ = Command::new("ip").args(["link", "del", &name]).status();
            }
        }
    }
}

/// The pids of the sandbox inits of workspaces under `state` (`dockwarden sandbox-init
/// --root <state>/workspaces/<id>/sandbox`).
pub fn sandbox_inits(state: &Path) -> Vec<i32> {
    let prefix = format!("{}/", state.join("workspaces").display());
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        if args.iter().any(|a| *a == b"sandbox-init")
            && args
                .windows(2)
                .any(|w| w[0] == b"--root" && w[1].starts_with(prefix.as_bytes()))
        {
            out.push(pid);
        }
    }
    out
}

/// Thaws `dockwarden_ws_<uid>` of the range (cgroup v1 freezer or v2 `cgroup.freeze`).
pub fn thaw_workspace_cgroups(base: u32, count: u32) {
    let Some(h) = dockwarden::sys::cgroupfs::Hierarchy::detect() else {
        return;
    };
    for uid in base..base + count {
        let name = format!("dockwarden_ws_{uid}");
        if h.can_freeze(&name) {
            let _ = h.thaw(&name);
        }
    }
}

/// Removes `dockwarden_ws_<uid>` (and its child cgroups) on every hierarchy for the range.
pub fn remove_workspace_cgroups(base: u32, count: u32) {
    fn rm(d: &Path) {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    rm(&e.path());
                }
            }
        }
        for _ in 0..20 {
            if std::fs::remove_dir(d).is_ok() || !d.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let root = Path::new("/sys/fs/cgroup");
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    let hierarchies: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .chain([root.to_path_buf()])
        .collect();
    for uid in base..base + count {
        for h in &hierarchies {
            let d = h.join(format!("dockwarden_ws_{uid}"));
            if d.is_dir() {
                rm(&d);
            }
        }
    }
}

/// Builds the fixture repository in `dir` with `fixtures/workspace/make-repo.sh`.
pub fn fixture_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("fixture-repo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/workspace/make-repo.sh");
    let st = Command::new("sh").arg(script).arg(&repo).status().unwrap();
    assert!(st.success(), "fixture repo script failed");
    repo
}

/// Pids of live (non-zombie) processes owned by `uid`.
pub fn pids_of(uid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(ent.path().join("status")) else {
            continue;
        };
        if status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
        {
            continue;
        }
        let uid_line = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .unwrap_or("");
        if uid_line.split_whitespace().next() == Some(&uid.to_string()) {
            out.push(pid);
        }
    }
    out
}
