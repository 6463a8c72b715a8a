//! Shared end-to-end harness: start the real `dockwarden proxy` on a temporary socket in front
//! of the real dockerd, and drive it with real clients or raw bytes.
#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the harness"
)]

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The image every end-to-end test uses, built by `fixtures/make-test-image.sh`.
pub const IMAGE: &str = "dockwarden-test:latest";
/// The default daemon's socket (Engine 20.10).
pub const DAEMON: &str = "/var/run/docker.sock";

// Private modules, their items re-exported: `use common::*` must not bring a module named
// `http` over the `http` crate.
mod daemon;
mod engines;
mod http;
mod wait;

#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use daemon::{DaemonOptions, PrivateDaemon};
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use engines::{
    Engine, engine, engine_required, engines, engines_or_skip, engines_required, installed,
    installed_engines, on_engine,
};
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use http::{
    Answer, Until, body_of, dechunk, exchange, head, http, raw, raw_maybe, request, status,
    status_and_json,
};
#[allow(unused_imports, reason = "each test binary uses a different subset")]
pub use wait::{poll_until, wait_until};

/// Generates, for each listed `fn name(e: &Engine)`, the tests `name::engine_20_10` and
/// `name::engine_26_1`.
#[allow(unused_macros, reason = "each test binary uses one of the two")]
macro_rules! per_engine {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn engine_20_10() {
                crate::common::on_engine("20.10", super::$name)
            }
            #[test]
            fn engine_26_1() {
                crate::common::on_engine("26.1", super::$name)
            }
        }
    )*};
}
#[allow(unused_imports, reason = "each test binary uses one of the two")]
pub(crate) use per_engine;

/// A Compose implementation: v1 (Debian's python `docker-compose` 1.29) or v2 (the Go
/// `docker compose` CLI plugin, 2.26).
#[derive(Clone, Copy, Debug)]
pub struct Compose {
    /// "v1" or "v2".
    pub name: &'static str,
}

impl Compose {
    /// Both implementations.
    pub const ALL: [Compose; 2] = [Compose { name: "v1" }, Compose { name: "v2" }];

    /// `docker-compose` or `docker compose`, pointed at `docker_host`.
    pub fn cmd(&self, docker_host: &str) -> Command {
        let mut c = match self.name {
            "v1" => Command::new("docker-compose"),
            _ => {
                let mut c = Command::new(cli28().or(cli2010()).unwrap_or("docker"));
                c.arg("compose");
                c
            }
        };
        c.env("DOCKER_HOST", docker_host)
            .env_remove("DOCKER_CONTEXT")
            .env("COMPOSE_INTERACTIVE_NO_CLI", "1");
        c
    }

    /// Whether it is installed (`version` runs); a missing one is a printed skip, or a failure
    /// when `DW_COMPOSE_REQUIRED` names it (CI).
    pub fn present(&self) -> bool {
        let ok = self
            .cmd("unix:///nonexistent")
            .arg("version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            let required = std::env::var("DW_COMPOSE_REQUIRED").unwrap_or_default();
            assert!(
                !required.split([' ', ',']).any(|r| r == self.name),
                "Compose {} is required but does not run",
                self.name
            );
            eprintln!(
                "skip: Compose {} is not installed (scripts/setup.sh installs both)",
                self.name
            );
        }
        ok
    }
}

/// Runs `body` with the named engine and Compose implementation (skips as [`on_engine`] and
/// [`Compose::present`] do).
pub fn on_engine_compose(name: &str, compose: &str, body: fn(&Engine, Compose)) {
    let c = Compose::ALL
        .into_iter()
        .find(|c| c.name == compose)
        .expect("a known compose");
    if c.present() {
        on_engine(name, |e| body(e, c));
    }
}

/// Like [`per_engine!`] for `fn name(e: &Engine, c: Compose)`: the tests
/// `name::compose_v1_engine_20_10`, `compose_v2_engine_20_10`, `compose_v1_engine_26_1` and
/// `compose_v2_engine_26_1`.
#[allow(unused_macros, reason = "each test binary uses one of the two")]
macro_rules! per_engine_compose {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn compose_v1_engine_20_10() {
                crate::common::on_engine_compose("20.10", "v1", super::$name)
            }
            #[test]
            fn compose_v2_engine_20_10() {
                crate::common::on_engine_compose("20.10", "v2", super::$name)
            }
            #[test]
            fn compose_v1_engine_26_1() {
                crate::common::on_engine_compose("26.1", "v1", super::$name)
            }
            #[test]
            fn compose_v2_engine_26_1() {
                crate::common::on_engine_compose("26.1", "v2", super::$name)
            }
        }
    )*};
}
#[allow(unused_imports, reason = "each test binary uses one of the two")]
pub(crate) use per_engine_compose;

/// Docker CLI 28 (the machine's) when present.
pub fn cli28() -> Option<&'static str> {
    Path::new("/usr/local/bin/docker")
        .exists()
        .then_some("/usr/local/bin/docker")
}

/// Debian's Docker CLI 20.10.
pub fn cli2010() -> Option<&'static str> {
    Path::new("/usr/bin/docker")
        .exists()
        .then_some("/usr/bin/docker")
}

/// Every Docker CLI on the machine.
pub fn clis() -> Vec<&'static str> {
    [cli28(), cli2010()].into_iter().flatten().collect()
}

/// A running proxy; killed and its temp directory removed on drop.
pub struct Proxy {
    pub child: Child,
    /// The engine behind it (for a [`PrivateDaemon`] upstream, the engine it runs).
    pub engine: Engine,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub workspace: PathBuf,
    pub audit: PathBuf,
}

/// A unique-enough name for objects a test creates.
pub fn unique(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("dwt-{prefix}-{}-{}", std::process::id(), n % 1_000_000_000)
}

impl Proxy {
    /// Starts the proxy with the default policy and extra CLI arguments.
    pub fn start(extra: &[&str]) -> Proxy {
        let dir = tempfile::Builder::new()
            .prefix("dwtest")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let workspace = root.join("ws");
        std::fs::create_dir_all(&workspace).expect("workspace");
        Self::start_in(dir, workspace, extra)
    }

    /// Starts the proxy for an existing workspace directory inside `dir`.
    pub fn start_in(dir: tempfile::TempDir, workspace: PathBuf, extra: &[&str]) -> Proxy {
        Self::start_with_upstream(dir, workspace, DAEMON, extra)
    }

    /// Starts the proxy with the default policy in front of `e`.
    pub fn start_on(e: &Engine, extra: &[&str]) -> Proxy {
        let dir = tempfile::Builder::new()
            .prefix("dwtest")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let workspace = dir
            .path()
            .canonicalize()
            .expect("canonical tempdir")
            .join("ws");
        std::fs::create_dir_all(&workspace).expect("workspace");
        Self::start_in_on(e, dir, workspace, extra)
    }

    /// Starts the proxy in front of `e` for an existing workspace directory inside `dir`.
    pub fn start_in_on(
        e: &Engine,
        dir: tempfile::TempDir,
        workspace: PathBuf,
        extra: &[&str],
    ) -> Proxy {
        let mut p =
            Self::start_with_upstream(dir, workspace, &e.socket.display().to_string(), extra);
        p.engine = e.clone();
        p
    }

    /// As [`Self::start_in_on`], with extra environment variables for the proxy (`RUST_LOG`).
    pub fn start_in_on_env(
        e: &Engine,
        dir: tempfile::TempDir,
        workspace: PathBuf,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proxy {
        let mut p = Self::spawn(dir, workspace, &e.socket.display().to_string(), extra, env);
        p.engine = e.clone();
        p
    }

    /// Starts the proxy in front of another daemon socket (e.g. a [`PrivateDaemon`]).
    pub fn start_with_upstream(
        dir: tempfile::TempDir,
        workspace: PathBuf,
        upstream: &str,
        extra: &[&str],
    ) -> Proxy {
        Self::spawn(dir, workspace, upstream, extra, &[])
    }

    fn spawn(
        dir: tempfile::TempDir,
        workspace: PathBuf,
        upstream: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proxy {
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let socket = root.join("docker.sock");
        let audit = root.join("audit.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dockwarden"));
        cmd.arg("proxy")
            .arg("--listen")
            .arg(&socket)
            .arg("--workspace")
            .arg(&workspace)
            .arg("--upstream")
            .arg(upstream);
        cmd.arg("--audit-log")
            .arg(&audit)
            .args(extra)
            .envs(env.iter().copied());
        cmd.stdout(Stdio::null()).stderr(Stdio::from(
            std::fs::File::create(root.join("proxy.log")).expect("log file"),
        ));
        let child = cmd.spawn().expect("spawn dockwarden");
        let engine = if upstream == DAEMON {
            Engine {
                name: "20.10",
                socket: PathBuf::from(DAEMON),
                netns: None,
                prefix: None,
            }
        } else {
            Engine {
                name: "private",
                socket: PathBuf::from(upstream),
                netns: None,
                prefix: None,
            }
        };
        let mut p = Proxy {
            child,
            dir,
            socket,
            workspace,
            audit,
            engine,
        };
        p.wait_ready();
        p
    }

    fn wait_ready(&mut self) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "proxy exited before serving ({status}); log:\n{}",
                    self.log()
                );
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
        c.env("DOCKER_HOST", self.docker_host())
            .env_remove("DOCKER_CONTEXT")
            .env("DOCKER_CLI_HINTS", "false");
        c.current_dir(&self.workspace);
        c
    }

    /// The daemon's own CLI (bypassing the proxy), as [`Engine::daemon`].
    pub fn daemon(&self, args: &[&str]) -> Output {
        self.engine.daemon(args)
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

/// Runs a command with optional stdin and a timeout; panics on timeout.
pub fn run_with_timeout(cmd: &mut Command, stdin: Option<&[u8]>, limit: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
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
    assert!(
        o.status.success(),
        "command failed: {}\nstdout: {}",
        stderr(&o),
        stdout(&o)
    );
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
