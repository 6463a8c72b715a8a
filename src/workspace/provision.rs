//! Choosing and provisioning a workspace's runtime: the selection (explicit setting, then
//! the repository's evidence at the revision being provisioned), persisting it before the
//! runtime starts (so recovery knows what to clean), and bringing the runtime up.

use std::collections::BTreeMap;

use tracing::{info, warn};

use crate::workspace::error::WsResult;
use crate::workspace::model::Workspace;
use crate::workspace::runtime::docker::Layout;
use crate::workspace::runtime::{RuntimeKind, Selection, select_stub};
use crate::workspace::service::Service;
use crate::workspace::settings::Settings;
use crate::workspace::store;

/// What a docker-compose `connect` or `restart` cannot bring back by itself.
pub const RESTART_NOTE: &str = "the Docker daemon was restarted on the same data (images, named volumes): containers and previews are stopped and need starting again (for example `docker compose up -d`)";

impl Service {
    /// The runtime for `ws`: the caller's `runtime`, else the settings file's, else the
    /// repository's evidence at the checked-out revision, else `standard`.
    pub(crate) fn select_runtime(
        &self,
        _ws: &Workspace,
        explicit: Option<RuntimeKind>,
        settings: &Settings,
    ) -> WsResult<Selection> {
        // PLACEHOLDER until the evidence selector lands: explicit settings only.
        Ok(select_stub::select_explicit(explicit.or(settings.runtime)))
    }

    /// Persists the selection (and `DOCKER_HOST`), then brings the runtime up: the daemon and
    /// proxy answer `/_ping` before this returns, so setup can use them.
    pub(crate) async fn provision_runtime(&self, ws: &mut Workspace) -> WsResult<()> {
        ws.docker_host = (ws.runtime.runtime == RuntimeKind::DockerCompose)
            .then(|| Layout::new(&self.ws_dir(&ws.id), ws.uid).docker_host());
        self.store.tx(|tx| store::put_ws(tx, ws))?;
        info!(workspace.id = %ws.id, runtime = ?ws.runtime.runtime, source = ?ws.runtime.source, "runtime selected");
        let spec = self.run_spec(ws, &BTreeMap::new())?;
        self.runtime.up(&spec).await
    }

    /// Stops the processes and removes the runtime of workspace `id` (if it is recorded).
    pub(crate) async fn tear_down_runtime(&self, id: &str) {
        let Ok(Some(ws)) = self.store.get(id) else {
            return;
        };
        let Ok(spec) = self.run_spec(&ws, &BTreeMap::new()) else {
            return;
        };
        let _ = self.runtime.stop(&spec).await;
        if let Err(e) = self.runtime.destroy(&spec).await {
            warn!(workspace.id = %id, error = %e, "removing the runtime failed");
        }
    }
}
