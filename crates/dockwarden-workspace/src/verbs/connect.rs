//! `connect`: start a workspace again, restoring its worktree from the latest snapshot if
//! the worktree is gone or invalid, and bringing its runtime (daemon, proxy) back up.

use tracing::info;

use crate::error::WsResult;
use crate::model::Connected;
use crate::service::{ProgressSink, Service};
use crate::status::{Status, Verb};
use crate::store;

impl Service {
    /// Makes a workspace live; reports what a restore could not bring back.
    pub async fn connect(&self, id: &str, progress: ProgressSink) -> WsResult<Connected> {
        let (op, mut ws) = self.exclusive(id, Verb::Connect).await?;
        // On a full disk too: resuming is how a caller gets to free space.
        let seq = self.store.begin_reserved(id, "connect")?;
        let mut notes = Vec::new();
        let spec = self.run_spec(&ws, &std::collections::BTreeMap::new())?;
        if !self.runtime.is_up(&spec) {
            // Same data root, so images and named volumes are back; containers are not.
            if let Err(e) = self.runtime.up(&spec).await {
                self.store.end(seq)?;
                return Err(e);
            }
            if ws.runtime.runtime == crate::runtime::RuntimeKind::DockerCompose {
                notes.push(crate::provision::RESTART_NOTE.to_string());
            }
        }
        let recovery = if self.worktree_valid(&ws) {
            None
        } else {
            match self
                .restore_locked(&ws, "worktree missing or invalid at connect", progress)
                .await
            {
                Ok(r) => Some(r),
                Err(e) => {
                    self.store.end(seq)?;
                    return Err(e);
                }
            }
        };
        let starting = ws.status == Status::Stopped || recovery.is_some();
        if ws.status == Status::Stopped {
            ws.status = Status::Running;
            ws.live_since_ms = Some(crate::model::now_ms());
        }
        if recovery.is_some() {
            ws.last_recovery = recovery.clone();
        }
        self.store.tx_reserved(|tx| {
            store::put_ws(tx, &ws)?;
            store::end_in(tx, seq)
        })?;
        op.live().touch();
        if starting {
            self.start_run_script(&ws);
        }
        info!(workspace.id = %id, restored = recovery.is_some(), "workspace connected");
        Ok(Connected {
            workspace: ws,
            recovery,
            notes,
        })
    }
}
