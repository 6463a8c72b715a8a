//! The service object: configuration, the store, the two seams, and per-workspace locks.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedRwLockWriteGuard;

use crate::error::{WsError, WsResult};
use crate::model::Workspace;
use crate::runtime::{RunSpec, Runtime};
use crate::snapshot::{Progress, SnapshotStore};
use crate::status::Status;
use crate::store::Store;

/// A progress callback that can cross into blocking tasks.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// A progress callback that ignores progress.
pub fn no_progress() -> ProgressSink {
    Arc::new(|_| {})
}

/// Service configuration (from `dockwarden serve` flags).
#[derive(Debug, Clone)]
pub struct Config {
    pub state_dir: PathBuf,
    /// First uid (and gid) handed to workspaces.
    pub uid_base: u32,
    pub uid_count: u32,
    pub default_idle_timeout: Duration,
    /// How often idle stop and baseline refresh look at workspaces.
    pub tick: Duration,
    /// A baseline snapshot older than this is refreshed while the workspace is live.
    pub baseline_stale_after: Duration,
    /// Maximum runtime of a workspace that neither its create request nor its settings limit.
    pub default_max_runtime: Option<Duration>,
    /// Time from suspension to archive when neither the create request nor the settings
    /// say; zero: idle archives at once.
    pub default_archive_after: Duration,
    /// Superseded automatic snapshots kept per workspace beside the newest (`retention`).
    pub keep_snapshots: usize,
}

/// In-memory state of one workspace: its exclusive-operation lock and its activity.
#[derive(Debug)]
pub struct WsLive {
    /// Held by create/setup, kill, connect, restart, reprovision, resize, delete and
    /// snapshots (`Service::exclusive`).
    pub op: Arc<tokio::sync::Mutex<()>>,
    /// Execs hold it shared; stopping holds it alone, so no command starts in a workspace
    /// that is being stopped or restored.
    pub run_gate: Arc<tokio::sync::RwLock<()>>,
    last_activity: Mutex<Instant>,
    execs: AtomicUsize,
    /// Set by a delete that arrives while the workspace is being created.
    pub cancelled: std::sync::atomic::AtomicBool,
    /// Restarts of a runtime whose part died, and their back-off (`heal`).
    pub heal: Mutex<crate::heal::HealState>,
    /// The run script's generation and how it ended (`heal_run_script`).
    pub run_script: Mutex<crate::heal_run_script::RunScriptState>,
}

impl WsLive {
    fn new() -> Self {
        WsLive {
            op: Arc::new(tokio::sync::Mutex::new(())),
            run_gate: Arc::new(tokio::sync::RwLock::new(())),
            last_activity: Mutex::new(Instant::now()),
            execs: AtomicUsize::new(0),
            cancelled: std::sync::atomic::AtomicBool::new(false),
            heal: Mutex::new(crate::heal::HealState::default()),
            run_script: Mutex::new(crate::heal_run_script::RunScriptState::default()),
        }
    }

    pub fn touch(&self) {
        if let Ok(mut t) = self.last_activity.lock() {
            *t = Instant::now();
        }
    }

    /// Time since the last activity; zero while an exec runs.
    pub fn idle_for(&self) -> Duration {
        if self.execs.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        self.last_activity
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or(Duration::ZERO)
    }
}

/// Marks a running exec; activity is refreshed when it ends too.
pub struct ExecGuard(Arc<WsLive>);

impl ExecGuard {
    pub fn new(live: Arc<WsLive>) -> Self {
        live.execs.fetch_add(1, Ordering::SeqCst);
        live.touch();
        ExecGuard(live)
    }
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        self.0.touch();
        self.0.execs.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The workspace lifecycle service.
pub struct Service {
    pub cfg: Config,
    pub store: Store,
    pub snapshots: Arc<dyn SnapshotStore>,
    pub runtime: Arc<dyn Runtime>,
    live: Mutex<HashMap<String, Arc<WsLive>>>,
    /// Snapshot captures share it; garbage collection takes it alone, so a capture that is
    /// not yet recorded is never collected.
    pub gc_gate: tokio::sync::RwLock<()>,
    /// Serialises creates: id idempotency and uid allocation.
    pub create_gate: tokio::sync::Mutex<()>,
    /// Layers, defaults and the provider of workspace resources (`resources`).
    pub resources: crate::resources::Manager,
    /// Where a released uid is swept (`uidsweep`); `None` when workspaces do not run as
    /// their own uids (the service is not root), so there is nothing of theirs to sweep.
    pub uid_sweep: Option<crate::uidsweep::Roots>,
}

impl Service {
    pub fn new(
        cfg: Config,
        store: Store,
        snapshots: Arc<dyn SnapshotStore>,
        runtime: Arc<dyn Runtime>,
    ) -> Self {
        let uid_sweep = runtime
            .isolates_users()
            .then(|| crate::uidsweep::Roots::system(&cfg.state_dir));
        Service {
            uid_sweep,
            cfg,
            store,
            snapshots,
            runtime,
            live: Mutex::new(HashMap::new()),
            gc_gate: tokio::sync::RwLock::new(()),
            create_gate: tokio::sync::Mutex::new(()),
            resources: crate::resources::Manager::unenforced(),
        }
    }

    /// The in-memory state of `id`, created on first use.
    pub fn live(&self, id: &str) -> Arc<WsLive> {
        match self.live.lock() {
            Ok(mut m) => m
                .entry(id.to_string())
                .or_insert_with(|| Arc::new(WsLive::new()))
                .clone(),
            Err(_) => Arc::new(WsLive::new()),
        }
    }

    pub fn forget(&self, id: &str) {
        if let Ok(mut m) = self.live.lock() {
            m.remove(id);
        }
    }

    pub fn ws_dir(&self, id: &str) -> PathBuf {
        self.cfg.state_dir.join("workspaces").join(id)
    }

    pub fn worktree(&self, id: &str) -> PathBuf {
        self.ws_dir(id).join("worktree")
    }

    pub fn home(&self, id: &str) -> PathBuf {
        self.ws_dir(id).join("home")
    }

    /// Owner for files the service creates in a worktree (none when not isolating users).
    pub fn owner(&self, ws: &Workspace) -> Option<(u32, u32)> {
        self.runtime.isolates_users().then_some((ws.uid, ws.uid))
    }

    /// How a command of `ws` runs: env, then secrets, then the call's own env.
    pub fn run_spec(&self, ws: &Workspace, extra: &BTreeMap<String, String>) -> WsResult<RunSpec> {
        let mut env = ws.env.clone();
        env.extend(self.store.secrets(&ws.id)?);
        env.extend(extra.clone());
        Ok(RunSpec {
            workspace_id: ws.id.clone(),
            uid: ws.uid,
            gid: ws.uid,
            worktree: self.worktree(&ws.id),
            home: self.home(&ws.id),
            env,
            ws_dir: self.ws_dir(&ws.id),
            kind: ws.runtime.runtime,
            netns: None,
        })
    }

    /// Stops every process of `ws` and keeps new commands out until the guard drops.
    /// Returns how many processes or groups were signalled.
    pub async fn stop_all(&self, ws: &Workspace) -> WsResult<(OwnedRwLockWriteGuard<()>, u32)> {
        let spec = self.run_spec(ws, &BTreeMap::new())?;
        // The run script about to be stopped is not dying: upkeep must not start it again.
        crate::heal_run_script::new_generation(&self.live(&ws.id));
        let gate = self.live(&ws.id).run_gate.clone();
        let mut signalled = 0;
        loop {
            signalled += self.runtime.stop(&spec).await?;
            // Execs in flight end once their processes die; retry for any that raced in.
            let wait = tokio::time::timeout(Duration::from_millis(100), gate.clone().write_owned());
            if let Ok(guard) = wait.await {
                return Ok((guard, signalled));
            }
        }
    }

    /// Allocates the lowest free uid of the configured range: held by no workspace and not
    /// quarantined (see `uidsweep`).
    pub fn allocate_uid(&self) -> WsResult<u32> {
        let used: std::collections::HashSet<u32> = self.store.used_uids()?.into_iter().collect();
        (self.cfg.uid_base..self.cfg.uid_base.saturating_add(self.cfg.uid_count))
            .find(|u| !used.contains(u))
            .ok_or(WsError::NoFreeUid)
    }

    /// Whether the worktree can be used as is.
    pub fn worktree_valid(&self, ws: &Workspace) -> bool {
        let wt = self.worktree(&ws.id);
        let Ok(meta) = std::fs::symlink_metadata(&wt) else {
            return false;
        };
        if !meta.is_dir() {
            return false;
        }
        if ws.repo.is_some() && !git_dir_ok(&wt) {
            return false;
        }
        true
    }
}

/// A cloned worktree must still have a usable `.git` directory with a HEAD.
fn git_dir_ok(wt: &Path) -> bool {
    std::fs::symlink_metadata(wt.join(".git").join("HEAD"))
        .map(|m| m.is_file())
        .unwrap_or(false)
}

/// Convenience for status updates inside verbs.
pub fn set_status(ws: &mut Workspace, s: Status) {
    ws.status = s;
}
