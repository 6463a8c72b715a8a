//! The settings file's `run` script: started in the background when a workspace becomes
//! live, output appended to `$HOME/run.log`, stopped by `kill` like every other process.
//! It does not count as activity, so a dev server does not keep a workspace from idling.

use std::collections::BTreeMap;

use tracing::{info, warn};

use crate::model::Workspace;
use crate::service::Service;

impl Service {
    /// Starts the run script of `ws`, if its settings declare one.
    pub(crate) fn start_run_script(&self, ws: &Workspace) {
        let script = match self.read_settings_of(ws) {
            Ok(s) => s.scripts.run,
            Err(e) => {
                warn!(workspace.id = %ws.id, error = %e, "settings unreadable; run script not started");
                None
            }
        };
        let Some(script) = script else { return };
        let spec = match self.run_spec(ws, &BTreeMap::new()) {
            Ok(s) => s,
            Err(e) => {
                warn!(workspace.id = %ws.id, error = %e, "run script not started");
                return;
            }
        };
        let runtime = self.runtime.clone();
        let command = format!("exec >>\"$HOME/run.log\" 2>&1\n{}", script.to_shell());
        info!(workspace.id = %ws.id, "starting run script");
        let live = self.live(&ws.id);
        let generation = live.run_script.lock().map_or(0, |mut st| {
            st.started = Some((std::time::Instant::now(), st.generation));
            st.generation
        });
        tokio::spawn(async move {
            match runtime.exec(&spec, &command, None, None).await {
                Ok(r) => {
                    info!(workspace.id = %spec.workspace_id, run.exit_code = r.exit_code, "run script ended");
                    crate::heal_run_script::ended(&live, generation, r.exit_code);
                }
                Err(e) => {
                    warn!(workspace.id = %spec.workspace_id, error = %e, "run script failed to start")
                }
            }
        });
    }
}
