//! `snapshot`: capture the whole worktree into the snapshot store and record it.

use tracing::{debug, info, warn};

/// Prunable snapshots are pruned once this many have accumulated.
const PRUNE_BATCH: usize = 5;

use crate::error::{WsError, WsResult};
use crate::events::{Resumed, SnapshotTaken};
use crate::model::{SnapshotInfo, random_hex};
use crate::service::{ProgressSink, Service};
use crate::snapshot::{Captured, Manifest};
use crate::status::Verb;
use crate::store;

impl Service {
    /// Takes a snapshot now (an exclusive operation).
    pub async fn snapshot(&self, id: &str, progress: ProgressSink) -> WsResult<SnapshotInfo> {
        let (_op, _) = self.exclusive(id, Verb::Snapshot).await?;
        self.capture_locked(id, "manual", progress).await
    }

    /// `snapshot` that first resumes a stopped workspace and heals an invalid worktree.
    pub async fn snapshot_resuming(
        &self,
        id: &str,
        progress: ProgressSink,
    ) -> WsResult<Resumed<SnapshotTaken>> {
        let prepared = self.prepare(id, true).await?;
        let info = self.snapshot(id, progress).await?;
        Ok(Resumed {
            result: SnapshotTaken {
                snapshot_id: info.id.clone(),
                info,
            },
            resumed: prepared.resumed,
            recovery: prepared.recovery,
        })
    }

    /// The newest manifest of `id` that loads and passes its checksum.
    pub fn latest_manifest(&self, id: &str) -> Option<Manifest> {
        let snaps = self.store.snapshots_of(id).ok()?;
        snaps
            .iter()
            .find_map(|(info, sha)| self.snapshots.load(&info.id, sha).ok())
    }

    /// Captures and records a snapshot. The caller holds the workspace's op lock.
    ///
    /// INVARIANT: the snapshot row (the only reference to the manifest) is inserted after
    /// the capture is durable, in the same transaction that ends the journal entry.
    pub(crate) async fn capture_locked(
        &self,
        id: &str,
        reason: &str,
        progress: ProgressSink,
    ) -> WsResult<SnapshotInfo> {
        let info = self.capture_and_record(id, reason, progress).await?;
        if crate::retention::prunes_after(reason) {
            self.prune_snapshots(id).await;
        }
        Ok(info)
    }

    /// Prunes the automatic snapshots that newer ones supersede, keeping `cfg.keep_snapshots`
    /// of them and every snapshot something refers to (`retention`), in batches since
    /// collecting garbage reads every manifest. Failures are logged: retention is housekeeping.
    async fn prune_snapshots(&self, id: &str) {
        let Ok(snaps) = self.store.snapshots_of(id) else {
            return;
        };
        let Ok(all) = self.store.list() else {
            return;
        };
        let mut referenced: std::collections::BTreeSet<String> =
            all.iter().filter_map(|w| w.from_snapshot.clone()).collect();
        if let Some(ws) = all.iter().find(|w| w.id == id) {
            referenced.extend(ws.latest_snapshot.clone());
            referenced.extend(ws.last_stop.as_ref().and_then(|s| s.snapshot_id.clone()));
        }
        let infos: Vec<_> = snaps.into_iter().map(|(s, _)| s).collect();
        let old = crate::retention::prunable(&infos, self.cfg.keep_snapshots, &referenced);
        if old.len() < PRUNE_BATCH {
            return;
        }
        let pruned = self.store.tx(|tx| store::delete_snapshots(tx, &old));
        match pruned.map(|()| old.len()) {
            Ok(n) => {
                debug!(workspace.id = %id, snapshot.pruned = n, "superseded automatic snapshots pruned")
            }
            Err(e) => warn!(workspace.id = %id, error = %e, "snapshot pruning failed"),
        }
        if let Err(e) = self.collect_garbage().await {
            warn!(error = %e, "snapshot garbage collection failed");
        }
    }

    async fn capture_and_record(
        &self,
        id: &str,
        reason: &str,
        progress: ProgressSink,
    ) -> WsResult<SnapshotInfo> {
        let _gate = self.gc_gate.read().await;
        let seq = self.store.begin(id, "snapshot")?;
        let snap_id = format!("snap-{}", random_hex(8));
        // Only loaded when the store cannot recognise unchanged files by itself (a capture
        // from an image clone carries the worktree's stat index to the clone first).
        let previous = if self.snapshots.wants_previous(&self.worktree(id)) {
            self.latest_manifest(id)
        } else {
            None
        };
        let captured = self
            .capture_worktree(id, &snap_id, previous, progress)
            .await;
        let (captured, image_clone) = match captured {
            Ok(c) => c,
            Err(e) => {
                self.store.end(seq)?;
                return Err(e);
            }
        };
        self.record_snapshot(id, seq, snap_id, reason, captured, image_clone)
    }

    /// Records a durable capture as a snapshot of `id` and ends journal entry `seq`.
    pub(crate) fn record_snapshot(
        &self,
        id: &str,
        seq: i64,
        snap_id: String,
        reason: &str,
        captured: Captured,
        image_clone: bool,
    ) -> WsResult<SnapshotInfo> {
        let info = SnapshotInfo {
            id: snap_id,
            workspace_id: id.to_string(),
            created_at_ms: crate::model::now_ms(),
            files: captured.files,
            bytes: captured.bytes,
            new_bytes: captured.new_bytes,
            hashed: captured.hashed,
            image_clone,
            reason: reason.to_string(),
            skipped: captured.skipped,
            vanished: captured.vanished,
            changed_while_read: captured.changed_while_read,
        };
        self.store.tx(|tx| {
            let mut ws = store::get_tx(tx, id)?.ok_or_else(|| WsError::NotFound(id.to_string()))?;
            store::insert_snapshot(tx, &info, &captured.manifest_sha256)?;
            ws.latest_snapshot = Some(info.id.clone());
            store::put_ws(tx, &ws)?;
            store::end_in(tx, seq)
        })?;
        info!(workspace.id = %id, snapshot.id = %info.id, snapshot.files = info.files, snapshot.new_bytes = info.new_bytes, snapshot.hashed = info.hashed, snapshot.image_clone = info.image_clone, snapshot.reason = reason, "snapshot recorded");
        debug!(snapshot.skipped = info.skipped.len(), "skipped entries");
        Ok(info)
    }
}
