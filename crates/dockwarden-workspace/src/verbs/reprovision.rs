//! `reprovision`: replace the runtime behind the same workspace id. The worktree is kept
//! byte for byte (uncommitted and ignored files included: it is never touched); processes and
//! machine-global state (the old runtime's daemon, containers, images, volumes) do not carry
//! over. Setup runs on the replacement before the call returns, so it completes before the
//! next operation on the workspace.

use std::collections::BTreeMap;
use std::time::Duration;

use tracing::info;

use crate::error::{WsError, WsResult};
use crate::files::Files;
use crate::model::{ReprovisionRequest, Reprovisioned};
use crate::service::Service;
use crate::status::{Status, Verb};
use crate::store;
use crate::verbs::create::DEFAULT_SETUP_TIMEOUT;

/// Largest inspect script read.
const MAX_SCRIPT: u64 = 256 * 1024;

impl Service {
    /// Replaces the runtime of `id` as `req` asks.
    pub async fn reprovision(&self, id: &str, req: ReprovisionRequest) -> WsResult<Reprovisioned> {
        if req.runtime.is_some() == req.inspect_script.is_some() {
            return Err(WsError::Invalid(
                "give exactly one of `runtime` and `inspect_script`".into(),
            ));
        }
        let (op, mut ws) = self.exclusive(id, Verb::Reprovision).await?;
        let settings = self.read_settings_of(&ws)?;
        let selection = match (&req.runtime, &req.inspect_script) {
            (Some(kind), _) => self.select_runtime(&ws, Some(*kind), None).await?,
            (None, Some(path)) => {
                // Read by the evidence rules, never run.
                let files = Files::open(&self.worktree(&ws.id), None)?;
                let text = files.read(path)?;
                if text.len() as u64 > MAX_SCRIPT {
                    return Err(WsError::TooLarge {
                        path: path.clone(),
                        size: text.len() as u64,
                        limit: MAX_SCRIPT,
                    });
                }
                self.select_runtime(&ws, None, Some((path.clone(), text)))
                    .await?
            }
            (None, None) => return Err(WsError::Internal("reprovision without a choice".into())),
        };
        let previous = ws.runtime.clone();
        let seq = self.store.begin(id, "reprovision")?;
        let old_spec = self.run_spec(&ws, &BTreeMap::new())?;
        let mut stopped = Vec::new();
        let (_gate, n) = self.stop_all(&ws).await?;
        if n > 0 {
            stopped.push(format!("{n} process(es) or process group(s)"));
        }
        stopped.extend(self.runtime.down(&old_spec).await?);
        self.runtime.destroy(&old_spec).await?;
        drop(_gate);
        ws.runtime = selection;
        self.provision_runtime(&mut ws).await?;
        let timeout = req
            .setup_timeout_ms
            .map(Duration::from_millis)
            .or(settings.setup_timeout_secs.map(Duration::from_secs))
            .unwrap_or(DEFAULT_SETUP_TIMEOUT);
        ws.setup = Some(self.run_setup(&ws, &settings, timeout).await?);
        ws.status = Status::Running;
        self.store.tx(|tx| {
            store::put_ws(tx, &ws)?;
            store::end_in(tx, seq)
        })?;
        op.live().touch();
        self.start_run_script(&ws);
        info!(workspace.id = %id, from = ?previous.runtime, to = ?ws.runtime.runtime, "workspace reprovisioned");
        Ok(Reprovisioned {
            workspace: ws,
            previous,
            disruptive: true,
            stopped,
            notes: vec![
                "the worktree was kept as it was, including uncommitted and ignored files".into(),
                "machine-global state and processes do not carry over: the previous runtime's processes, daemon, containers, images and volumes are gone; setup ran again on the new runtime".into(),
            ],
        })
    }
}
