//! `restart`: interrupt every process and container, restart the runtime (daemon and proxy
//! on the same data root), keep files and volumes. Always disruptive, and says what stopped.

use std::collections::BTreeMap;

use tracing::info;

use crate::error::WsResult;
use crate::model::Restarted;
use crate::provision::RESTART_NOTE;
use crate::runtime::RuntimeKind;
use crate::service::Service;
use crate::status::{Status, Verb};
use crate::store;

impl Service {
    /// Restarts a live workspace's processes and runtime.
    pub async fn restart(&self, id: &str) -> WsResult<Restarted> {
        let (op, mut ws) = self.exclusive(id, Verb::Restart).await?;
        let spec = self.run_spec(&ws, &BTreeMap::new())?;
        let mut stopped = Vec::new();
        let processes = {
            let (_gate, n) = self.stop_all(&ws).await?;
            if n > 0 {
                stopped.push(format!("{n} process(es) or process group(s)"));
            }
            stopped.extend(self.runtime.down(&spec).await?);
            self.runtime.up(&spec).await?;
            n
        };
        let mut notes = vec!["files in the worktree and the home directory are kept".to_string()];
        if ws.runtime.runtime == RuntimeKind::DockerCompose {
            notes.push(RESTART_NOTE.to_string());
        }
        ws.status = Status::Running;
        self.store.tx(|tx| store::put_ws(tx, &ws))?;
        op.live().touch();
        self.start_run_script(&ws);
        info!(workspace.id = %id, restart.stopped = ?stopped, "workspace restarted");
        Ok(Restarted {
            workspace: ws,
            disruptive: true,
            stopped,
            processes,
            notes,
        })
    }
}
