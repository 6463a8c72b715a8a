//! `delete`: remove a workspace, its processes, its snapshots, and blobs no one else uses.

use std::collections::BTreeMap;

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::service::Service;
use crate::status::{Status, Verb};

impl Service {
    /// Deletes one workspace with all of its snapshots.
    pub async fn delete(&self, id: &str) -> WsResult<()> {
        let ws = self.checked(id, Verb::Delete)?;
        // Not checked again under the lock: a delete waits for whatever holds it, and a
        // create this delete cancelled has removed the workspace already (below).
        let live = self.live(id);
        let _op = if ws.status == Status::Creating {
            self.cancel_create(&ws, &live).await
        } else {
            live.op.lock().await
        };
        if self.store.get(id)?.is_none() {
            // A create cancelled by this delete removed it already.
            return Ok(());
        }
        self.store.begin(id, "delete")?;
        self.finish_delete(id).await
    }

    /// Cancels the setup of a workspace being created instead of waiting for it: the create
    /// sees the flag, fails and removes what it made. Returns with the op lock held.
    async fn cancel_create<'a>(
        &self,
        ws: &crate::model::Workspace,
        live: &'a crate::service::WsLive,
    ) -> tokio::sync::MutexGuard<'a, ()> {
        live.cancelled
            .store(true, std::sync::atomic::Ordering::SeqCst);
        info!(workspace.id = %ws.id, "delete during create: cancelling the setup");
        loop {
            if let Ok(spec) = self.run_spec(ws, &BTreeMap::new()) {
                let _ = self.runtime.stop(&spec).await;
            }
            // Stopped again until the create lets go: a setup may start after a stop.
            let wait = std::time::Duration::from_millis(100);
            if let Ok(guard) = tokio::time::timeout(wait, live.op.lock()).await {
                return guard;
            }
        }
    }

    /// Deletes every workspace whose metadata includes `filter`; returns their ids.
    pub async fn delete_matching(
        &self,
        filter: &BTreeMap<String, String>,
    ) -> WsResult<Vec<String>> {
        if filter.is_empty() {
            return Err(WsError::Invalid(
                "an empty metadata filter would delete every workspace; name at least one pair"
                    .into(),
            ));
        }
        let mut deleted = Vec::new();
        for entry in self.list(filter)? {
            match self.delete(&entry.id).await {
                Ok(()) | Err(WsError::NotFound(_)) => deleted.push(entry.id),
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// The act-and-persist half of delete; also rolls an interrupted delete forward.
    pub(crate) async fn finish_delete(&self, id: &str) -> WsResult<()> {
        let (_stopped_gate, uid) = match self.store.get(id)? {
            Some(ws) => {
                let gate = self.stop_all(&ws).await?.0;
                // Containers, data root, pins, cgroups, namespace and sockets.
                self.runtime
                    .destroy(&self.run_spec(&ws, &BTreeMap::new())?)
                    .await?;
                self.remove_resources(&ws);
                (Some(gate), Some(ws.uid))
            }
            None => (None, None),
        };
        let dir = self.ws_dir(id);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| WsError::io(&dir, e))?;
        }
        // INVARIANT: a uid is free again only once nothing of this workspace's is left under
        // it (files outside its directory, IPC objects); otherwise it stays quarantined.
        self.remove_record(id, uid).await?;
        self.forget(id);
        info!(workspace.id = %id, "workspace deleted");
        if let Err(e) = self.collect_garbage().await {
            warn!(error = %e, "snapshot garbage collection failed");
        }
        Ok(())
    }

    /// Drops manifests and blobs that no recorded snapshot references.
    pub async fn collect_garbage(&self) -> WsResult<u64> {
        let _gate = self.gc_gate.write().await;
        let keep = self.store.all_snapshot_ids()?;
        let (snaps, state) = (self.snapshots.clone(), self.cfg.state_dir.clone());
        tokio::task::spawn_blocking(move || -> WsResult<u64> {
            let removed = snaps.collect_garbage(&keep)?;
            // The snapshots' whole-image clones go with their snapshots.
            let keep: std::collections::HashSet<String> = keep.into_iter().collect();
            crate::resources::disk_clone::sweep(&state, &keep);
            Ok(removed)
        })
        .await
        .map_err(|e| WsError::Internal(format!("gc task: {e}")))?
    }
}
