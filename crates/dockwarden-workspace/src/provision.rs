//! Choosing and provisioning a workspace's runtime: the selection (explicit setting, then
//! the repository's evidence at the revision being provisioned), persisting it before the
//! runtime starts (so recovery knows what to clean), and bringing the runtime up.

use std::collections::BTreeMap;

use tracing::{info, warn};

use crate::error::WsError;
use crate::error::WsResult;
use crate::model::Workspace;
use crate::runtime::docker::Layout;
use crate::runtime::select::{self, DirView, GitView, RepoView};
use crate::runtime::{RuntimeKind, Selection};
use crate::service::Service;
use crate::store;

pub use crate::model_runtime::standard_selection;

/// What a docker-compose `connect` or `restart` cannot bring back by itself.
pub const RESTART_NOTE: &str = "the Docker daemon was restarted on the same data (images, named volumes): containers and previews are stopped and need starting again (for example `docker compose up -d`)";

impl Service {
    /// The runtime for `ws`: the caller's `runtime`, else the settings file's, else the
    /// repository's evidence, else `standard` (`runtime::select`, bounded by its `Limits`).
    /// A cloned repository is read at the checked-out commit (`GitView` at `HEAD`, which is
    /// the revision being provisioned; git runs as the workspace uid, `gitsafe`); anything
    /// else as the tree on disk (`DirView`).
    /// `script` is a repository-local file read by the same rules (`reprovision`), never run.
    pub(crate) async fn select_runtime(
        &self,
        ws: &Workspace,
        explicit: Option<RuntimeKind>,
        script: Option<(String, Vec<u8>)>,
    ) -> WsResult<Selection> {
        let wt = self.worktree(&ws.id);
        let git = ws.repo.is_some() && script.is_none() && wt.join(".git").is_dir();
        let owner = self.owner(ws);
        tokio::task::spawn_blocking(move || -> WsResult<Selection> {
            let view: Box<dyn RepoView> = if git {
                Box::new(GitView::open(&wt, "HEAD", owner).map_err(|e| WsError::io(&wt, e))?)
            } else {
                Box::new(DirView::new(&wt))
            };
            let extra = script.as_ref().map(|(p, b)| (p.as_str(), b.as_slice()));
            Ok(select::select_with_script(&*view, explicit, extra))
        })
        .await
        .map_err(|e| WsError::Internal(format!("selection task: {e}")))?
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
