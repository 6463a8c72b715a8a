//! Lifecycle tests against a fake `Runtime` (no processes, no root): guards, idempotent
//! create, uid allocation, kill/connect transitions and metadata filters.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::WsError;
use crate::model::{CreateRequest, ExecRequest, ExecResult};
use crate::resources::input::ResizeInput;
use crate::runtime::{BoxFut, Chunk, RunSpec, Runtime};
use crate::service::no_progress;
use crate::snapshot::LocalSnapshotStore;
use crate::status::Status;
use crate::store::{self, Store};
use crate::{Config, Service};

/// Records commands and stops instead of running anything.
#[derive(Default)]
struct FakeRuntime {
    commands: Mutex<Vec<String>>,
    stops: AtomicU32,
    /// A stop waits while a test holds this for writing (a kill in progress).
    stop_gate: tokio::sync::RwLock<()>,
}

impl Runtime for FakeRuntime {
    fn exec<'a>(
        &'a self,
        _: &'a RunSpec,
        command: &'a str,
        _: Option<Duration>,
        _: Option<tokio::sync::mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, crate::WsResult<ExecResult>> {
        self.commands.lock().unwrap().push(command.to_string());
        Box::pin(async {
            Ok(ExecResult {
                exit_code: 0,
                stdout: "fake\n".into(),
                stderr: String::new(),
                timed_out: false,
                duration_ms: 0,
                disk: None,
                notes: Vec::new(),
            })
        })
    }

    fn stop<'a>(&'a self, _: &'a RunSpec) -> BoxFut<'a, crate::WsResult<u32>> {
        self.stops.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            let _held = self.stop_gate.read().await;
            Ok(0)
        })
    }

    fn isolates_users(&self) -> bool {
        false
    }
}

fn service(dir: &std::path::Path) -> (Service, Arc<FakeRuntime>) {
    let rt = Arc::new(FakeRuntime::default());
    let cfg = Config {
        state_dir: dir.to_path_buf(),
        uid_base: 30000,
        uid_count: 2,
        default_idle_timeout: Duration::from_secs(3600),
        tick: Duration::from_secs(1),
        baseline_stale_after: Duration::from_secs(600),
        default_max_runtime: None,
        default_archive_after: std::time::Duration::from_secs(3600),
        keep_snapshots: 2,
    };
    let store = Store::open(&dir.join("state.db")).unwrap();
    let snaps = Arc::new(LocalSnapshotStore::open(&dir.join("snapshots")).unwrap());
    (Service::new(cfg, store, snaps, rt.clone()), rt)
}

fn req(id: &str, meta: &[(&str, &str)]) -> CreateRequest {
    CreateRequest {
        id: Some(id.into()),
        metadata: meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn create_is_idempotent_and_uids_run_out_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _) = service(dir.path());
    let a = svc.create(req("a", &[])).await.unwrap();
    assert!(a.created);
    assert_eq!(a.workspace.status, Status::Ready);
    assert!(a.workspace.latest_snapshot.is_some(), "baseline taken");
    let again = svc.create(req("a", &[])).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.workspace.uid, a.workspace.uid);
    svc.create(req("b", &[])).await.unwrap();
    assert!(matches!(
        svc.create(req("c", &[])).await,
        Err(WsError::NoFreeUid)
    ));
    svc.delete("a").await.unwrap();
    assert_eq!(
        svc.create(req("c", &[])).await.unwrap().workspace.uid,
        a.workspace.uid,
        "freed uid is reused"
    );
    assert!(matches!(
        svc.create(req("../x", &[])).await,
        Err(WsError::Invalid(_))
    ));
}

#[tokio::test]
async fn kill_and_connect_follow_the_state_machine() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, rt) = service(dir.path());
    svc.create(req("w", &[])).await.unwrap();
    let exec = |cmd: &str| ExecRequest {
        cmd: cmd.into(),
        ..Default::default()
    };
    svc.exec("w", exec("make"), None).await.unwrap();
    assert_eq!(svc.info("w").unwrap().status, Status::Running);
    let killed = svc.kill("w", "kill", no_progress()).await.unwrap();
    assert_eq!(killed.workspace.status, Status::Stopped);
    assert!(killed.snapshot.is_some());
    assert_eq!(rt.stops.load(Ordering::SeqCst), 1);
    let err = svc.exec("w", exec("make"), None).await.unwrap_err();
    assert_eq!(err.code(), "wrong_state");
    assert!(err.to_string().contains("`connect` it first"), "{err}");
    assert!(
        svc.kill("w", "kill", no_progress())
            .await
            .unwrap()
            .snapshot
            .is_none(),
        "killing a stopped workspace is a no-op"
    );
    let connected = svc.connect("w", no_progress()).await.unwrap();
    assert_eq!(connected.workspace.status, Status::Running);
    assert!(connected.recovery.is_none());
    assert_eq!(rt.commands.lock().unwrap().as_slice(), ["make"]);
    assert!(
        svc.store.journal().unwrap().is_empty(),
        "no transition left in flight"
    );
}

#[tokio::test]
async fn superseded_baselines_are_pruned_in_batches_and_manual_snapshots_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _) = service(dir.path());
    svc.create(req("p", &[])).await.unwrap();
    let first = svc.info("p").unwrap().latest_snapshot.unwrap();
    let mut manual = Vec::new();
    let mut baselines = vec![first];
    for i in 0..7 {
        if i % 2 == 0 {
            manual.push(svc.snapshot("p", no_progress()).await.unwrap().id);
        }
        let b = svc.capture_locked("p", "baseline", no_progress()).await;
        baselines.push(b.unwrap().id);
    }
    // 8 baselines; the newest and `keep` (2) superseded ones stay, so 5 are prunable: one
    // batch, pruned at the 8th. Every manual snapshot stays.
    let left: Vec<String> = svc
        .list_snapshots("p")
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    for m in &manual {
        assert!(left.contains(m), "manual {m} pruned: {left:?}");
    }
    let kept: Vec<&String> = baselines.iter().filter(|b| left.contains(b)).collect();
    assert_eq!(kept, [&baselines[5], &baselines[6], &baselines[7]]);
    assert_eq!(
        svc.info("p").unwrap().latest_snapshot.as_deref(),
        Some(baselines[7].as_str())
    );
    let manifests = std::fs::read_dir(dir.path().join("snapshots/manifests"))
        .unwrap()
        .count();
    assert_eq!(manifests, manual.len() + 3);
}

#[tokio::test]
async fn metadata_filters_are_subset_matches() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _) = service(dir.path());
    svc.create(req("x", &[("conversation", "42"), ("user", "ada")]))
        .await
        .unwrap();
    svc.create(req("y", &[("conversation", "7")]))
        .await
        .unwrap();
    let filter: BTreeMap<String, String> = [("conversation".to_string(), "42".to_string())].into();
    let ids: Vec<String> = svc
        .list(&filter)
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["x"]);
    assert_eq!(svc.delete_matching(&filter).await.unwrap(), ["x"]);
    assert!(svc.delete_matching(&BTreeMap::new()).await.is_err());
    assert_eq!(svc.list(&BTreeMap::new()).unwrap().len(), 1);
}

fn disk(size: &str) -> ResizeInput {
    ResizeInput {
        disk: Some(serde_json::json!(size)),
        ..Default::default()
    }
}

#[tokio::test]
async fn resize_of_a_workspace_being_created_is_refused_without_waiting_for_its_setup() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, _) = service(dir.path());
    svc.create(req("c", &[])).await.unwrap();
    let mut ws = svc.info("c").unwrap();
    ws.status = Status::Creating;
    svc.store.tx(|tx| store::put_ws(tx, &ws)).unwrap();
    // A create holds the op lock for its whole setup.
    let live = svc.live("c");
    let _setup = live.op.lock().await;
    let refused = tokio::time::timeout(Duration::from_secs(5), svc.resize("c", disk("96MiB")))
        .await
        .expect("refused at once, not queued behind the setup")
        .unwrap_err();
    assert_eq!(refused.code(), "wrong_state");
    assert_eq!(
        refused.to_string(),
        "workspace `c` is creating; cannot resize; its setup is still running: wait for `ready` (`ws info` shows it)"
    );
    assert!(
        svc.resize_requests("c").unwrap().is_empty(),
        "nothing recorded"
    );
}

#[tokio::test]
async fn resize_and_restart_wait_for_a_kill_in_progress_and_are_checked_again_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (svc, rt) = service(dir.path());
    svc.create(req("k", &[])).await.unwrap();
    let hold = rt.stop_gate.write().await;
    let order = Mutex::new(Vec::new());
    // The kill has the op lock once it stops processes.
    let kill_started = || async {
        while rt.stops.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    };
    let kill = async {
        let k = svc.kill("k", "kill", no_progress()).await;
        order.lock().unwrap().push("killed");
        k
    };
    let resize = async {
        kill_started().await;
        let r = svc.resize("k", disk("96MiB")).await;
        order.lock().unwrap().push("resized");
        r
    };
    let restart = async {
        kill_started().await;
        let r = svc.restart("k").await;
        order.lock().unwrap().push("restart refused");
        r
    };
    let release = async {
        kill_started().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        order.lock().unwrap().push("released");
        drop(hold);
    };
    let (killed, resized, restarted, ()) = tokio::join!(kill, resize, restart, release);
    assert_eq!(killed.unwrap().workspace.status, Status::Stopped);
    let order = order.into_inner().unwrap();
    assert_eq!(order[..2], ["released", "killed"], "{order:?}");
    // Both passed the first check (the workspace was running) and waited for the lock.
    let resized = resized.unwrap();
    assert_eq!(resized.workspace_id, "k");
    let refused = restarted.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "workspace `k` is stopped; cannot restart; `connect` it instead",
        "checked again under the lock"
    );
    assert_eq!(svc.info("k").unwrap().status, Status::Stopped);
    assert_eq!(svc.resize_requests("k").unwrap().len(), 1);
}
