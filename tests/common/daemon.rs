//! The one launcher of private dockerds: a daemon of either engine's binaries with its own
//! socket, data root, exec root, configuration file and network namespace.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::{DAEMON, Engine, cli28, cli2010, run_with_timeout, stdout, wait};

/// How a [`PrivateDaemon`] is started beyond its own directories.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    /// `--cgroup-parent`: where its containers' (and BuildKit steps') cgroups go.
    pub cgroup_parent: Option<String>,
    /// Its `daemon.json` (`{}` when none). Never the machine's `/etc/docker/daemon.json`, which
    /// sets keys (cgroup-parent) a test may pass as flags, and dockerd refuses a key set both
    /// ways.
    pub config: Option<String>,
    /// Remove its directory (data root included) when it is dropped.
    pub remove_dir: bool,
}

/// A second dockerd with its own socket, data root, containerd and network namespace
/// (`unshare --net`, so its bridge and iptables rules never touch the main daemon's), for tests
/// that must restart the daemon or count every container without other tests interfering.
pub struct PrivateDaemon {
    pub dir: PathBuf,
    pub socket: PathBuf,
    child: Option<Child>,
    /// The engine whose binaries it runs.
    base: Engine,
    options: DaemonOptions,
}

impl PrivateDaemon {
    /// Starts a private Engine 20.10 under `/tmp/dwpd-<name>` and imports the test image into it.
    pub fn start(name: &str) -> PrivateDaemon {
        let base = Engine {
            name: "20.10",
            socket: PathBuf::from(DAEMON),
            netns: None,
            prefix: None,
        };
        Self::start_on(&base, name)
    }

    /// Starts a private daemon of engine `e`'s version (its binaries) under
    /// `/tmp/dwpd-<name>-<e20|e26>` and imports the test image into it.
    pub fn start_on(e: &Engine, name: &str) -> PrivateDaemon {
        Self::start_with(e, name, DaemonOptions::default())
    }

    /// As [`Self::start_on`], started as `options` say.
    pub fn start_with(e: &Engine, name: &str, options: DaemonOptions) -> PrivateDaemon {
        let dir = if e.name == "20.10" {
            PathBuf::from(format!("/tmp/dwpd-{name}"))
        } else {
            PathBuf::from(format!("/tmp/dwpd-{name}-{}", e.tag()))
        };
        let _ = std::fs::create_dir_all(&dir);
        let socket = dir.join("d.sock");
        let mut d = PrivateDaemon {
            dir,
            socket,
            child: None,
            base: e.clone(),
            options,
        };
        d.spawn();
        let status = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/make-test-image.sh"
        ))
        .env("DOCKER_HOST", d.host())
        .status()
        .expect("run make-test-image.sh");
        assert!(
            status.success(),
            "importing the test image into the private daemon"
        );
        d
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// This daemon as an [`Engine`] (its version's name, its socket and network namespace).
    pub fn engine(&self) -> Engine {
        let netns = self
            .child
            .as_ref()
            .map(|c| PathBuf::from(format!("/proc/{}/ns/net", c.id())));
        Engine {
            name: self.base.name,
            socket: self.socket.clone(),
            netns,
            prefix: self.base.prefix.clone(),
        }
    }

    fn spawn(&mut self) {
        let d = &self.dir;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("dockerd.log"))
            .expect("log");
        let dockerd = self.base.dockerd();
        let mut cmd = Command::new("unshare");
        cmd.arg("--net").arg(dockerd.get_program());
        for (k, v) in dockerd.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        // Its own configuration: never the machine's /etc/docker/daemon.json.
        let config = self.options.config.as_deref().unwrap_or("{}");
        std::fs::write(d.join("daemon.json"), config).expect("daemon.json");
        if let Some(parent) = &self.options.cgroup_parent {
            cmd.arg("--cgroup-parent").arg(parent);
        }
        let child = cmd
            .arg("--config-file")
            .arg(d.join("daemon.json"))
            .arg("--host")
            .arg(self.host())
            .arg("--data-root")
            .arg(d.join("root"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("dockerd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn private dockerd");
        self.child = Some(child);
        let up = wait::poll_until(Duration::from_secs(60), || {
            self.cli(&["version"]).status.success()
        });
        assert!(
            up,
            "private dockerd did not start; see {}",
            d.join("dockerd.log").display()
        );
    }

    /// Stops the daemon (SIGTERM, as systemd would) and starts it again with the same state.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
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
        if self.options.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
