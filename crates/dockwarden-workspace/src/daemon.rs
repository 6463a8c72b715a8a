//! Wiring of the service: state directory, store, snapshot store, runtime, recovery, the
//! API on its socket and the upkeep loop, run until `shutdown` resolves.

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::resources::{LocalProvider, Manager, ResourcesConfig};
use crate::runtime::wsnet::{Egress, Net};
use crate::runtime::{DockerConfig, DockerRuntime, LocalRuntime, Runtime, Runtimes};
use crate::snapshot::LocalSnapshotStore;
use crate::store::Store;
use crate::{Config, Service, api};

/// What `dockwarden serve` configures.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub socket: PathBuf,
    pub socket_mode: u32,
    pub config: Config,
    /// The docker-compose runtime's engine; `None` turns that runtime off.
    pub docker: Option<DockerConfig>,
    /// Resource layers, defaults and the disk pool (`serve --resources`; embedded default).
    pub resources: ResourcesConfig,
    /// The key the secrets in `state.db` are sealed under (`serve --secrets-key`), outside
    /// the state directory.
    pub secrets_key: PathBuf,
    /// What workspaces may reach beyond the walls (`serve --egress`).
    pub egress: Egress,
}

/// Opens the state under `cfg.state_dir` and builds the service with the local seams.
pub fn open_service(
    cfg: Config,
    docker: Option<DockerConfig>,
    secrets_key: &Path,
) -> WsResult<Arc<Service>> {
    open_service_with(
        cfg,
        docker,
        ResourcesConfig::embedded(),
        secrets_key,
        Egress::default(),
    )
}

/// `open_service` with a resources configuration: the disk pool is mounted (or found again)
/// at `<state>/workspaces` before anything is created there.
pub fn open_service_with(
    cfg: Config,
    docker: Option<DockerConfig>,
    resources: ResourcesConfig,
    secrets_key: &Path,
    egress: Egress,
) -> WsResult<Arc<Service>> {
    let disk = crate::resources::disk::Disk::open(&cfg.state_dir, &resources);
    // Workspace users must traverse to their own worktree, but list nothing on the way.
    for dir in [cfg.state_dir.clone(), cfg.state_dir.join("workspaces")] {
        std::fs::create_dir_all(&dir).map_err(|e| WsError::io(&dir, e))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
            .map_err(|e| WsError::io(&dir, e))?;
    }
    let mut local = LocalRuntime::new();
    if local.isolates_users() {
        // Every workspace command runs in the workspace's own namespaces (`sandbox`).
        let exe =
            std::env::current_exe().map_err(|e| WsError::io(Path::new("/proc/self/exe"), e))?;
        local = local.with_sandbox(exe);
    }
    let local = Arc::new(local);
    let mut net = None;
    if local.isolates_users() {
        crate::preflight::check_traversable(&cfg.state_dir)?;
        // INVARIANT: a root service never runs workspaces on the host's network.
        let n = Net::install(egress)
            .map_err(|e| WsError::Internal(format!("setting up workspace networks: {e}")))?;
        net = Some(Arc::new(n));
    } else {
        warn!(
            "not running as root: workspace commands run as this user, not per-workspace uids, on the host's network"
        );
    }
    // After the checks that need no key, so a refused start makes no key either.
    let store = Store::open_sealed(&cfg.state_dir.join("state.db"), secrets_key)?;
    let snapshots = LocalSnapshotStore::open(&cfg.state_dir.join("snapshots"))?;
    let (docker, docker_unavailable) = match docker {
        None => (None, "it is turned off (`serve --no-docker`)".to_string()),
        Some(d) => match DockerRuntime::new(d, local.clone()) {
            Ok(rt) => (
                Some(Arc::new(rt.with_net(net.clone())) as Arc<dyn Runtime>),
                String::new(),
            ),
            Err(why) => {
                warn!(reason = %why, "the docker-compose runtime is unavailable");
                (None, why)
            }
        },
    };
    let runtimes = Runtimes {
        standard: local,
        docker,
        docker_unavailable,
        net,
    };
    let mut svc = Service::new(cfg, store, Arc::new(snapshots), Arc::new(runtimes));
    svc.resources = Manager::new(resources, Arc::new(LocalProvider::detect(disk)));
    Ok(Arc::new(svc))
}

/// Recovers state, then serves the API until `shutdown` resolves.
pub async fn run(opts: DaemonOptions, shutdown: impl Future<Output = ()>) -> WsResult<()> {
    // INVARIANT: nothing in the state directory is touched before its lock is held.
    let _lock = crate::lock::lock_state_dir(&opts.config.state_dir)?;
    crate::lock::refuse_live_socket(&opts.socket)?;
    let svc = open_service_with(
        opts.config,
        opts.docker,
        opts.resources,
        &opts.secrets_key,
        opts.egress,
    )?;
    svc.settle_image_clones();
    // INVARIANT: recovery finishes before the socket accepts a request.
    svc.recover_on_start().await?;
    // After recovery (which finishes interrupted deletes): what a crash left under free uids.
    svc.sweep_free_uids_on_start().await?;
    // After recovery found (and stopped) what an earlier service left running: the sandboxes'
    // PID 1s it left, idle now.
    let left = crate::sandbox::Sandboxes::sweep(&svc.cfg.state_dir.join("workspaces"));
    if left > 0 {
        warn!(
            count = left,
            "stopped workspace sandboxes an earlier service left"
        );
    }
    svc.reapply_resources();
    let listener = api::bind(&opts.socket, opts.socket_mode)?;
    info!(socket = %opts.socket.display(), "workspace service ready");
    let upkeep = tokio::spawn(svc.clone().upkeep_loop());
    api::run(listener, svc.clone(), shutdown).await;
    upkeep.abort();
    // INVARIANT: no workspace command outlives the service unsupervised.
    svc.stop_on_shutdown().await;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// A default configuration for `state_dir` (used by the CLI and tests).
pub fn config(state_dir: PathBuf) -> Config {
    Config {
        state_dir,
        uid_base: 20000,
        uid_count: 10000,
        default_idle_timeout: Duration::from_secs(crate::model::DEFAULT_IDLE_TIMEOUT_SECS),
        tick: Duration::from_secs(1),
        baseline_stale_after: Duration::from_secs(600),
        default_max_runtime: None,
        default_archive_after: Duration::from_secs(crate::model::DEFAULT_ARCHIVE_AFTER_SECS),
        keep_snapshots: 20,
    }
}
