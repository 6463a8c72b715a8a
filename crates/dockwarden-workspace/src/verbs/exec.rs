//! `exec`: run a shell command in a live workspace, with an optional timeout.

use tokio::sync::mpsc;
use tracing::debug;

use crate::error::{WsError, WsResult};
use crate::events::Resumed;
use crate::model::{ExecRequest, ExecResult};
use crate::runtime::Chunk;
use crate::service::{ExecGuard, Service};
use crate::status::{Status, Verb};
use crate::store;

impl Service {
    /// `exec` that first resumes a stopped workspace and heals an invalid worktree.
    pub async fn exec_resuming(
        &self,
        id: &str,
        req: ExecRequest,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> WsResult<Resumed<ExecResult>> {
        if req.cmd.trim().is_empty() {
            return Err(WsError::Invalid("the command is empty".into()));
        }
        let prepared = self.prepare(id, true).await?;
        let mut result = self.exec(id, req, sink).await?;
        if !result.notes.is_empty() {
            self.auto_reprovision_after_exec(id, &mut result).await;
        }
        Ok(Resumed {
            result,
            resumed: prepared.resumed,
            recovery: prepared.recovery,
        })
    }

    /// Runs a command. A non-zero exit is a result; a timeout gives exit code 124.
    pub async fn exec(
        &self,
        id: &str,
        req: ExecRequest,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> WsResult<ExecResult> {
        if req.cmd.trim().is_empty() {
            return Err(WsError::Invalid("the command is empty".into()));
        }
        // Checked again under the gate: a kill may have finished while this call waited.
        let (running, mut ws) = self.gated(id, Verb::Exec).await?;
        // INVARIANT: counted as activity from before the first byte runs until it ends.
        let _activity = ExecGuard::new(running.live().clone());
        if ws.status == Status::Ready {
            ws.status = Status::Running;
            match self.store.tx(|tx| store::put_ws(tx, &ws)) {
                // On a full disk the command that frees space must still run.
                Err(e) if e.is_no_space() => {
                    tracing::warn!(workspace.id = %id, error = %e, "status `running` not recorded: disk full");
                }
                other => other?,
            }
        }
        let spec = self.run_spec(&ws, &req.env)?;
        let timeout = req.timeout_ms.map(std::time::Duration::from_millis);
        debug!(workspace.id = %id, exec.timeout_ms = ?req.timeout_ms, "exec");
        let mut r = self.runtime.exec(&spec, &req.cmd, timeout, sink).await?;
        // A full disk grows it; the command is never replayed (the result says so).
        if r.exit_code != 0
            && let Some(mut ev) = self.grow_if_full(&ws)
        {
            ev.note = format!("{}; the command was not replayed, run it again", ev.note);
            r.disk = Some(ev);
        }
        if r.exit_code != 0 {
            r.notes.extend(crate::hints::docker_socket(
                id,
                ws.runtime.runtime,
                &r.stderr,
            ));
        }
        Ok(r)
    }

    /// `auto_reprovision` (settings): a command that failed for want of a Docker daemon in a
    /// standard workspace reprovisions it to `docker-compose`, once. The command is not run
    /// again (it may not be safe to repeat); the note says to run it again.
    async fn auto_reprovision_after_exec(&self, id: &str, r: &mut ExecResult) {
        let Ok(ws) = self.store.require(id) else {
            return;
        };
        if !self.read_settings_of(&ws).is_ok_and(|s| s.auto_reprovision) {
            return;
        }
        r.notes = vec![match self.reprovision_to_docker(id).await {
            Ok(_) => "the command needed a Docker daemon: the workspace was reprovisioned to `docker-compose` (auto_reprovision), its files kept; run the command again".to_string(),
            Err(e) => format!(
                "the command needed a Docker daemon, and reprovisioning to `docker-compose` (auto_reprovision) failed: {e}"
            ),
        }];
    }
}
