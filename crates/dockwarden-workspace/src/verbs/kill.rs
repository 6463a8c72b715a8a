//! `kill`: run the archive script, stop every process, snapshot, stop the runtime's
//! containers, daemon, proxy and namespace (its data stays), and mark stopped.

use std::collections::BTreeMap;
use std::time::Duration;

use tracing::{info, warn};

use crate::error::WsResult;
use crate::events::StopRecord;
use crate::model::{Killed, now_ms};
use crate::service::{ProgressSink, Service};
use crate::status::{Status, Verb};
use crate::store;

const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(60);

impl Service {
    /// Stops a workspace and keeps its snapshots; a stopped workspace is left as is.
    pub async fn kill(&self, id: &str, reason: &str, progress: ProgressSink) -> WsResult<Killed> {
        let (_op, mut ws) = self.exclusive(id, Verb::Kill).await?;
        if ws.status == Status::Stopped {
            return Ok(Killed {
                workspace: ws,
                snapshot: None,
                snapshot_id: None,
                snapshot_error: None,
            });
        }
        // A stop goes ahead on a full disk: the journal row uses the space reserve.
        let seq = self.store.begin_reserved(id, "kill")?;
        self.run_archive_script(&ws).await;
        let (_stopped_gate, stopped) = self.stop_all(&ws).await?;
        // Processes are gone, so the capture sees a quiescent tree. A damaged worktree is
        // not captured: it would become the latest snapshot and hide the last good one.
        let (snapshot, snapshot_error) = if self.worktree_valid(&ws) {
            match self.capture_locked(id, reason, progress).await {
                Ok(s) => (Some(s), None),
                // INVARIANT: a failed capture never keeps the workspace running.
                Err(e) => {
                    warn!(workspace.id = %id, error = %e, "snapshot at stop failed; stopping without it");
                    (None, Some(format!("could not snapshot: {e}")))
                }
            }
        } else {
            warn!(workspace.id = %id, "worktree invalid at kill; keeping the last good snapshot");
            let msg = "could not snapshot: the worktree is missing or invalid; the last good snapshot is kept";
            (None, Some(msg.to_string()))
        };
        // Containers, then the daemon and the proxy, then the namespace; the data stays.
        let down = self
            .runtime
            .down(&self.run_spec(&ws, &BTreeMap::new())?)
            .await;
        if let Err(e) = &down {
            warn!(workspace.id = %id, error = %e, "stopping the runtime failed");
        }
        ws = self.store.require(id)?;
        ws.status = Status::Stopped;
        ws.live_since_ms = None;
        let snapshot_id = snapshot.as_ref().map(|s| s.id.clone());
        ws.last_stop = Some(StopRecord {
            at_ms: now_ms(),
            reason: reason.to_string(),
            snapshot_id: snapshot_id.clone(),
            snapshot_error: snapshot_error.clone(),
        });
        self.store.tx_reserved(|tx| {
            store::put_ws(tx, &ws)?;
            store::end_in(tx, seq)
        })?;
        info!(workspace.id = %id, kill.reason = reason, kill.processes = stopped, "workspace stopped");
        Ok(Killed {
            workspace: ws,
            snapshot,
            snapshot_id,
            snapshot_error,
        })
    }

    async fn run_archive_script(&self, ws: &crate::model::Workspace) {
        let script = match self.read_settings_of(ws) {
            Ok(s) => s.scripts.archive,
            Err(e) => {
                warn!(workspace.id = %ws.id, error = %e, "settings unreadable; archive script skipped");
                None
            }
        };
        let Some(script) = script else { return };
        let Ok(spec) = self.run_spec(ws, &BTreeMap::new()) else {
            return;
        };
        match self
            .runtime
            .exec(&spec, &script.to_shell(), Some(ARCHIVE_TIMEOUT), None)
            .await
        {
            Ok(r) => {
                info!(workspace.id = %ws.id, archive.exit_code = r.exit_code, "archive script finished")
            }
            Err(e) => warn!(workspace.id = %ws.id, error = %e, "archive script failed"),
        }
    }
}
