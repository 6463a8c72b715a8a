//! `DockerRuntime`, the `docker-compose` runtime: per workspace, a network namespace of its
//! own (`netns`, with its link to the host from `wsnet`), a private dockerd in it
//! (`dockerd`) with a root-only socket, and a dockwarden proxy in front (`proxy`) whose
//! socket, owned by the workspace uid, is `DOCKER_HOST` for every command. Commands run as
//! the workspace uid inside the namespace, through the same process code as the standard
//! runtime.
//!
//! INVARIANT: the daemon socket is 0600 root in a root-owned directory that only the
//! workspace's group may search (0710: dockerd's remapped root must reach its data root);
//! only the proxy socket is reachable by the workspace uid.
//! INVARIANT: the daemon runs with `userns-remap` (`subid.rs`): container root is the
//! workspace uid, never host root.
//! INVARIANT: `up` returns only once the daemon and the proxy both answer `/_ping`.

pub mod api;
pub mod containerd;
pub mod containers;
pub mod dockerd;
pub mod leftovers;
pub mod netns;
pub mod proxy;
pub mod spawn;
pub mod subid;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{BoxFut, Chunk, LocalRuntime, RunSpec, Runtime};
use crate::error::{WsError, WsResult};
use crate::model::ExecResult;

/// How long dockerd and the proxy get to answer `/_ping` after start.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long processes left in a cgroup, and then the cgroup itself, get to go.
const CGROUP_GONE_WITHIN: Duration = Duration::from_secs(5);

/// What `serve` configures for the docker-compose runtime.
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// The engine binary (`/usr/sbin/dockerd`, `/opt/docker26/usr/sbin/dockerd`).
    pub dockerd: PathBuf,
    /// The dockwarden binary, run as `dockwarden proxy`.
    pub exe: PathBuf,
    /// Image archives (`docker save` output) loaded into every new daemon before setup.
    pub preload: Vec<PathBuf>,
    /// Tests only: fail the start after this step (`StartStep`), to show that a failed start
    /// leaves nothing behind. Always `None` in the service.
    #[doc(hidden)]
    pub fail_at: Option<StartStep>,
}

/// Where one workspace's runtime keeps its state.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Root-only directory holding everything below except the proxy socket and the shim.
    pub dir: PathBuf,
    pub data_root: PathBuf,
    pub exec_root: PathBuf,
    pub pidfile: PathBuf,
    pub daemon_socket: PathBuf,
    pub daemon_json: PathBuf,
    pub dockerd_log: PathBuf,
    pub netns: PathBuf,
    pub pin_dir: PathBuf,
    pub audit_log: PathBuf,
    pub proxy_log: PathBuf,
    pub proxy_pidfile: PathBuf,
    /// The proxy's arguments (`cli::proxy::ProxyArgs` as JSON, root-only).
    pub proxy_args: PathBuf,
    /// The proxy's policy file (the default policy, `private-daemon` profile).
    pub policy: PathBuf,
    /// The workspace's `DOCKER_HOST` socket (in the workspace directory, owned by its uid).
    pub proxy_socket: PathBuf,
    /// Root-owned directory first on the PATH of workspace commands (the `sudo` shim).
    pub shim_dir: PathBuf,
    /// Parent cgroup of the workspace's containers.
    pub cgroup_name: String,
    /// The container id ranges of the workspace (`userns-remap`, `subid.rs`).
    pub ranges: subid::Ranges,
}

impl Layout {
    pub fn new(ws_dir: &Path, uid: u32) -> Layout {
        let dir = ws_dir.join("docker");
        Layout {
            data_root: dir.join("data"),
            exec_root: dir.join("exec"),
            pidfile: dir.join("docker.pid"),
            daemon_socket: dir.join("docker.sock"),
            daemon_json: dir.join("daemon.json"),
            dockerd_log: dir.join("dockerd.log"),
            netns: dir.join("netns"),
            pin_dir: dir.join("pins"),
            audit_log: dir.join("audit.log"),
            proxy_log: dir.join("proxy.log"),
            proxy_pidfile: dir.join("proxy.pid"),
            proxy_args: dir.join("proxy.json"),
            policy: dir.join("policy.toml"),
            proxy_socket: ws_dir.join("docker.sock"),
            shim_dir: ws_dir.join("bin"),
            // Containers get half of the workspace's burst limit, in a child of its cgroup.
            cgroup_name: format!("dockwarden_ws_{uid}/containers"),
            // The service gives a workspace the gid equal to its uid.
            ranges: subid::Ranges::of(uid, uid),
            dir,
        }
    }

    /// Where dockerd keeps images and containers under `userns-remap`: a subdirectory of
    /// the data root named after the remapped root.
    pub fn remapped_data_root(&self) -> PathBuf {
        self.data_root
            .join(format!("{}.{}", self.ranges.uid, self.ranges.gid))
    }

    /// The data root's own disk image, when the worktree has one.
    pub fn data_image(&self) -> PathBuf {
        self.dir.join("disk").join("data.img")
    }

    /// `DOCKER_HOST` for the workspace's commands.
    pub fn docker_host(&self) -> String {
        format!("unix://{}", self.proxy_socket.display())
    }
}

/// The text of the `sudo` shim.
pub const SUDO_SHIM: &str = "#!/bin/sh\n\
echo \"sudo: not available in this workspace: commands run as the unprivileged workspace user.\" >&2\n\
echo \"Install tools in repository-local or user-writable directories (e.g. ./node_modules/.bin, ~/.local/bin, a virtualenv); run services in containers through \\$DOCKER_HOST.\" >&2\n\
exit 1\n";

/// The PATH of workspace commands: the shim directory first.
fn command_path(layout: &Layout) -> String {
    format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        layout.shim_dir.display()
    )
}

struct Instance {
    containerd: std::process::Child,
    dockerd: std::process::Child,
    proxy: std::process::Child,
}

/// The docker-compose runtime.
pub struct DockerRuntime {
    cfg: DockerConfig,
    local: Arc<LocalRuntime>,
    instances: Mutex<HashMap<String, Instance>>,
    /// Gives each namespace its link to the host; `None` leaves it with its loopback only.
    net: Option<Arc<super::wsnet::Net>>,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> WsError + '_ {
    move |e| WsError::io(path, e)
}

impl DockerRuntime {
    /// Checks that the engine binary exists; the runtime needs root.
    pub fn new(cfg: DockerConfig, local: Arc<LocalRuntime>) -> Result<DockerRuntime, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("the service is not running as root".into());
        }
        if !cfg.dockerd.is_file() {
            return Err(format!("no dockerd at `{}`", cfg.dockerd.display()));
        }
        Ok(DockerRuntime {
            cfg,
            local,
            instances: Mutex::new(HashMap::new()),
            net: None,
        })
    }

    /// The workspace networks every namespace gets its link from (`wsnet`).
    pub fn with_net(mut self, net: Option<Arc<super::wsnet::Net>>) -> Self {
        self.net = net;
        self
    }

    fn layout(spec: &RunSpec) -> Layout {
        Layout::new(&spec.ws_dir, spec.uid)
    }

    fn take(&self, id: &str) -> Option<Instance> {
        self.instances.lock().ok().and_then(|mut m| m.remove(id))
    }

    /// Brings the runtime up step by step; every step's product is owned by a [`Starting`],
    /// which undoes them all, in reverse, when a later step fails.
    async fn start(&self, spec: &RunSpec) -> WsResult<()> {
        let l = Self::layout(spec);
        let t0 = std::time::Instant::now();
        prepare_dirs(&l, spec)?;
        // Anything left from an earlier service (a crash): never two daemons on one root.
        clear_leftovers(&l).await;
        // A daemon that never ran on this data root gets the preload images.
        let fresh = !l.remapped_data_root().join("image").exists();
        let mut s = Starting::new(l, spec.uid, self.cfg.fail_at);
        let up = async {
            self.step_namespace(&mut s, spec.uid)?;
            self.step_containerd(&mut s).await?;
            self.step_dockerd(&mut s).await?;
            let daemon_ms = t0.elapsed().as_millis();
            self.step_preload(&mut s, fresh).await?;
            step_policy(&mut s)?;
            self.step_proxy(&mut s, spec).await?;
            Ok::<_, WsError>(daemon_ms)
        };
        let daemon_ms = match up.await {
            Ok(ms) => ms,
            Err(e) => {
                s.abort().await;
                return Err(e);
            }
        };
        let docker_host = s.l.docker_host();
        let instance = s
            .finish()
            .ok_or_else(|| WsError::Internal("a start without all of its processes".into()))?;
        info!(workspace.id = %spec.workspace_id, docker_host = %docker_host, up.daemon_ms = daemon_ms, up.total_ms = t0.elapsed().as_millis(), "docker runtime up");
        if let Ok(mut m) = self.instances.lock() {
            m.insert(spec.workspace_id.clone(), instance);
        }
        Ok(())
    }

    /// The namespace, its link to the host (`wsnet`: the same walls as a standard
    /// workspace's) and the masquerade on it that stands for dockerd's own iptables rules,
    /// before dockerd starts in it.
    fn step_namespace(&self, s: &mut Starting, uid: u32) -> WsResult<()> {
        // With a link, its `ip -batch` brings the loopback up too.
        match &self.net {
            Some(_) => netns::create_bare(&s.l.netns),
            None => netns::create(&s.l.netns),
        }
        .map_err(io_err(&s.l.netns))?;
        s.netns = true;
        if let Some(net) = &self.net {
            s.linked = true;
            let net_err = |e| WsError::Internal(format!("the workspace's network: {e}"));
            net.attach(&s.l.netns, uid).map_err(net_err)?;
            super::wsnet::masquerade_inside(&s.l.netns).map_err(net_err)?;
        }
        let routes = dockwarden_proxy::hostnet::routes().unwrap_or_default();
        let addrs =
            dockerd::addresses(uid, &routes).map_err(|e| WsError::Internal(e.to_string()))?;
        let conf = dockerd::config(&s.l, &addrs);
        std::fs::write(&s.l.daemon_json, conf.to_string())
            .map_err(|e| WsError::io(&s.l.daemon_json, e))?;
        s.check(StartStep::Namespace)
    }

    /// containerd first, listening before dockerd dials it (see `containerd.rs`).
    async fn step_containerd(&self, s: &mut Starting) -> WsResult<()> {
        let bin = containerd::binary(&self.cfg.dockerd).ok_or_else(|| {
            WsError::Internal(format!(
                "no containerd next to `{}` or on its PATH",
                self.cfg.dockerd.display()
            ))
        })?;
        let child = containerd::spawn(&bin, &self.cfg.dockerd, &s.l).map_err(io_err(&bin))?;
        let ctd = s.containerd.insert(child);
        let socket = containerd::Paths::of(&s.l).socket;
        let listening = containerd::wait_listening(&socket, READY_WITHIN, || {
            matches!(ctd.try_wait(), Ok(None))
        })
        .await;
        if !listening {
            return Err(WsError::Internal(format!(
                "the workspace's containerd did not start; see `{}`",
                containerd::Paths::of(&s.l).log.display()
            )));
        }
        s.check(StartStep::Containerd)
    }

    async fn step_dockerd(&self, s: &mut Starting) -> WsResult<()> {
        let child = dockerd::spawn(&self.cfg.dockerd, &s.l).map_err(io_err(&self.cfg.dockerd))?;
        let daemon = s.dockerd.insert(child);
        let ready = api::wait_ping(&s.l.daemon_socket, READY_WITHIN, || {
            matches!(daemon.try_wait(), Ok(None))
        })
        .await;
        if !ready {
            return Err(WsError::Internal(format!(
                "the workspace's dockerd did not become ready; see `{}`",
                s.l.dockerd_log.display()
            )));
        }
        s.check(StartStep::Dockerd)
    }

    async fn step_preload(&self, s: &mut Starting, fresh: bool) -> WsResult<()> {
        for tar in self.cfg.preload.iter().filter(|_| fresh) {
            api::load_image(&s.l.daemon_socket, tar)
                .await
                .map_err(|e| {
                    WsError::Internal(format!(
                        "preloading `{}` into the workspace's daemon: {e}",
                        tar.display()
                    ))
                })?;
        }
        s.check(StartStep::Preload)
    }

    async fn step_proxy(&self, s: &mut Starting, spec: &RunSpec) -> WsResult<()> {
        let child = proxy::spawn(&self.cfg.exe, &s.l, &spec.worktree, spec.uid, spec.gid)
            .map_err(io_err(&self.cfg.exe))?;
        let p = s.proxy.insert(child);
        let ready = api::wait_ping(&s.l.proxy_socket, READY_WITHIN, || {
            matches!(p.try_wait(), Ok(None))
        })
        .await;
        if !ready {
            return Err(WsError::Internal(format!(
                "the workspace's dockwarden proxy did not become ready; see `{}`",
                s.l.proxy_log.display()
            )));
        }
        s.check(StartStep::Proxy)
    }

    /// Containers (each with [`containers::GRACE`]) while the proxy goes, then dockerd and
    /// containerd while the host end of the link is deleted, then the namespace. The data stays.
    async fn stop_env(&self, spec: &RunSpec) -> WsResult<Vec<String>> {
        let l = Self::layout(spec);
        let t0 = std::time::Instant::now();
        let (daemon, proxy, ctd) = match self.take(&spec.workspace_id) {
            Some(i) => (Some(i.dockerd), Some(i.proxy), Some(i.containerd)),
            None => (None, None, None),
        };
        // The workspace's processes are gone (`stop_all`): nothing calls the proxy any more.
        let (mut stopped, proxy_ran) = tokio::join!(
            stop_containers(&l, &spec.workspace_id),
            stop_proxy(&l, proxy)
        );
        if proxy_ran {
            stopped.push("dockwarden proxy".into());
        }
        let containers_ms = t0.elapsed().as_millis();
        // The link carries nothing once the containers are gone; deleting it (tens of ms in
        // the kernel) overlaps the daemons' shutdown.
        let uid = spec.uid;
        let unlink = self
            .net
            .is_some()
            .then(|| tokio::task::spawn_blocking(move || super::wsnet::detach(uid)));
        // dockerd stops its containers through containerd, which `stop_daemon` ends next.
        if stop_daemon(&l, daemon).await {
            stopped.push("dockerd".into());
        }
        reap(ctd);
        let daemon_ms = t0.elapsed().as_millis();
        if netns::exists(&l.netns) {
            stopped.push("network namespace".into());
        }
        let released = netns::release(&l.netns).map_err(io_err(&l.netns));
        if let Some(unlink) = unlink {
            unlink
                .await
                .map_err(|e| WsError::Internal(format!("deleting the workspace's link: {e}")))?
                .map_err(|e| WsError::Internal(e.to_string()))?;
        }
        released?;
        for s in [&l.proxy_socket, &l.daemon_socket] {
            let _ = std::fs::remove_file(s);
        }
        info!(workspace.id = %spec.workspace_id, down.containers_ms = containers_ms, down.daemon_ms = daemon_ms, down.total_ms = t0.elapsed().as_millis(), "docker runtime down");
        Ok(stopped)
    }

    async fn remove_all(&self, spec: &RunSpec) -> WsResult<()> {
        let l = Self::layout(spec);
        self.stop_env(spec).await?;
        clear_leftovers(&l).await;
        // Pins, then anything dockerd left mounted (a daemon that was killed leaves overlays).
        dockwarden_sys::mountinfo::detach_beneath(&l.dir);
        leftovers::remove_cgroups(&l.cgroup_name, CGROUP_GONE_WITHIN).await;
        for d in [&l.dir, &l.shim_dir] {
            if d.exists() {
                std::fs::remove_dir_all(d).map_err(io_err(d))?;
            }
        }
        let _ = std::fs::remove_file(&l.proxy_socket);
        // dockerd (20.10) puts a container's bundle beside any parent its remapped root cannot
        // search, as `<dir>.<uid>.<gid>` owned by that uid: the workspace directory's sibling.
        let beside = spec.ws_dir.with_file_name(format!(
            "{}.{}.{}",
            spec.ws_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            l.ranges.uid,
            l.ranges.gid
        ));
        if std::fs::symlink_metadata(&beside)
            .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == l.ranges.uid)
        {
            let _ = std::fs::remove_dir_all(&beside);
        }
        if let Err(e) = subid::Files::default().remove(l.ranges.uid) {
            warn!(workspace.id = %spec.workspace_id, error = %e, "removing the workspace's id ranges");
        }
        info!(workspace.id = %spec.workspace_id, "docker runtime removed");
        Ok(())
    }
}

/// The directories, the data disk, the id ranges, the shim, the cgroup record, and whatever
/// an earlier service left: the workspace's own, kept by a failed start (`destroy` removes
/// them).
fn prepare_dirs(l: &Layout, spec: &RunSpec) -> WsResult<()> {
    for d in [&l.dir, &l.data_root, &l.exec_root] {
        std::fs::create_dir_all(d).map_err(io_err(d))?;
    }
    // A worktree on a disk image: the daemon's data root gets one of the same size, so
    // what containers write is bounded too (`disk::ensure_data`).
    use crate::resources::disk;
    if disk::is_mount(&spec.worktree) {
        let bytes = disk::size_of(&spec.worktree).unwrap_or(disk::MIN_DISK);
        disk::ensure_data(&l.data_image(), &l.data_root, spec.uid, bytes)
            .map_err(|e| WsError::Internal(format!("the daemon's data disk: {e}")))?;
    }
    // Root's, searchable by the workspace's group alone: dockerd refuses a data root whose
    // parents its remapped root (the workspace uid) cannot search. Everything inside is
    // root-only except the remapped data root (`subid.rs`, docs/isolation.md).
    nix::unistd::chown(&l.dir, Some(0.into()), Some(l.ranges.gid.into()))
        .map_err(|e| WsError::io(&l.dir, e.into()))?;
    std::fs::set_permissions(&l.dir, std::fs::Permissions::from_mode(0o710))
        .map_err(io_err(&l.dir))?;
    // Container root is the workspace uid, container users its subordinate range.
    subid::Files::default()
        .ensure(&l.ranges)
        .map_err(|e| WsError::Internal(e.to_string()))?;
    write_shim(l)?;
    // Read back by `sweep` when the record is gone.
    let cg = l.dir.join("cgroup");
    std::fs::write(&cg, &l.cgroup_name).map_err(io_err(&cg))
}

/// The daemon socket root-only, and the proxy's policy file.
fn step_policy(s: &mut Starting) -> WsResult<()> {
    // dockerd makes it 0660 root:root; the directory is 0710 already, this is belt and braces.
    std::fs::set_permissions(&s.l.daemon_socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err(&s.l.daemon_socket))?;
    let text = proxy::policy_text().map_err(WsError::Internal)?;
    std::fs::write(&s.l.policy, text).map_err(|e| WsError::io(&s.l.policy, e))?;
    s.check(StartStep::Policy)
}

/// The steps of a start, in order; a test makes any of them fail (`DockerConfig::fail_at`)
/// to show that a failed start leaves nothing behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartStep {
    Namespace,
    Containerd,
    Dockerd,
    Preload,
    Policy,
    Proxy,
}

impl StartStep {
    pub const ALL: [StartStep; 6] = [
        StartStep::Namespace,
        StartStep::Containerd,
        StartStep::Dockerd,
        StartStep::Preload,
        StartStep::Policy,
        StartStep::Proxy,
    ];
}

/// What a start has made so far. `abort` undoes it in reverse (the proxy, dockerd with what
/// it left, containerd, the containers' cgroup, the namespace's link, the namespace); dropped without `finish` or
/// `abort` (a cancelled start), it kills the children and releases the namespace at once.
struct Starting {
    l: Layout,
    uid: u32,
    netns: bool,
    linked: bool,
    containerd: Option<std::process::Child>,
    dockerd: Option<std::process::Child>,
    proxy: Option<std::process::Child>,
    fail_at: Option<StartStep>,
}

impl Starting {
    fn new(l: Layout, uid: u32, fail_at: Option<StartStep>) -> Starting {
        Starting {
            l,
            uid,
            netns: false,
            linked: false,
            containerd: None,
            dockerd: None,
            proxy: None,
            fail_at,
        }
    }

    /// The injected failure of a test, after `step` made its part.
    fn check(&self, step: StartStep) -> WsResult<()> {
        match self.fail_at {
            Some(f) if f == step => Err(WsError::Internal(format!(
                "injected failure after the start step {step:?}"
            ))),
            _ => Ok(()),
        }
    }

    /// The running instance, once every step made its part; `None` (everything undone by
    /// the drop) otherwise.
    fn finish(mut self) -> Option<Instance> {
        let (Some(_), Some(_), Some(_)) = (&self.containerd, &self.dockerd, &self.proxy) else {
            return None;
        };
        self.netns = false;
        self.linked = false;
        Some(Instance {
            containerd: self.containerd.take()?,
            dockerd: self.dockerd.take()?,
            proxy: self.proxy.take()?,
        })
    }

    async fn abort(mut self) {
        if let Some(p) = self.proxy.take() {
            reap(Some(p));
        }
        if self.dockerd.is_some() || self.containerd.is_some() {
            // dockerd stops through SIGTERM; what it or containerd left is cleared after.
            stop_daemon(&self.l, self.dockerd.take()).await;
            reap(self.containerd.take());
        }
        // The containers' cgroup the proxy set up (made again by the next start).
        leftovers::remove_cgroups(&self.l.cgroup_name, CGROUP_GONE_WITHIN).await;
        self.release_namespace();
    }

    fn release_namespace(&mut self) {
        if std::mem::take(&mut self.linked) {
            let _ = super::wsnet::detach(self.uid);
        }
        if std::mem::take(&mut self.netns) {
            let _ = netns::release(&self.l.netns);
        }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        for c in [
            self.proxy.take(),
            self.dockerd.take(),
            self.containerd.take(),
        ] {
            reap(c);
        }
        self.release_namespace();
    }
}

fn write_shim(l: &Layout) -> WsResult<()> {
    std::fs::create_dir_all(&l.shim_dir).map_err(io_err(&l.shim_dir))?;
    std::fs::set_permissions(&l.shim_dir, std::fs::Permissions::from_mode(0o755))
        .map_err(io_err(&l.shim_dir))?;
    let sudo = l.shim_dir.join("sudo");
    std::fs::write(&sudo, SUDO_SHIM).map_err(io_err(&sudo))?;
    std::fs::set_permissions(&sudo, std::fs::Permissions::from_mode(0o755)).map_err(io_err(&sudo))
}

/// Stops the running containers of a daemon that answers (`containers.rs`); returns what
/// was stopped, for the caller's report. A failure is logged: dockerd's own shutdown, and
/// then the cgroup sweep in `stop_daemon`, still end the container.
async fn stop_containers(l: &Layout, workspace: &str) -> Vec<String> {
    if !api::ping(&l.daemon_socket).await {
        return Vec::new();
    }
    let listed = api::containers(&l.daemon_socket).await.unwrap_or_default();
    let (ids, names): (Vec<String>, Vec<String>) = listed
        .into_iter()
        .filter(|c| c.2)
        .map(|(id, name, _)| (id, format!("container {name}")))
        .unzip();
    for r in containers::stop_all(&l.daemon_socket, &ids, containers::GRACE).await {
        if let Err(e) = r {
            warn!(workspace.id = %workspace, error = %e, "stopping a container");
        }
    }
    names
}

/// Stops the proxy (the child, or the one its pidfile names); true if one ran.
async fn stop_proxy(l: &Layout, child: Option<std::process::Child>) -> bool {
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "dockwarden".into());
    let pid = child
        .as_ref()
        .map(|c| c.id() as i32)
        .or_else(|| dockerd::live_pid(&l.proxy_pidfile, &exe));
    let ran = pid.is_some_and(dockerd::alive);
    if let Some(pid) = pid {
        dockerd::terminate(pid, Duration::from_secs(5)).await;
    }
    reap(child);
    let _ = std::fs::remove_file(&l.proxy_pidfile);
    ran
}

/// Stops dockerd (SIGTERM: it stops its containers and containerd), then anything of its
/// containerd still running under the exec root, and unmounts what it left there.
async fn stop_daemon(l: &Layout, child: Option<std::process::Child>) -> bool {
    let pid = child
        .as_ref()
        .map(|c| c.id() as i32)
        .or_else(|| dockerd::live_pid(&l.pidfile, "dockerd"));
    let ran = pid.is_some_and(dockerd::alive);
    if let Some(pid) = pid {
        dockerd::terminate(pid, Duration::from_secs(20)).await;
    }
    reap(child);
    for pid in dockerd::pids_mentioning(&l.exec_root) {
        dockerd::terminate(pid, Duration::from_secs(2)).await;
    }
    // Containers its shims left running (a daemon killed before it stopped them): the
    // containers' cgroup lists every one.
    let n = leftovers::kill_all_in(&l.cgroup_name, CGROUP_GONE_WITHIN).await;
    if n > 0 {
        warn!(cgroup = %l.cgroup_name, processes = n, "killed container processes left without their daemon");
    }
    dockwarden_sys::mountinfo::detach_beneath(&l.exec_root);
    ran
}

fn reap(child: Option<std::process::Child>) {
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Daemon, containerd and proxy left by an earlier service process, and a stale namespace.
async fn clear_leftovers(l: &Layout) {
    if stop_proxy(l, None).await {
        warn!(dir = %l.dir.display(), "stopped a dockwarden proxy left by an earlier service");
    }
    if stop_daemon(l, None).await {
        warn!(dir = %l.dir.display(), "stopped a dockerd left by an earlier service");
    }
    let _ = netns::release(&l.netns);
}

/// Stops whatever runtime a workspace directory without a record still holds and unmounts
/// what it left. Its cgroup name is the one `start` recorded in `docker/cgroup`; with the
/// record gone, every process still in that workspace cgroup is killed and the cgroup removed.
pub async fn sweep(ws_dir: &Path) {
    let mut l = Layout::new(ws_dir, 0);
    if !l.dir.exists() {
        return;
    }
    let recorded = std::fs::read_to_string(l.dir.join("cgroup")).ok();
    let ws = recorded.as_deref().and_then(recorded_workspace_cgroup);
    if let Some(name) = &recorded
        && ws.is_some()
    {
        l.cgroup_name = name.trim().to_string();
    }
    clear_leftovers(&l).await;
    dockwarden_sys::mountinfo::detach_beneath(&l.dir);
    if let Some(ws) = ws {
        let n = leftovers::kill_all_in(ws, CGROUP_GONE_WITHIN).await;
        if n > 0 {
            warn!(cgroup = %ws, processes = n, "killed processes of a workspace with no record");
        }
        leftovers::remove_cgroups(ws, CGROUP_GONE_WITHIN).await;
    }
}

/// Pure: the workspace cgroup (`dockwarden_ws_<digits>`) of a recorded container parent
/// name, or None when the record is not one.
pub fn recorded_workspace_cgroup(recorded: &str) -> Option<&str> {
    let mut parts = recorded.trim().split('/');
    let ws = parts.next()?;
    let digits = ws.strip_prefix("dockwarden_ws_")?;
    let rest: Vec<&str> = parts.collect();
    (!digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (rest.is_empty() || rest == ["containers"]))
    .then_some(ws)
}

impl Runtime for DockerRuntime {
    fn exec<'a>(
        &'a self,
        spec: &'a RunSpec,
        command: &'a str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, WsResult<ExecResult>> {
        Box::pin(async move {
            let l = Self::layout(spec);
            if !self.is_up(spec) {
                return Err(WsError::Invalid(format!(
                    "the docker runtime of workspace `{}` is not running; `restart` or `connect` it",
                    spec.workspace_id
                )));
            }
            let mut inner = spec.clone();
            inner.netns = Some(l.netns.clone());
            inner.env.insert("DOCKER_HOST".into(), l.docker_host());
            inner.env.insert("PATH".into(), command_path(&l));
            self.local.exec(&inner, command, timeout, sink).await
        })
    }

    fn stop<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<u32>> {
        self.local.stop(spec)
    }

    fn isolates_users(&self) -> bool {
        self.local.isolates_users()
    }

    fn up<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        Box::pin(async move {
            if self.is_up(spec) {
                return Ok(());
            }
            // A half-dead instance (one child exited) is taken down before starting again.
            if self
                .instances
                .lock()
                .map(|m| m.contains_key(&spec.workspace_id))
                .unwrap_or(false)
            {
                self.stop_env(spec).await?;
            }
            self.start(spec).await
        })
    }

    fn down<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<Vec<String>>> {
        Box::pin(self.stop_env(spec))
    }

    fn destroy<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        Box::pin(self.remove_all(spec))
    }

    fn dead_parts(&self, spec: &RunSpec) -> Vec<String> {
        let l = Self::layout(spec);
        let Ok(mut m) = self.instances.lock() else {
            return vec!["the runtime's records (poisoned lock)".into()];
        };
        let Some(i) = m.get_mut(&spec.workspace_id) else {
            return vec!["dockerd, containerd and the dockwarden proxy (not started)".into()];
        };
        let ctd_log = containerd::Paths::of(&l).log;
        let parts: [(&str, &mut std::process::Child, &Path); 3] = [
            ("containerd", &mut i.containerd, &ctd_log),
            ("dockerd", &mut i.dockerd, &l.dockerd_log),
            ("the dockwarden proxy", &mut i.proxy, &l.proxy_log),
        ];
        parts
            .into_iter()
            .filter_map(|(name, child, log)| match child.try_wait() {
                Ok(None) => None,
                Ok(Some(st)) => Some(format!("{name} {st}; see `{}`", log.display())),
                Err(e) => Some(format!("{name} (unknown: {e}); see `{}`", log.display())),
            })
            .collect()
    }

    fn answers<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, bool> {
        Box::pin(async move { api::ping(&Self::layout(spec).daemon_socket).await })
    }

    fn is_up(&self, spec: &RunSpec) -> bool {
        let Ok(mut m) = self.instances.lock() else {
            return false;
        };
        match m.get_mut(&spec.workspace_id) {
            Some(i) => {
                matches!(i.containerd.try_wait(), Ok(None))
                    && matches!(i.dockerd.try_wait(), Ok(None))
                    && matches!(i.proxy.try_wait(), Ok(None))
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_workspace_cgroup_record_is_trusted() {
        assert_eq!(
            recorded_workspace_cgroup("dockwarden_ws_43302/containers\n"),
            Some("dockwarden_ws_43302")
        );
        assert_eq!(
            recorded_workspace_cgroup("dockwarden_ws_7"),
            Some("dockwarden_ws_7")
        );
        for bad in [
            "",
            "dockwarden_ws_",
            "dockwarden_ws_12x/containers",
            "system.slice",
            "../dockwarden_ws_1",
            "dockwarden_ws_1/../../init.scope",
            "dockwarden_ws_1/containers/x",
        ] {
            assert_eq!(recorded_workspace_cgroup(bad), None, "{bad}");
        }
        let l = Layout::new(Path::new("/s/workspaces/a"), 43302);
        assert_eq!(
            recorded_workspace_cgroup(&l.cgroup_name),
            Some("dockwarden_ws_43302")
        );
    }
}
