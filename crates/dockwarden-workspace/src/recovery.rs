//! Recovery: restoring an invalid worktree from the newest good snapshot (reporting what
//! could not be recovered), and rolling interrupted transitions back or forward at start.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::model::{RecoveryReport, Workspace, now_ms, random_hex};
use crate::service::{ProgressSink, Service, no_progress};
use crate::snapshot::{EntryKind, Manifest};
use crate::status::Status;
use crate::{store, worktree};

impl Service {
    /// Replaces the worktree of `ws` with its newest snapshot that restores cleanly.
    /// The caller holds the op lock.
    pub(crate) async fn restore_locked(
        &self,
        ws: &Workspace,
        reason: &str,
        progress: ProgressSink,
    ) -> WsResult<RecoveryReport> {
        // Processes still running in the damaged tree would keep writing into it.
        let (_stopped_gate, _) = self.stop_all(ws).await?;
        let wt = self.worktree(&ws.id);
        let staging = self
            .ws_dir(&ws.id)
            .join(format!("worktree.restore-{}", random_hex(4)));
        let (restored, mut notes) = self.restore_newest(ws, &staging, progress).await?;
        let unrecovered = match (&restored, wt.exists()) {
            (Some(m), true) => changed_since(&wt, m),
            (None, _) => vec!["(every file: no usable snapshot)".to_string()],
            // INVARIANT: never an empty list after a full deletion: what changed is unknown.
            (Some(m), false) => vec![format!(
                "(unknown: the worktree was gone; every change after snapshot `{}` is lost)",
                m.id
            )],
        };
        // A worktree on its own disk image: the damaged tree stays in its image, kept aside,
        // and the restored tree goes into a new image mounted in its place.
        let image_aside = self.unmount_image_aside(ws, &wt)?;
        let on_image = image_aside.is_some();
        let preserved_at = match image_aside {
            Some(img) => {
                let _ = std::fs::remove_dir(&wt);
                Some(img)
            }
            None => self.set_aside(&ws.id, &wt)?,
        };
        match &restored {
            Some(_) => std::fs::rename(&staging, &wt).map_err(|e| WsError::io(&wt, e))?,
            None => {
                std::fs::create_dir(&wt).map_err(|e| WsError::io(&wt, e))?;
                worktree::chown_tree(&wt, self.owner(ws))?;
                notes.push("no usable snapshot; the worktree is empty".into());
            }
        }
        if on_image {
            self.remount_sized(ws)?;
        }
        if restored.is_some() && !unrecovered.is_empty() {
            notes.push(format!(
                "{} path(s) changed after the snapshot and were not recovered",
                unrecovered.len()
            ));
        }
        notes.push("changes made after the snapshot was taken may be lost".into());
        let report = RecoveryReport {
            at_ms: now_ms(),
            reason: reason.to_string(),
            restored_from: restored.as_ref().map(|m| m.id.clone()),
            snapshot_created_at_ms: restored.as_ref().map(|m| m.created_at_ms),
            unrecovered,
            preserved_at,
            note: notes.join("; "),
        };
        warn!(workspace.id = %ws.id, recovery.from = ?report.restored_from, recovery.unrecovered = report.unrecovered.len(), "worktree restored");
        Ok(report)
    }

    /// Restores the newest snapshot that loads and passes its checksums into `staging`;
    /// the errors of the ones skipped become notes of the report.
    async fn restore_newest(
        &self,
        ws: &Workspace,
        staging: &Path,
        progress: ProgressSink,
    ) -> WsResult<(Option<Manifest>, Vec<String>)> {
        let mut notes = Vec::new();
        for (info, sha) in self.store.snapshots_of(&ws.id)? {
            let (snaps, dest, owner, p) = (
                self.snapshots.clone(),
                staging.to_path_buf(),
                self.owner(ws),
                progress.clone(),
            );
            let attempt = tokio::task::spawn_blocking(move || {
                let m = snaps.load(&info.id, &sha)?;
                snaps.restore(&m, &dest, owner, &*p).map(|()| m)
            })
            .await
            .map_err(|e| WsError::Internal(format!("restore task: {e}")))?;
            match attempt {
                Ok(m) => return Ok((Some(m), notes)),
                Err(e) => {
                    warn!(workspace.id = %ws.id, error = %e, "snapshot unusable; trying an older one");
                    notes.push(e.to_string());
                    let _ = std::fs::remove_dir_all(staging);
                }
            }
        }
        Ok((None, notes))
    }

    /// Disk images of uids no workspace holds (a create or delete cut short) are removed;
    /// their mounts went with the directories above.
    fn sweep_orphan_images(&self, workspaces: &[Workspace]) {
        let dir = crate::resources::disk::images_dir(&self.cfg.state_dir);
        let held: std::collections::HashSet<String> = workspaces
            .iter()
            .map(|w| format!("{}.img", w.uid))
            .collect();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return;
        };
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.ends_with(".img") && !held.contains(&name) {
                warn!(image = %ent.path().display(), "removing a disk image no workspace holds");
                let _ = std::fs::remove_file(ent.path());
            }
        }
    }

    /// If the worktree is its disk image's mount: unmounts it (the workspace's processes are
    /// stopped) and moves the image aside, where the damaged tree stays for inspection.
    /// Returns where it went.
    fn unmount_image_aside(&self, ws: &Workspace, wt: &Path) -> WsResult<Option<String>> {
        use crate::resources::disk;
        let image = disk::image_path(&self.cfg.state_dir, ws.uid);
        if !disk::is_mount(wt) || !image.exists() {
            return Ok(None);
        }
        nix::mount::umount2(wt, nix::mount::MntFlags::UMOUNT_NOFOLLOW)
            .or_else(|_| nix::mount::umount2(wt, nix::mount::MntFlags::MNT_DETACH))
            .map_err(|e| WsError::errno(wt, e))?;
        let aside = self
            .ws_dir(&ws.id)
            .join(format!("lost+found-{}.img", now_ms()));
        std::fs::rename(&image, &aside).map_err(|e| WsError::io(&image, e))?;
        Ok(Some(aside.display().to_string()))
    }

    /// Puts the (restored, plain) worktree into a new disk image of the workspace's size.
    fn remount_sized(&self, ws: &Workspace) -> WsResult<()> {
        let wt = self.worktree(&ws.id);
        match crate::resources::persist::get(&self.store, &ws.id)? {
            Some(r) => self.resources.apply(ws.uid, &wt, &r.sizing),
            None => Ok(()),
        }
    }

    /// Moves what is left of a damaged worktree out of the way, keeping it for inspection.
    fn set_aside(&self, id: &str, wt: &Path) -> WsResult<Option<String>> {
        if std::fs::symlink_metadata(wt).is_err() {
            return Ok(None);
        }
        let aside = self.ws_dir(id).join(format!("lost+found-{}", now_ms()));
        std::fs::rename(wt, &aside).map_err(|e| WsError::io(&aside, e))?;
        Ok(Some(aside.display().to_string()))
    }

    /// Rolls interrupted transitions back or forward, clears debris, and restores invalid
    /// worktrees of live workspaces. Runs before the API accepts requests.
    pub async fn recover_on_start(&self) -> WsResult<()> {
        for j in self.store.journal()? {
            info!(workspace.id = %j.workspace_id, journal.op = %j.op, "finishing interrupted operation");
            match j.op.as_str() {
                // Never acknowledged: roll back.
                "create" => {
                    self.tear_down_runtime(&j.workspace_id).await;
                    // A worktree image mounted before the crash (its file goes with the
                    // orphan-image sweep below).
                    dockwarden_sys::mountinfo::detach_beneath(&self.ws_dir(&j.workspace_id));
                    let _ = std::fs::remove_dir_all(self.ws_dir(&j.workspace_id));
                    self.store.tx(|tx| store::delete_ws(tx, &j.workspace_id))?;
                }
                "delete" => self.finish_delete(&j.workspace_id).await?,
                "kill" => self.finish_kill(&j.workspace_id, j.seq).await?,
                // A snapshot not yet recorded is garbage; connect changes nothing until commit.
                _ => self.store.end(j.seq)?,
            }
        }
        self.collect_garbage().await?;
        self.sweep_unknown_dirs().await?;
        for ws in self.store.list()? {
            // Frozen by the last service: thawed and back to running, so the leftovers'
            // reaping below can end its processes (a frozen task takes no signal) and the
            // run script starts again. Its files are in the snapshot taken at suspension.
            let ws = self.thaw_at_start(ws)?;
            self.clear_debris(&ws.id);
            self.reap_leftovers(&ws).await;
            self.recover_runtime(&ws).await;
            if ws.status.is_live() && !self.worktree_valid(&ws) {
                let live = self.live(&ws.id);
                let _op = live.op.lock().await;
                let report = self
                    .restore_locked(&ws, "worktree invalid at service start", no_progress())
                    .await?;
                let mut ws = self.store.require(&ws.id)?;
                ws.last_recovery = Some(report);
                self.store.tx(|tx| store::put_ws(tx, &ws))?;
            }
            if ws.status.is_live() {
                // Stopped with the last service (or reaped above); back with this one.
                self.start_run_script(&ws);
            }
        }
        Ok(())
    }

    fn thaw_at_start(&self, mut ws: Workspace) -> WsResult<Workspace> {
        if ws.status != Status::Suspended {
            return Ok(ws);
        }
        let name = crate::resources::cgroup::name_of(ws.uid);
        if let Some(h) = dockwarden_sys::cgroupfs::Hierarchy::detect()
            && h.can_freeze(&name)
            && let Err(e) = h.thaw(&name)
        {
            warn!(workspace.id = %ws.id, error = %e, "thawing a workspace suspended by the last service");
        }
        ws.status = Status::Running;
        ws.suspended_at_ms = None;
        self.store.tx(|tx| store::put_ws(tx, &ws))?;
        Ok(ws)
    }

    async fn finish_kill(&self, id: &str, seq: i64) -> WsResult<()> {
        let Some(mut ws) = self.store.get(id)? else {
            return self.store.end(seq);
        };
        let spec = self.run_spec(&ws, &BTreeMap::new())?;
        self.runtime.stop(&spec).await?;
        self.runtime.down(&spec).await?;
        ws.status = Status::Stopped;
        self.store.tx(|tx| {
            store::put_ws(tx, &ws)?;
            store::end_in(tx, seq)
        })
    }

    /// A workspace directory without a record (a delete or create cut short before the
    /// journal knew it): whatever runtime it holds is stopped and the directory removed.
    /// Then the network links of uids in range that no workspace holds are deleted.
    async fn sweep_unknown_dirs(&self) -> WsResult<()> {
        let workspaces = self.store.list()?;
        let known: std::collections::HashSet<String> =
            workspaces.iter().map(|w| w.id.clone()).collect();
        let Ok(rd) = std::fs::read_dir(self.cfg.state_dir.join("workspaces")) else {
            return Ok(());
        };
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if !known.contains(&name) {
                warn!(workspace.id = %name, "removing the directory of a workspace with no record");
                crate::runtime::docker::sweep(&ent.path()).await;
                crate::runtime::wsnet::release_ns(&ent.path());
                // A worktree image (or anything else) still mounted in it: a crash between
                // the mount and the record, or during a delete.
                dockwarden_sys::mountinfo::detach_beneath(&ent.path());
                let _ = std::fs::remove_dir_all(ent.path());
            }
        }
        self.sweep_orphan_images(&workspaces);
        if self.runtime.isolates_users() {
            let held: std::collections::HashSet<u32> = workspaces.iter().map(|w| w.uid).collect();
            let range = self.cfg.uid_base..self.cfg.uid_base.saturating_add(self.cfg.uid_count);
            crate::runtime::wsnet::sweep_links(range, &held);
        }
        Ok(())
    }

    /// After a service crash the daemons and proxies of the last process may still run:
    /// they are stopped (never two on one data root), then live docker workspaces get theirs
    /// started again; stopped ones stay down.
    async fn recover_runtime(&self, ws: &Workspace) {
        let Ok(spec) = self.run_spec(ws, &BTreeMap::new()) else {
            return;
        };
        if let Err(e) = self.runtime.down(&spec).await {
            warn!(workspace.id = %ws.id, error = %e, "stopping a runtime left by the last service failed");
        }
        if ws.status.is_live()
            && let Err(e) = self.runtime.up(&spec).await
        {
            warn!(workspace.id = %ws.id, error = %e, "restarting the runtime failed");
        }
    }

    fn clear_debris(&self, id: &str) {
        let Ok(dir) = std::fs::read_dir(self.ws_dir(id)) else {
            return;
        };
        for ent in dir.flatten() {
            if ent
                .file_name()
                .to_string_lossy()
                .starts_with("worktree.restore-")
            {
                let _ = std::fs::remove_dir_all(ent.path());
            }
        }
    }
}

/// Paths in the damaged worktree that are new or differ (type, size, mtime) from `m`.
fn changed_since(wt: &Path, m: &Manifest) -> Vec<String> {
    let known: HashMap<&str, &EntryKind> = m
        .entries
        .iter()
        .map(|e| (e.path.as_str(), &e.kind))
        .collect();
    let mut out = Vec::new();
    walk_changed(wt, "", &known, &mut out);
    out.sort();
    out.truncate(1000);
    out
}

fn walk_changed(
    dir: &Path,
    prefix: &str,
    known: &HashMap<&str, &EntryKind>,
    out: &mut Vec<String>,
) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for ent in rd.flatten() {
        let path = format!("{prefix}{}", ent.file_name().to_string_lossy());
        let Ok(meta) = std::fs::symlink_metadata(ent.path()) else {
            continue;
        };
        let same = match known.get(path.as_str()) {
            Some(EntryKind::Dir { .. }) => meta.is_dir(),
            Some(EntryKind::Symlink { .. }) => meta.file_type().is_symlink(),
            Some(EntryKind::File { size, mtime_ns, .. }) => {
                meta.is_file()
                    && meta.len() == *size
                    && meta
                        .mtime()
                        .saturating_mul(1_000_000_000)
                        .saturating_add(meta.mtime_nsec())
                        == *mtime_ns
            }
            None => false,
        };
        if !same {
            out.push(path.clone());
        }
        if meta.is_dir() {
            walk_changed(&ent.path(), &format!("{path}/"), known, out);
        }
    }
}
