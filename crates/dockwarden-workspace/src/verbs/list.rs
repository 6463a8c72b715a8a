//! `list`, `info` and `snapshots`: read-only views of the store.

use std::collections::BTreeMap;

use crate::error::WsResult;
use crate::model::{ListEntry, SnapshotInfo, Workspace};
use crate::service::Service;

impl Service {
    /// Workspaces whose metadata includes every pair of `filter`.
    pub fn list(&self, filter: &BTreeMap<String, String>) -> WsResult<Vec<ListEntry>> {
        Ok(self
            .store
            .list()?
            .into_iter()
            .filter(|w| w.matches(filter))
            .map(|w| ListEntry {
                live: w.status.is_live(),
                id: w.id,
                status: w.status,
                metadata: w.metadata,
                latest_snapshot: w.latest_snapshot,
            })
            .collect())
    }

    pub fn info(&self, id: &str) -> WsResult<Workspace> {
        self.store.require(id)
    }

    /// Snapshots of a workspace, newest first.
    pub fn list_snapshots(&self, id: &str) -> WsResult<Vec<SnapshotInfo>> {
        self.store.require(id)?;
        Ok(self
            .store
            .snapshots_of(id)?
            .into_iter()
            .map(|(i, _)| i)
            .collect())
    }
}
