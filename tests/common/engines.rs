//! The one list of Docker Engines the suites run against (docs/ci.md), read from the variables
//! `scripts/test.sh` exports: `DW_ENGINE20_SOCK`, `DW_ENGINE26_SOCK`, `DW_ENGINE26_NETNS`,
//! `DW_ENGINE26_PREFIX`, and `DW_ENGINES_REQUIRED` (engines whose absence fails a test instead
//! of skipping it). Without them the machine's defaults are probed.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use super::{DAEMON, Proxy, cli28, cli2010, http, ok, run_with_timeout};

/// Both engines, oldest first.
pub const NAMES: [&str; 2] = ["20.10", "26.1"];

/// One Docker Engine: where its daemon answers and where its binaries are.
#[derive(Clone, Debug)]
pub struct Engine {
    /// "20.10" or "26.1".
    pub name: &'static str,
    /// The daemon's API socket.
    pub socket: PathBuf,
    /// The daemon's network namespace, when it is not the host's: published ports, its bridge
    /// and its address pools live there, so whatever reaches a published port enters it.
    pub netns: Option<PathBuf>,
    /// Where its binaries were unpacked (`usr/sbin/dockerd`, ...), when not in the system.
    pub prefix: Option<PathBuf>,
}

impl Engine {
    /// The engine `name` as the environment describes it, whether or not its daemon runs.
    pub fn declared(name: &str) -> Option<Engine> {
        Some(match name {
            "20.10" => Engine {
                name: "20.10",
                socket: env_path("DW_ENGINE20_SOCK", DAEMON),
                netns: None,
                prefix: None,
            },
            "26.1" => {
                let ns = env_path("DW_ENGINE26_NETNS", "/run/netns/docker26");
                let prefix = env_path("DW_ENGINE26_PREFIX", "/opt/docker26");
                Engine {
                    name: "26.1",
                    socket: env_path("DW_ENGINE26_SOCK", "/run/docker26/docker.sock"),
                    netns: ns.exists().then_some(ns),
                    // Kept when missing: `dockerd_path` then names where it was looked for.
                    prefix: Some(prefix),
                }
            }
            _ => return None,
        })
    }

    /// "e20" or "e26", for names that must not collide between engines (cgroups, directories).
    pub fn tag(&self) -> &'static str {
        if self.name == "20.10" { "e20" } else { "e26" }
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Whether its daemon answers `GET /_ping` on its socket.
    pub fn answers(&self) -> bool {
        http::raw_maybe(&self.socket, b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .is_some_and(|r| r.contains(" 200 "))
    }

    /// The daemon's own CLI (not through the proxy): the oracle for what really exists.
    pub fn daemon(&self, args: &[&str]) -> Output {
        let cli = cli28().or(cli2010()).expect("a docker CLI");
        let mut c = Command::new(cli);
        c.env("DOCKER_HOST", self.host())
            .env_remove("DOCKER_CONTEXT")
            .args(args);
        run_with_timeout(&mut c, None, Duration::from_secs(120))
    }

    /// Like [`daemon`](Self::daemon), asserting success; returns trimmed stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.daemon(args);
        assert!(
            o.status.success(),
            "engine {}: docker {args:?}: {}",
            self.name,
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    }

    /// `docker inspect` through the daemon directly, parsed.
    pub fn inspect(&self, id: &str) -> serde_json::Value {
        let out = ok(self.daemon(&["inspect", id]));
        let v: serde_json::Value = serde_json::from_str(&out).expect("inspect json");
        v.get(0).cloned().expect("one object")
    }

    /// Whether the daemon has a container `name`.
    pub fn exists(&self, name: &str) -> bool {
        self.daemon(&["inspect", "--type", "container", name])
            .status
            .success()
    }

    /// Removes a container through the daemon, ignoring errors (cleanup).
    pub fn force_remove(&self, id: &str) {
        let _ = self.daemon(&["rm", "-f", "-v", id]);
    }

    /// A proxy in front of this engine, with a fresh workspace that has a `data/` directory.
    pub fn proxy(&self, extra: &[&str]) -> Proxy {
        self.proxy_owned(None, extra)
    }

    /// As [`proxy`](Self::proxy), the workspace and its `data/` belonging to `owner` (the
    /// workspace user).
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
        Proxy::start_in_on(self, dir, ws, extra)
    }

    /// `program` run in the daemon's network namespace (`nsenter --net`, which leaves the mount
    /// namespace and `/sys` alone), where its published ports listen.
    pub fn in_netns(&self, program: &str) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    /// This engine's `dockerd` binary.
    pub fn dockerd_path(&self) -> PathBuf {
        match &self.prefix {
            Some(prefix) => prefix.join("usr/sbin/dockerd"),
            None => PathBuf::from("/usr/sbin/dockerd"),
        }
    }

    /// `dockerd` of this engine, with its containerd, docker-proxy and docker-init first on PATH.
    pub fn dockerd(&self) -> Command {
        match &self.prefix {
            Some(prefix) => {
                let path = format!(
                    "{0}/usr/sbin:{0}/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    prefix.display()
                );
                let mut c = Command::new(self.dockerd_path());
                c.env("PATH", path);
                c
            }
            None => Command::new("dockerd"),
        }
    }
}

fn env_path(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default))
}

/// Every engine whose socket answers, oldest first.
pub fn engines() -> Vec<Engine> {
    NAMES.into_iter().filter_map(engine).collect()
}

/// The named engine if its socket answers.
pub fn engine(name: &str) -> Option<Engine> {
    Engine::declared(name).filter(Engine::answers)
}

/// Every engine whose socket answers, oldest first; one that does not is a printed skip, or a
/// failure when `DW_ENGINES_REQUIRED` names it (CI). For suites that loop over the engines in
/// one test.
pub fn engines_or_skip() -> Vec<Engine> {
    NAMES
        .into_iter()
        .filter_map(|name| {
            let e = Engine::declared(name)?;
            if e.answers() {
                return Some(e);
            }
            assert!(
                !engine_required(name),
                "Engine {name} is required (DW_ENGINES_REQUIRED) but no daemon answers on {}",
                e.socket.display()
            );
            eprintln!(
                "skipped: Engine {name}: no daemon answers on {}",
                e.socket.display()
            );
            None
        })
        .collect()
}

/// The named engine if its `dockerd` binary is installed (its daemon need not run), for tests
/// that start daemons of their own; a missing one is a printed skip, or a failure when
/// `DW_ENGINES_REQUIRED` names it (CI).
pub fn installed(name: &str) -> Option<Engine> {
    let e = Engine::declared(name)?;
    let dockerd = e.dockerd_path();
    if dockerd.is_file() {
        return Some(e);
    }
    assert!(
        !engine_required(name),
        "Engine {name} is required (DW_ENGINES_REQUIRED) but {} is missing",
        dockerd.display()
    );
    println!(
        "skipped: Engine {name}: no dockerd at {}",
        dockerd.display()
    );
    None
}

/// Every engine whose `dockerd` is installed, oldest first (skips as [`installed`] does).
pub fn installed_engines() -> Vec<Engine> {
    NAMES.into_iter().filter_map(installed).collect()
}

/// Whether `DW_ENGINES_REQUIRED` names the engine `name` (CI names both): its absence is then a
/// failure, not a skip.
pub fn engine_required(name: &str) -> bool {
    std::env::var("DW_ENGINES_REQUIRED")
        .unwrap_or_default()
        .split([' ', ','])
        .any(|r| r == name)
}

/// Whether `DW_ENGINES_REQUIRED` is set at all (CI): the engines' clients (buildx, the 20.10
/// CLI, the 26.1 dockerd) are then required as well.
pub fn engines_required() -> bool {
    std::env::var("DW_ENGINES_REQUIRED").is_ok_and(|v| !v.trim().is_empty())
}

/// Runs `body` on the named engine; a missing engine is a printed skip, or a failure when
/// `DW_ENGINES_REQUIRED` names it (CI).
pub fn on_engine(name: &str, body: impl FnOnce(&Engine)) {
    match engine(name) {
        Some(e) => body(&e),
        None => {
            assert!(
                !engine_required(name),
                "Engine {name} is required (DW_ENGINES_REQUIRED) but does not answer"
            );
            eprintln!(
                "skipped: Engine {name} does not answer on its socket (scripts/setup.sh starts both engines)"
            );
        }
    }
}
