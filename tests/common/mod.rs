//! Shared end-to-end harness: start the real `dockwarden proxy` on a temporary socket in front
//! of the real dockerd, and drive it with real clients or raw bytes.
#![allow(dead_code, reason = "each test binary uses a different subset of the harness")]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The image every end-to-end test uses, built by `fixtures/make-test-image.sh`.
pub const IMAGE: &str = "dockwarden-test:latest";
/// The daemon's socket.
pub const DAEMON: &str = "/var/run/docker.sock";

/// Docker CLI 28 (the machine's) when present.
pub fn cli28() -> Option<&'static str> {
    Path::new("/usr/local/bin/docker").exists().then_some("/usr/local/bin/docker")
}

/// Debian's Docker CLI 20.10.
pub fn cli2010() -> Option<&'static str> {
    Path::new("/usr/bin/docker").exists().then_some("/usr/bin/docker")
}

/// Every Docker CLI on the machine.
pub fn clis() -> Vec<&'static str> {
    [cli28(), cli2010()].into_iter().flatten().collect()
}

/// A running proxy; killed and its temp directory removed on drop.
pub struct Proxy {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub workspace: PathBuf,
    pub audit: PathBuf,
}

/// A unique-enough name for objects a test creates.
pub fn unique(prefix: &str) -> String {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("dwt-{prefix}-{}-{}", std::process::id(), n % 1_000_000_000)
}

impl Proxy {
    /// Starts the proxy with the default policy and extra CLI arguments.
    pub fn start(extra: &[&str]) -> Proxy {
        let dir = tempfile::Builder::new().prefix("dwtest").tempdir_in("/tmp").expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let workspace = root.join("ws");
        std::fs::create_dir_all(&workspace).expect("workspace");
        Self::start_in(dir, workspace, extra)
    }

    /// Starts the proxy for an existing workspace directory inside `dir`.
    pub fn start_in(dir: tempfile::TempDir, workspace: PathBuf, extra: &[&str]) -> Proxy {
        Self::start_with_upstream(dir, workspace, DAEMON, extra)
    }

    /// Starts the proxy in front of another daemon socket (e.g. a [`PrivateDaemon`]).
    pub fn start_with_upstream(dir: tempfile::TempDir, workspace: PathBuf, upstream: &str, extra: &[&str]) -> Proxy {
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let socket = root.join("docker.sock");
        let audit = root.join("audit.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dockwarden"));
        cmd.arg("proxy").arg("--listen").arg(&socket).arg("--workspace").arg(&workspace).arg("--upstream").arg(upstream);
        cmd.arg("--audit-log").arg(&audit).args(extra);
        cmd.stdout(Stdio::null()).stderr(Stdio::from(
            std::fs::File::create(root.join("proxy.log")).expect("log file"),
        ));
        let child = cmd.spawn().expect("spawn dockwarden");
        let p = Proxy { child, dir, socket, workspace, audit };
        p.wait_ready();
        p
    }

    fn wait_ready(&self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("proxy did not start; log:\n{}", self.log());
    }

    /// The proxy's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("proxy.log")).unwrap_or_default()
    }

    pub fn audit_log(&self) -> String {
        std::fs::read_to_string(&self.audit).unwrap_or_default()
    }

    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// A Docker CLI command pointed at the proxy.
    pub fn cmd(&self, cli: &str) -> Command {
        let mut c = Command::new(cli);
        c.env("DOCKER_HOST", self.docker_host()).env_remove("DOCKER_CONTEXT").env("DOCKER_CLI_HINTS", "false");
        c.current_dir(&self.workspace);
        c
    }

    /// Runs the default CLI (28 if present) with `args`, with a timeout.
    pub fn docker(&self, args: &[&str]) -> Output {
        let cli = cli28().or(cli2010()).expect("a docker CLI");
        run_with_timeout(self.cmd(cli).args(args), None, Duration::from_secs(120))
    }

    /// Sends raw bytes on a fresh connection and returns everything read until EOF or timeout.
    pub fn raw(&self, bytes: &[u8]) -> String {
        raw(&self.socket, bytes)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Raw HTTP on a Unix socket; returns the response text.
pub fn raw(sock: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    // The proxy may answer (413, 400) and close before reading everything: a failed write is
    // not a failure, the response is what counts.
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if response_complete(&out) {
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True once a Content-Length response has been read whole.
fn response_complete(b: &[u8]) -> bool {
    let text = String::from_utf8_lossy(b);
    let Some(end) = text.find("\r\n\r\n") else { return false };
    let head = text[..end].to_ascii_lowercase();
    let cl = head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)));
    matches!(cl, Some(n) if b.len() >= end + 4 + n)
}

/// Runs a command with optional stdin and a timeout; panics on timeout.
pub fn run_with_timeout(cmd: &mut Command, stdin: Option<&[u8]>, limit: Duration) -> Output {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn command");
    if let Some(data) = stdin {
        let mut sin = child.stdin.take().expect("stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = sin.write_all(&data);
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("command output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("command timed out after {limit:?}: {cmd:?}");
        }
    }
}

/// Stdout as a trimmed string.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// Stderr as a string.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
#[track_caller]
pub fn ok(o: Output) -> String {
    assert!(o.status.success(), "command failed: {}\nstdout: {}", stderr(&o), stdout(&o));
    stdout(&o)
}

/// Runs the daemon's own CLI (not through the proxy): the oracle for what really exists.
pub fn daemon(args: &[&str]) -> Output {
    let cli = cli28().or(cli2010()).expect("a docker CLI");
    let mut c = Command::new(cli);
    c.env("DOCKER_HOST", format!("unix://{DAEMON}")).args(args);
    run_with_timeout(&mut c, None, Duration::from_secs(120))
}

/// `docker inspect` through the daemon directly, parsed.
pub fn daemon_inspect(id: &str) -> serde_json::Value {
    let out = ok(daemon(&["inspect", id]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("inspect json");
    v.get(0).cloned().expect("one object")
}

/// Removes a container through the daemon, ignoring errors (cleanup).
pub fn force_remove(id: &str) {
    let _ = daemon(&["rm", "-f", "-v", id]);
}

/// A second dockerd with its own socket, data root, containerd and network namespace
/// (`unshare --net`, so its bridge and iptables rules never touch the main daemon's), for tests
/// that must restart the daemon or count every container without other tests interfering.
pub struct PrivateDaemon {
    pub dir: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
}

impl PrivateDaemon {
    /// Starts a private daemon under `/tmp/dwpd-<name>` and imports the test image into it.
    pub fn start(name: &str) -> PrivateDaemon {
        let dir = PathBuf::from(format!("/tmp/dwpd-{name}"));
        let _ = std::fs::create_dir_all(&dir);
        let socket = dir.join("d.sock");
        let mut d = PrivateDaemon { dir, socket, child: None };
        d.spawn();
        let status = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/make-test-image.sh"))
            .env("DOCKER_HOST", d.host())
            .status()
            .expect("run make-test-image.sh");
        assert!(status.success(), "importing the test image into the private daemon");
        d
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    fn spawn(&mut self) {
        let d = &self.dir;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(d.join("dockerd.log")).expect("log");
        let child = Command::new("unshare")
            .args(["--net", "dockerd"])
            .arg("--host").arg(self.host())
            .arg("--data-root").arg(d.join("root"))
            .arg("--exec-root").arg(d.join("exec"))
            .arg("--pidfile").arg(d.join("dockerd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn private dockerd");
        self.child = Some(child);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if self.cli(&["version"]).status.success() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("private dockerd did not start; see {}", d.join("dockerd.log").display());
    }

    /// Stops the daemon (SIGTERM, as systemd would) and starts it again with the same state.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let _ = c.wait();
        }
    }

    /// The CLI pointed straight at this daemon.
    pub fn cli(&self, args: &[&str]) -> Output {
        let cli = cli28().or(cli2010()).expect("a docker CLI");
        let mut c = Command::new(cli);
        c.env("DOCKER_HOST", self.host()).args(args);
        run_with_timeout(&mut c, None, Duration::from_secs(120))
    }
}

impl Drop for PrivateDaemon {
    fn drop(&mut self) {
        let ids = stdout(&self.cli(&["ps", "-aq"]));
        for id in ids.lines() {
            let _ = self.cli(&["rm", "-f", "-v", id]);
        }
        self.stop();
    }
}
