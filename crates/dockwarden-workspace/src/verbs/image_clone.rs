//! Snapshots and forks through whole-image clones (issue 16), where worktrees are their own
//! XFS images and the images' directory can `FICLONE` (docs/snapshots.md, "Forks by
//! whole-image clones"):
//! - a snapshot freezes the worktree, clones its image (kept as the snapshot's image),
//!   thaws, and captures from the clone mounted read-only: the manifest is exactly what
//!   the clone holds, one instant of the tree;
//! - a fork clones that image into its own, mounts it, gives every entry to its owner and
//!   writes its stat index from the manifest (no content read); its baseline is the
//!   parent's manifest recorded again, its image the parent snapshot's (a hard link: a
//!   snapshot image is never written after its capture).
//!
//! Whatever fails on the way falls back to what works without clones: a live capture, a
//! restore.

use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::model::{SnapshotInfo, Workspace, random_hex};
use crate::resources::disk;
use crate::resources::disk_clone::{self, RoMount};
use crate::resources::idmap;
use crate::service::{ProgressSink, Service, no_progress};
use crate::snapshot::{Captured, Manifest, ProgressFn, SnapshotStore};

/// A fork made from an image clone, waiting for its baseline.
pub(crate) struct Adopted {
    /// The snapshot forked from: while it exists, every blob its manifest names does.
    from: String,
    manifest: Manifest,
    /// The baseline's snapshot id, and whether its image clone was taken.
    baseline_id: String,
    baseline_image: bool,
}

/// Captures `root` from a frozen clone of its `image`; falls back to the live tree when
/// the clone cannot be made or mounted. Returns the capture and whether the clone is kept.
fn capture_from_clone(
    snaps: &dyn SnapshotStore,
    state: &Path,
    sid: &str,
    root: &Path,
    image: &Path,
    previous: Option<&Manifest>,
    progress: ProgressFn<'_>,
) -> WsResult<(Captured, bool)> {
    let dest = disk_clone::snapshot_image(state, sid);
    let live = |why: String| {
        warn!(snapshot.id = %sid, error = %why, "no image clone: capturing the live worktree");
        snaps
            .capture(sid, root, previous, progress)
            .map(|c| (c, false))
    };
    let frozen_at = match disk_clone::freeze_clone(root, image, &dest) {
        Ok(t) => t,
        Err(e) => return live(e),
    };
    let mnt = disk_clone::images_dir(state).join(format!(".mnt-{sid}"));
    let mount = match RoMount::new(&dest, &mnt) {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_file(&dest);
            return live(e);
        }
    };
    // The clone is the worktree as it was at `frozen_at`: the worktree's index holds for it.
    if let Err(e) = snaps.carry_index(root, mount.path(), i64::MAX, false) {
        warn!(error = %e, "stat index not carried to the clone");
    }
    let captured = snaps.capture(sid, mount.path(), previous, progress);
    // Kept beside the clone for its forks, which then read no stat data.
    if captured.is_ok()
        && let Err(e) = snaps.save_index(mount.path(), &disk_clone::index_of(&dest), frozen_at)
    {
        warn!(error = %e, "stat index not saved beside the snapshot's image clone");
    }
    // And back: what the capture recorded is the worktree at `frozen_at`.
    if let Err(e) = snaps.carry_index(mount.path(), root, frozen_at, true) {
        warn!(error = %e, "stat index not carried back to the worktree");
    }
    drop(mount);
    match captured {
        Ok(c) => Ok((c, true)),
        Err(e) => {
            let _ = std::fs::remove_file(&dest);
            Err(e)
        }
    }
}

/// The blocking half of a fork from an image: clone, mount, adopt, baseline image. On
/// error the caller removes what was made.
fn fork_blocking(
    snaps: &dyn SnapshotStore,
    m: &Manifest,
    src: &Path,
    image: &Path,
    wt: &Path,
    (uid, owner): (u32, Option<(u32, u32)>),
    baseline_image: &Path,
) -> Result<(u64, bool), String> {
    let t0 = std::time::Instant::now();
    disk_clone::clone_image(src, image)?;
    let t1 = std::time::Instant::now();
    std::fs::create_dir(wt).map_err(|e| format!("{}: {e}", wt.display()))?;
    disk::mount_as(image, wt, uid)?;
    let t2 = std::time::Instant::now();
    // An image that records its disk owner is mounted with that owner mapped to `uid`
    // (`idmap`): its entries are the fork's already, untouched. One from before labels is
    // given to the fork entry by entry.
    let owner = owner.filter(|_| idmap::disk_owner(image).is_none());
    let saved = disk_clone::index_of(src);
    let files = snaps
        .adopt_clone(m, wt, owner, Some(&saved))
        .map_err(|e| e.to_string())?;
    info!(
        fork.clone_ms = (t1 - t0).as_millis() as u64,
        fork.mount_ms = (t2 - t1).as_millis() as u64,
        fork.adopt_ms = t2.elapsed().as_millis() as u64,
        fork.chown = owner.is_some(),
        "image fork steps"
    );
    // The baseline's tree is the parent snapshot's (owners are not part of a snapshot, and
    // a fork of it maps or gives every entry to its own uid anyway): the same immutable
    // image, one more name for it.
    let linked = match disk_clone::link_image(src, baseline_image) {
        Ok(()) => true,
        Err(e) => {
            warn!(error = %e, "no image clone for the fork's baseline");
            false
        }
    };
    Ok((files, linked))
}

impl Service {
    /// After a crash: thaws every worktree a snapshot may have left frozen (a frozen
    /// filesystem blocks its writers until thawed), unmounts capture mounts and removes
    /// temporary and orphaned image clones. Runs before anything else touches worktrees.
    pub(crate) fn settle_image_clones(&self) {
        let state = &self.cfg.state_dir;
        if !disk_clone::images_dir(state).exists() {
            return;
        }
        for ws in self.store.list().unwrap_or_default() {
            let wt = self.worktree(&ws.id);
            if disk::is_mount(&wt) {
                disk_clone::thaw(&wt);
            }
        }
        match self.store.all_snapshot_ids() {
            Ok(ids) => {
                let removed = disk_clone::sweep(state, &ids.into_iter().collect());
                if removed > 0 {
                    info!(removed, "orphaned snapshot image clones removed");
                }
            }
            Err(e) => warn!(error = %e, "snapshot image clones not swept"),
        }
    }

    /// The image of `ws`'s worktree if a snapshot can clone it: images on, the worktree
    /// mounted, and the snapshot images' directory able to `FICLONE`.
    fn clonable_image(&self, ws: &Workspace) -> Option<PathBuf> {
        self.resources.provider.disk_enforced().ok()?;
        let image = disk::image_path(&self.cfg.state_dir, ws.uid);
        let ok = image.exists()
            && disk::is_mount(&self.worktree(&ws.id))
            && disk_clone::can_clone(&disk_clone::images_dir(&self.cfg.state_dir));
        ok.then_some(image)
    }

    /// Captures the worktree of `id` as snapshot `sid`, from a frozen image clone where it
    /// can (then the clone is kept: the `bool`), else live.
    pub(crate) async fn capture_worktree(
        &self,
        id: &str,
        sid: &str,
        previous: Option<Manifest>,
        progress: ProgressSink,
    ) -> WsResult<(Captured, bool)> {
        let ws = self.store.require(id)?;
        let image = self.clonable_image(&ws);
        let (snaps, root, sid) = (self.snapshots.clone(), self.worktree(id), sid.to_string());
        let state = self.cfg.state_dir.clone();
        tokio::task::spawn_blocking(move || match image {
            Some(image) => capture_from_clone(
                &*snaps,
                &state,
                &sid,
                &root,
                &image,
                previous.as_ref(),
                &*progress,
            ),
            None => snaps
                .capture(&sid, &root, previous.as_ref(), &*progress)
                .map(|c| (c, false)),
        })
        .await
        .map_err(|e| WsError::Internal(format!("capture task: {e}")))?
    }

    /// Makes the worktree of `ws` a clone of snapshot `from`'s image, if it has one. `None`:
    /// restore instead (no image, or the clone failed and what it made is gone).
    pub(crate) async fn fork_from_image(
        &self,
        ws: &Workspace,
        from: &str,
        sha: &str,
    ) -> WsResult<Option<Adopted>> {
        let state = self.cfg.state_dir.clone();
        let src = disk_clone::snapshot_image(&state, from);
        if self.resources.provider.disk_enforced().is_err()
            || !src.exists()
            || !disk_clone::can_clone(&disk_clone::images_dir(&state))
        {
            return Ok(None);
        }
        // No collection while the fork's index names the snapshot's blobs.
        let _gate = self.gc_gate.read().await;
        let snaps = self.snapshots.clone();
        let (image, wt, owner) = (
            disk::image_path(&state, ws.uid),
            self.worktree(&ws.id),
            (ws.uid, self.owner(ws)),
        );
        if image.exists() {
            warn!(workspace.id = %ws.id, "an image of this uid exists: restoring instead");
            return Ok(None);
        }
        let (from, sha, wsid) = (from.to_string(), sha.to_string(), ws.id.clone());
        let baseline_id = format!("snap-{}", random_hex(8));
        let baseline = disk_clone::snapshot_image(&state, &baseline_id);
        let started = std::time::Instant::now();
        tokio::task::spawn_blocking(move || {
            let manifest = snaps.load(&from, &sha)?;
            let made = fork_blocking(&*snaps, &manifest, &src, &image, &wt, owner, &baseline);
            match made {
                Ok((files, baseline_image)) => {
                    info!(workspace.id = %wsid, snapshot.id = %from, fork.files = files,
                        fork.ms = started.elapsed().as_millis() as u64, "forked from the snapshot's image clone");
                    Ok(Some(Adopted {
                        from,
                        manifest,
                        baseline_id,
                        baseline_image,
                    }))
                }
                Err(e) => {
                    warn!(workspace.id = %wsid, error = %e, "fork from the image clone failed: restoring instead");
                    if disk::is_mount(&wt) {
                        let w = wt.display().to_string();
                        let _ = std::process::Command::new("umount").arg(&w).status();
                    }
                    let _ = std::fs::remove_dir(&wt);
                    let _ = std::fs::remove_file(&image);
                    let _ = std::fs::remove_file(&baseline);
                    Ok(None)
                }
            }
        })
        .await
        .map_err(|e| WsError::Internal(format!("fork task: {e}")))?
    }

    /// The baseline of a fork made from an image clone: its parent's manifest, recorded
    /// again (the tree is that manifest's, with the image clone taken at the fork). A
    /// capture instead if the parent snapshot went meanwhile (its blobs may be collected).
    pub(crate) async fn baseline_of_adopted(&self, id: &str, a: Adopted) -> WsResult<SnapshotInfo> {
        let image = disk_clone::snapshot_image(&self.cfg.state_dir, &a.baseline_id);
        let gate = self.gc_gate.read().await;
        if self.store.snapshot(&a.from)?.is_none() {
            drop(gate);
            let _ = std::fs::remove_file(&image);
            return self.capture_locked(id, "baseline", no_progress()).await;
        }
        let seq = self.store.begin(id, "snapshot")?;
        let (snaps, sid) = (self.snapshots.clone(), a.baseline_id.clone());
        let copied = tokio::task::spawn_blocking(move || snaps.record_copy(&sid, a.manifest))
            .await
            .map_err(|e| WsError::Internal(format!("baseline task: {e}")))
            .and_then(|c| c);
        match copied {
            Ok(c) => self.record_snapshot(id, seq, a.baseline_id, "baseline", c, a.baseline_image),
            Err(e) => {
                self.store.end(seq)?;
                let _ = std::fs::remove_file(&image);
                Err(e)
            }
        }
    }
}
