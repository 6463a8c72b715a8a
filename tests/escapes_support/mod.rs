//! The two engines the escape and inspect tests run on, and small helpers around them.
//! (Local to `e2e_escapes` and `e2e_inspect`; the shared engine list will replace it.)
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::process::{Command, Output};
use std::time::Duration;

use super::common::{Proxy, cli28, cli2010, run_with_timeout};

/// One daemon on this machine.
#[derive(Debug, Clone, Copy)]
pub struct Engine {
    pub name: &'static str,
    pub socket: &'static str,
}

/// Engine 20.10 in the host network namespace and Engine 26.1 in `/run/netns/docker26`.
const ALL: [Engine; 2] = [
    Engine {
        name: "20.10",
        socket: "/var/run/docker.sock",
    },
    Engine {
        name: "26.1",
        socket: "/run/docker26/docker.sock",
    },
];

/// The engines that answer; prints why one is skipped, or fails when `DW_ENGINES_REQUIRED`
/// names a missing one (CI).
pub fn engines() -> Vec<Engine> {
    ALL.into_iter()
        .filter(|e| {
            let up =
                std::path::Path::new(e.socket).exists() && e.cli(&["version"]).status.success();
            if !up {
                assert!(
                    !super::common::engine_required(e.name),
                    "Engine {} is required (DW_ENGINES_REQUIRED) but no daemon answers on {}",
                    e.name,
                    e.socket
                );
                eprintln!(
                    "skipped: engine {}: no daemon answers on {}",
                    e.name, e.socket
                );
            }
            up
        })
        .collect()
}

impl Engine {
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket)
    }

    /// The Docker CLI straight at this daemon (not through the proxy).
    pub fn cli(&self, args: &[&str]) -> Output {
        let cli = cli28().or(cli2010()).expect("a docker CLI");
        let mut c = Command::new(cli);
        c.env("DOCKER_HOST", self.host())
            .env_remove("DOCKER_CONTEXT")
            .args(args);
        run_with_timeout(&mut c, None, Duration::from_secs(120))
    }

    /// Like [`cli`](Self::cli), asserting success; returns trimmed stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert!(
            o.status.success(),
            "engine {}: docker {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    }

    /// `docker inspect` straight at the daemon, parsed.
    pub fn inspect(&self, what: &str) -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&self.ok(&["inspect", what])).expect("inspect json");
        v.get(0).cloned().expect("one object")
    }

    pub fn exists(&self, name: &str) -> bool {
        self.cli(&["inspect", "--type", "container", name])
            .status
            .success()
    }

    /// A proxy in front of this engine, with a fresh workspace.
    pub fn proxy(&self, extra: &[&str]) -> Proxy {
        self.proxy_owned(None, extra)
    }

    /// A proxy whose workspace (with `data/`) belongs to `owner` (the workspace user).
    pub fn proxy_owned(&self, owner: Option<u32>, extra: &[&str]) -> Proxy {
        let dir = tempfile::Builder::new()
            .prefix("dwtest")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let ws = dir.path().canonicalize().expect("canonical").join("ws");
        std::fs::create_dir_all(ws.join("data")).expect("workspace");
        if let Some(uid) = owner {
            for p in [ws.clone(), ws.join("data")] {
                std::os::unix::fs::chown(&p, Some(uid), Some(uid)).expect("chown workspace");
            }
        }
        Proxy::start_with_upstream(dir, ws, self.socket, extra)
    }
}

/// Removes containers (and networks) on one engine when dropped, even if the test panics.
pub struct Cleanup {
    pub engine: Engine,
    pub containers: Vec<String>,
    pub networks: Vec<String>,
}

impl Cleanup {
    pub fn new(engine: Engine) -> Self {
        Cleanup {
            engine,
            containers: Vec::new(),
            networks: Vec::new(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = self.engine.cli(&["rm", "-f", "-v", c]);
        }
        for n in &self.networks {
            let _ = self.engine.cli(&["network", "rm", n]);
        }
    }
}

/// Raw HTTP on the proxy socket: `(status, body)`.
pub fn request(p: &Proxy, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let req = match body {
        Some(b) => format!(
            "{method} {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        ),
        None => format!("{method} {path} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"),
    };
    let resp = p.raw(req.as_bytes());
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        resp.split_once("\r\n\r\n")
            .map(|x| x.1.to_owned())
            .unwrap_or_default(),
    )
}

/// Sends raw bytes and returns the response head only (for requests that switch protocols
/// and then stay open).
pub fn head(sock: &std::path::Path, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(bytes).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status code of a raw response.
pub fn status(resp: &str) -> u16 {
    resp.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// `POST /containers/{id}/attach` with `Upgrade: tcp`, as the CLI sends it.
pub fn attach_request(id: &str) -> String {
    format!(
        "POST /v1.41/containers/{id}/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n"
    )
}

/// The websocket attach handshake.
pub fn attach_ws_request(id: &str) -> String {
    format!(
        "GET /v1.41/containers/{id}/attach/ws?stream=1&stdout=1 HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://localhost\r\n\r\n"
    )
}
