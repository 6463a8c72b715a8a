//! `create`: a new workspace from a git repository, from a snapshot (a fork), or empty.

use std::collections::BTreeMap;
use std::time::Duration;

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::files::Files;
use crate::model::{CreateRequest, Created, SetupOutcome, Workspace, now_ms, random_hex, valid_id};
use crate::runtime::{RuntimeKind, Selection};
use crate::service::{ProgressSink, Service, no_progress};
use crate::settings::{SETTINGS_PATH, Settings};
use crate::status::Status;
use crate::{store, worktree};

pub(crate) const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(1800);

fn valid_env_name(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn validate(req: &CreateRequest) -> WsResult<()> {
    if let Some(id) = &req.id
        && !valid_id(id)
    {
        return Err(WsError::Invalid(format!(
            "id `{id}` must be 1-64 of [A-Za-z0-9._-], not starting with `.` or `-`"
        )));
    }
    if req.repo.is_some() && req.from.is_some() {
        return Err(WsError::Invalid(
            "give either a repository or `from`, not both".into(),
        ));
    }
    if req.revision.is_some() && req.repo.is_none() {
        return Err(WsError::Invalid("a revision needs a repository".into()));
    }
    if let Some(k) = req
        .env
        .keys()
        .chain(req.secrets.keys())
        .find(|k| !valid_env_name(k))
    {
        return Err(WsError::Invalid(format!(
            "`{k}` is not a valid environment variable name"
        )));
    }
    Ok(())
}

impl Service {
    /// Creates a workspace, or returns the existing one with the same id.
    pub async fn create(&self, req: CreateRequest) -> WsResult<Created> {
        self.create_with_progress(req, no_progress()).await
    }

    /// `create`, reporting the progress of a fork's restore.
    pub async fn create_with_progress(
        &self,
        req: CreateRequest,
        progress: ProgressSink,
    ) -> WsResult<Created> {
        validate(&req)?;
        // Refused before anything exists: a value over its ceiling, or a malformed one.
        self.resources.initial(req.resources.as_ref())?;
        let gate = self.create_gate.lock().await;
        if let Some(id) = &req.id
            && self.store.get(id)?.is_some()
        {
            drop(gate);
            // Wait for a create still in progress, then answer with what it made.
            let live = self.live(id);
            let _op = live.op.lock().await;
            let workspace = self.store.require(id)?;
            return Ok(Created {
                notes: super::idempotent::not_applied(&req, &workspace),
                workspace,
                created: false,
            });
        }
        let ws = self.new_record(&req)?;
        let live = self.live(&ws.id);
        let op = live.op.lock().await;
        let sealed = self.store.seal_secrets(&ws.id, &req.secrets)?;
        let seq = self.store.tx(|tx| {
            store::insert_ws(tx, &ws, &sealed)?;
            store::begin_in(tx, &ws.id, "create")
        })?;
        drop(gate);
        info!(workspace.id = %ws.id, workspace.uid = ws.uid, "creating workspace");
        let result = self.build(ws, &req, seq, progress).await;
        drop(op);
        match result {
            Ok((workspace, notes)) => {
                let created = Created {
                    workspace,
                    created: true,
                    notes,
                };
                Ok(self.auto_reprovision_after_setup(created).await)
            }
            Err((id, e)) => {
                // A delete that cancelled the create may make any later step fail (the clone
                // under way loses its directory): the answer is the delete, not that step.
                let e = self.cancelled_error(&id).unwrap_or(e);
                warn!(workspace.id = %id, error = %e, "create failed; removing");
                self.tear_down_runtime(&id).await;
                let uid = match self.store.get(&id) {
                    Ok(Some(w)) => {
                        self.remove_resources(&w);
                        Some(w.uid)
                    }
                    _ => None,
                };
                let _ = std::fs::remove_dir_all(self.ws_dir(&id));
                // The setup ran as the uid: what it left outside the workspace is swept too.
                self.remove_record(&id, uid).await?;
                self.forget(&id);
                Err(e)
            }
        }
    }

    fn new_record(&self, req: &CreateRequest) -> WsResult<Workspace> {
        let mut metadata = BTreeMap::new();
        if let (true, Some(from)) = (req.inherit_parent_metadata, &req.from) {
            let (snap, _) = self
                .store
                .snapshot(from)?
                .ok_or_else(|| WsError::SnapshotNotFound(from.clone()))?;
            if let Some(parent) = self.store.get(&snap.workspace_id)? {
                metadata = parent.metadata;
            }
        }
        metadata.extend(req.metadata.clone());
        Ok(Workspace {
            id: req
                .id
                .clone()
                .unwrap_or_else(|| format!("ws-{}", random_hex(6))),
            status: Status::Creating,
            uid: self.allocate_uid()?,
            created_at_ms: now_ms(),
            metadata,
            env: req.env.clone(),
            secret_names: req.secrets.keys().cloned().collect(),
            repo: req.repo.clone(),
            revision: req.revision.clone(),
            from_snapshot: req.from.clone(),
            idle_timeout_secs: req
                .idle_timeout_secs
                .unwrap_or(self.cfg.default_idle_timeout.as_secs()),
            latest_snapshot: None,
            setup: None,
            last_recovery: None,
            runtime: crate::provision::standard_selection(),
            docker_host: None,
            last_stop: None,
            interrupted: None,
            max_runtime_secs: req
                .max_runtime_secs
                .or(self.cfg.default_max_runtime.map(|d| d.as_secs())),
            live_since_ms: None,
            archive_after_secs: req
                .archive_after_secs
                .unwrap_or(self.cfg.default_archive_after.as_secs()),
            suspended_at_ms: None,
        })
    }

    /// Act and persist; on error, hands back the id so the caller can clean up.
    async fn build(
        &self,
        mut ws: Workspace,
        req: &CreateRequest,
        seq: i64,
        progress: ProgressSink,
    ) -> Result<(Workspace, Vec<String>), (String, WsError)> {
        let id = ws.id.clone();
        let fail = |e| (id.clone(), e);
        let adopted = self.materialise(&ws, req, progress).await.map_err(fail)?;
        // Every process of the workspace, setup included, starts inside its limits.
        self.prepare_resources(&ws, req.resources.as_ref())
            .map_err(fail)?;
        let settings = self.read_settings_of(&ws).map_err(fail)?;
        if let (None, Some(t)) = (req.idle_timeout_secs, settings.idle_timeout_secs) {
            ws.idle_timeout_secs = t;
        }
        if let (None, Some(t)) = (req.max_runtime_secs, settings.max_runtime_secs) {
            ws.max_runtime_secs = Some(t);
        }
        if let (None, Some(t)) = (req.archive_after_secs, settings.archive_after_secs) {
            ws.archive_after_secs = t;
        }
        let mut notes = Vec::new();
        // A fork keeps its parent's runtime unless the caller names one.
        let inherited = match (&req.from, req.runtime) {
            (Some(from), None) => self.parent_selection(from).map_err(fail)?,
            _ => None,
        };
        ws.runtime = match inherited {
            Some(sel) => sel,
            None => self
                .select_runtime(&ws, req.runtime, None)
                .await
                .map_err(fail)?,
        };
        self.provision_runtime(&mut ws).await.map_err(fail)?;
        if req.from.is_some() && ws.runtime.runtime == RuntimeKind::DockerCompose {
            notes.push(
                "the fork has a fresh Docker daemon (empty but for the service's preload images): images, containers and volumes of the parent were not carried over"
                    .into(),
            );
        }
        if req.from.is_none() {
            let timeout = req
                .setup_timeout_ms
                .map(Duration::from_millis)
                .or(settings.setup_timeout_secs.map(Duration::from_secs))
                .unwrap_or(DEFAULT_SETUP_TIMEOUT);
            self.refuse_if_cancelled(&ws).map_err(fail)?;
            ws.setup = Some(
                self.run_setup(&ws, &settings, timeout)
                    .await
                    .map_err(fail)?,
            );
        }
        self.refuse_if_cancelled(&ws).map_err(fail)?;
        ws.status = Status::Ready;
        ws.live_since_ms = Some(now_ms());
        // A setup that filled the disk is reported, not fatal: the reserve closes the journal.
        self.store
            .tx_reserved(|tx| {
                store::put_ws(tx, &ws)?;
                store::end_in(tx, seq)
            })
            .map_err(fail)?;
        self.live(&ws.id).touch();
        // The baseline: taken once setup has settled (a fork from an image clone records
        // its parent's manifest again); failures are logged, not fatal.
        let baseline = match adopted {
            Some(a) => self.baseline_of_adopted(&ws.id, a).await,
            None => self.capture_locked(&ws.id, "baseline", no_progress()).await,
        };
        match baseline {
            Ok(snap) => ws.latest_snapshot = Some(snap.id),
            Err(e) => warn!(workspace.id = %ws.id, error = %e, "baseline snapshot failed"),
        }
        self.start_run_script(&ws);
        Ok((ws, notes))
    }

    /// The answer of a create that a delete cancelled, if one did.
    fn cancelled_error(&self, id: &str) -> Option<WsError> {
        let cancelled = self
            .live(id)
            .cancelled
            .load(std::sync::atomic::Ordering::SeqCst);
        cancelled.then(|| WsError::WrongState {
            id: id.to_string(),
            status: Status::Deleted,
            verb: "finish creating",
            hint: "; it was deleted while its setup ran",
        })
    }

    fn refuse_if_cancelled(&self, ws: &Workspace) -> WsResult<()> {
        if let Some(e) = self.cancelled_error(&ws.id) {
            return Err(e);
        }
        Ok(())
    }

    /// The selection of the workspace that took snapshot `from`, if it still exists.
    fn parent_selection(&self, from: &str) -> WsResult<Option<Selection>> {
        let Some((snap, _)) = self.store.snapshot(from)? else {
            return Ok(None);
        };
        Ok(self.store.get(&snap.workspace_id)?.map(|p| p.runtime))
    }

    /// Makes the worktree; a fork from a snapshot with an image clone clones it (and hands
    /// back what its baseline needs), any other fork restores.
    async fn materialise(
        &self,
        ws: &Workspace,
        req: &CreateRequest,
        progress: ProgressSink,
    ) -> WsResult<Option<super::image_clone::Adopted>> {
        let owner = self.owner(ws);
        worktree::prepare_dirs(&self.ws_dir(&ws.id), &self.home(&ws.id), owner)?;
        let wt = self.worktree(&ws.id);
        if let Some(repo) = &req.repo {
            worktree::clone(repo, req.revision.as_deref(), &wt).await?;
            worktree::chown_tree(&wt, owner)?;
        } else if let Some(from) = &req.from {
            let (_, sha) = self
                .store
                .snapshot(from)?
                .ok_or_else(|| WsError::SnapshotNotFound(from.clone()))?;
            if let Some(adopted) = self.fork_from_image(ws, from, &sha).await? {
                return Ok(Some(adopted));
            }
            let snaps = self.snapshots.clone();
            let (from, wt2) = (from.clone(), wt.clone());
            tokio::task::spawn_blocking(move || {
                let m = snaps.load(&from, &sha)?;
                snaps.restore(&m, &wt2, owner, &*progress)
            })
            .await
            .map_err(|e| WsError::Internal(format!("restore task: {e}")))??;
        } else {
            std::fs::create_dir(&wt).map_err(|e| WsError::io(&wt, e))?;
            worktree::chown_tree(&wt, owner)?;
        }
        Ok(None)
    }

    pub(crate) fn read_settings_of(&self, ws: &Workspace) -> WsResult<Settings> {
        let files = Files::open(&self.worktree(&ws.id), None)?;
        match files.read(SETTINGS_PATH) {
            Ok(data) => Settings::parse(&data),
            Err(WsError::NoSuchPath(_)) => Ok(Settings::default()),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn run_setup(
        &self,
        ws: &Workspace,
        settings: &Settings,
        timeout: Duration,
    ) -> WsResult<SetupOutcome> {
        let Some(script) = &settings.scripts.setup else {
            return Ok(SetupOutcome {
                ran: false,
                exit_code: 0,
                stdout: String::new(),
                stderr: String::new(),
                timed_out: false,
                disk: None,
                notes: Vec::new(),
            });
        };
        let spec = self.run_spec(ws, &BTreeMap::new())?;
        let mut r = self
            .runtime
            .exec(&spec, &script.to_shell(), Some(timeout), None)
            .await?;
        info!(workspace.id = %ws.id, setup.exit_code = r.exit_code, "setup script finished");
        // A full disk grows it, and setup (safe to repeat) runs once more.
        let mut disk = (r.exit_code != 0).then(|| self.grow_if_full(ws)).flatten();
        if let Some(ev) = disk.as_mut().filter(|ev| ev.grew) {
            ev.retried = true;
            r = self
                .runtime
                .exec(&spec, &script.to_shell(), Some(timeout), None)
                .await?;
            info!(workspace.id = %ws.id, setup.exit_code = r.exit_code, "setup retried after the disk grew");
            if r.exit_code != 0
                && let Some(again) = self.grow_if_full(ws)
            {
                ev.note = format!(
                    "{}; setup was retried once and failed again: {}",
                    ev.note, again.note
                );
            }
        }
        let notes = (r.exit_code != 0)
            .then(|| crate::hints::docker_socket(&ws.id, ws.runtime.runtime, &r.stderr))
            .flatten()
            .into_iter()
            .collect();
        Ok(SetupOutcome {
            notes,
            ran: true,
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr: r.stderr,
            timed_out: r.timed_out,
            disk,
        })
    }

    /// `auto_reprovision` (settings): a setup that failed for want of a Docker daemon in a
    /// standard workspace is run again on `docker-compose`, once, and the answer says so.
    async fn auto_reprovision_after_setup(&self, mut c: Created) -> Created {
        let needs_docker = c
            .workspace
            .setup
            .as_ref()
            .is_some_and(|s| !s.notes.is_empty());
        let wanted = needs_docker
            && self
                .read_settings_of(&c.workspace)
                .is_ok_and(|s| s.auto_reprovision);
        if !wanted {
            return c;
        }
        let id = c.workspace.id.clone();
        match self.reprovision_to_docker(&id).await {
            Ok(r) => {
                let exit = r.workspace.setup.as_ref().map_or(0, |s| s.exit_code);
                c.notes.push(format!(
                    "setup needed a Docker daemon: the workspace was reprovisioned to `docker-compose` (auto_reprovision) and its setup ran again, exiting {exit}"
                ));
                c.workspace = r.workspace;
            }
            Err(e) => c.notes.push(format!(
                "setup needed a Docker daemon, and reprovisioning to `docker-compose` (auto_reprovision) failed: {e}"
            )),
        }
        c
    }

    /// Reprovisions `id` to the docker-compose runtime (`auto_reprovision`).
    pub(crate) async fn reprovision_to_docker(
        &self,
        id: &str,
    ) -> WsResult<crate::model::Reprovisioned> {
        info!(workspace.id = %id, "auto_reprovision: to docker-compose");
        self.reprovision(
            id,
            crate::model::ReprovisionRequest {
                runtime: Some(RuntimeKind::DockerCompose),
                ..Default::default()
            },
        )
        .await
    }
}
