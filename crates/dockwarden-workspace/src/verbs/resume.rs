//! Making a workspace usable before a call: a live workspace whose worktree went bad is
//! restored from its latest snapshot, and a stopped one is resumed (connected, with the same
//! restore rules as `connect`) for an exec, a file write or a snapshot.

use tracing::{info, warn};

use crate::error::WsResult;
use crate::model::{RecoveryReport, Workspace};
use crate::service::{Service, no_progress};
use crate::status::Status;
use crate::store;

/// What `prepare` did before the call went ahead.
#[derive(Debug, Default)]
pub struct Prepared {
    pub resumed: bool,
    pub recovery: Option<RecoveryReport>,
}

impl Service {
    /// Resumes a stopped workspace (if `resume`) and heals an invalid worktree of a live one.
    pub(crate) async fn prepare(&self, id: &str, resume: bool) -> WsResult<Prepared> {
        // Thawed before anything probes its runtime: a frozen daemon answers no ping.
        self.thaw_if_suspended(id).await?;
        let ws = self.store.require(id)?;
        if resume && ws.status == Status::Stopped {
            let connected = self.connect(id, no_progress()).await?;
            info!(workspace.id = %id, "stopped workspace resumed for a call");
            return Ok(Prepared {
                resumed: true,
                recovery: connected.recovery,
            });
        }
        let recovery = self
            .heal_if_invalid(&ws, "worktree missing or invalid at a call")
            .await?;
        // A runtime part that died is restarted before the call runs (or its restart, under
        // way in upkeep, waited for).
        let restarted = self.heal_runtime_for_call(&ws).await?;
        Ok(Prepared {
            resumed: false,
            recovery: recovery.or(restarted),
        })
    }

    /// Restores the worktree of a live workspace that went bad (deleted, replaced, its
    /// `.git` gone). Returns the report if it did.
    pub(crate) async fn heal_if_invalid(
        &self,
        ws: &Workspace,
        reason: &str,
    ) -> WsResult<Option<RecoveryReport>> {
        if !ws.status.is_live() || self.worktree_valid(ws) {
            return Ok(None);
        }
        let live = self.live(&ws.id);
        let _op = live.op.lock().await;
        self.heal_locked(&ws.id, reason).await
    }

    /// `heal_if_invalid` for a caller holding the op lock.
    pub(crate) async fn heal_locked(
        &self,
        id: &str,
        reason: &str,
    ) -> WsResult<Option<RecoveryReport>> {
        let ws = self.store.require(id)?;
        if !ws.status.is_live() || self.worktree_valid(&ws) {
            return Ok(None);
        }
        warn!(workspace.id = %id, "worktree invalid; restoring it from the latest snapshot");
        let report = self.restore_locked(&ws, reason, no_progress()).await?;
        let mut ws = self.store.require(id)?;
        ws.last_recovery = Some(report.clone());
        self.store.tx(|tx| store::put_ws(tx, &ws))?;
        // The restore stopped every process; the dev server comes back with the tree.
        self.start_run_script(&ws);
        Ok(Some(report))
    }
}
