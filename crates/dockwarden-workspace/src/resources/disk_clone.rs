//! Whole-image clones of worktree disks (issue 16). Where worktrees are XFS images and the
//! images' directory can `FICLONE` (XFS with reflink, btrfs), a snapshot keeps a frozen
//! clone of the worktree's image at `<state>/disks/snapshots/<snapshot>.img`, and a fork
//! clones that into its own `<uid>.img`: one ioctl, no data written, the blocks shared
//! until either side writes. Freezing (`fsfreeze`, FIFREEZE) makes the image consistent
//! with a clean log for the instant of the clone; it is always thawed, also on error.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use tracing::{debug, warn};

use super::disk::{self, run};

/// Where the snapshots' image clones live.
pub fn images_dir(state_dir: &Path) -> PathBuf {
    disk::images_dir(state_dir).join("snapshots")
}

/// The image clone of snapshot `id`.
pub fn snapshot_image(state_dir: &Path, id: &str) -> PathBuf {
    images_dir(state_dir).join(format!("{id}.img"))
}

/// The stat index saved beside a snapshot's image clone (`SnapshotStore::save_index`): a
/// cache, like every index; a missing or torn one only costs a fork a walk of stat data.
pub fn index_of(image: &Path) -> PathBuf {
    image.with_extension("idx")
}

fn tmp_of(path: &Path) -> PathBuf {
    path.with_extension("img.tmp")
}

/// Clones `src` into `dst`, which must not exist (removed again on failure).
fn ficlone(src: &Path, dst: &Path) -> Result<(), String> {
    let from = File::open(src).map_err(|e| format!("{}: {e}", src.display()))?;
    let to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dst)
        .map_err(|e| format!("{}: {e}", dst.display()))?;
    rustix::fs::ioctl_ficlone(&to, &from).map_err(|e| {
        let _ = fs::remove_file(dst);
        format!("FICLONE {} -> {}: {e}", src.display(), dst.display())
    })
}

/// Whether files in `dir` can share extents: a 4 KiB probe cloned into another, once per
/// directory per process (the answer is the filesystem's, it does not change).
pub fn can_clone(dir: &Path) -> bool {
    static PROBED: OnceLock<Mutex<HashMap<PathBuf, bool>>> = OnceLock::new();
    let probed = PROBED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(known) = probed.lock().ok().and_then(|m| m.get(dir).copied()) {
        return known;
    }
    let (src, dst) = (dir.join(".clone-probe-src"), dir.join(".clone-probe-dst"));
    let ok = fs::create_dir_all(dir).is_ok()
        && fs::write(&src, [0x5au8; 4096]).is_ok()
        && ficlone(&src, &dst).is_ok();
    let _ = fs::remove_file(&src);
    let _ = fs::remove_file(&dst);
    debug!(dir = %dir.display(), clone = ok, "image clone probe");
    if let Ok(mut m) = probed.lock() {
        m.insert(dir.to_path_buf(), ok);
    }
    ok
}

fn sync_dir(dir: &Path) -> Result<(), String> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Freezes the filesystem mounted on `worktree`, clones its `image` to `dest` and thaws;
/// the clone is synced and in place before this returns. Returns the wall clock read while
/// the filesystem was frozen: the clone holds the tree as it was at that moment.
pub fn freeze_clone(worktree: &Path, image: &Path, dest: &Path) -> Result<i64, String> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = tmp_of(dest);
    let _ = fs::remove_file(&tmp);
    let wt = worktree.display().to_string();
    run("fsfreeze", &["--freeze", &wt], &[])?;
    // Writes wait from here until the thaw: what the clone holds was there at this moment.
    let frozen_at = now_ns();
    let cloned = ficlone(image, &tmp);
    let mut thawed = run("fsfreeze", &["--unfreeze", &wt], &[]);
    for _ in 0..3 {
        if thawed.is_ok() {
            break;
        }
        warn!(worktree = %wt, "thawing the worktree failed; retrying");
        std::thread::sleep(std::time::Duration::from_millis(50));
        thawed = run("fsfreeze", &["--unfreeze", &wt], &[]);
    }
    let placed = cloned.and_then(|()| {
        thawed?;
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        fs::rename(&tmp, dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        sync_dir(dir)
    });
    if placed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    placed.map(|()| frozen_at)
}

/// Thaws the filesystem on `worktree` if it is frozen (after a crash mid-snapshot).
pub fn thaw(worktree: &Path) {
    let wt = worktree.display().to_string();
    // `EINVAL` when it is not frozen: the common case, not an error.
    if run("fsfreeze", &["--unfreeze", &wt], &[]).is_ok() {
        warn!(worktree = %wt, "a worktree was left frozen; thawed");
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Clones a snapshot's image into a new worktree image `dest` (which must not exist). It
/// keeps its parent's filesystem UUID: worktree images are mounted `nouuid` (`disk::mount`).
pub fn clone_image(src: &Path, dest: &Path) -> Result<(), String> {
    if dest.exists() {
        return Err(format!("{} exists", dest.display()));
    }
    let tmp = tmp_of(dest);
    let _ = fs::remove_file(&tmp);
    ficlone(src, &tmp)?;
    fs::rename(&tmp, dest).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        format!("{}: {e}", dest.display())
    })
}

/// Gives the snapshot image `src` a second name `dest` (another snapshot of the same tree).
/// INVARIANT: snapshot images are never written after their capture (mounted read-only,
/// only ever cloned), so two snapshots can share one.
pub fn link_image(src: &Path, dest: &Path) -> Result<(), String> {
    fs::hard_link(src, dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    // The saved index describes the same tree (a cache: without it a fork walks stat data).
    let _ = fs::hard_link(index_of(src), index_of(dest));
    sync_dir(dest.parent().unwrap_or(Path::new(".")))
}

/// A read-only mount of a snapshot's image clone (to capture from it); unmounted and its
/// directory removed on drop.
pub struct RoMount {
    dir: PathBuf,
}

impl RoMount {
    pub fn new(image: &Path, dir: &Path) -> Result<RoMount, String> {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let (img, d) = (image.display().to_string(), dir.display().to_string());
        // `nouuid`: the clone has the UUID of the worktree it was frozen from, still mounted.
        // `norecovery`: a freeze writes every change in place but leaves the log unclean;
        // replaying it would need a writable device, and would change nothing.
        let opts = "loop,ro,norecovery,nouuid,nosuid,nodev,noexec";
        if let Err(e) = run("mount", &["-o", opts, &img, &d], &[]) {
            let _ = fs::remove_dir(dir);
            return Err(e);
        }
        Ok(RoMount {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RoMount {
    fn drop(&mut self) {
        unmount(&self.dir);
    }
}

fn unmount(dir: &Path) {
    let d = dir.display().to_string();
    if disk::is_mount(dir) && run("umount", &[&d], &[]).is_err() {
        let _ = run("umount", &["-l", &d], &[]);
    }
    let _ = fs::remove_dir(dir);
}

/// Removes the image clones of snapshots not in `keep`, and what an interrupted capture
/// left (a temporary clone, a read-only mount). Returns how many clones were removed.
pub fn sweep(state_dir: &Path, keep: &HashSet<String>) -> usize {
    let dir = images_dir(state_dir);
    let Ok(rd) = fs::read_dir(&dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(".mnt-") {
            unmount(&path);
        } else if name.ends_with(".tmp") {
            let _ = fs::remove_file(&path);
        } else if let Some(id) = name.strip_suffix(".img")
            && !keep.contains(id)
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        } else if let Some(id) = name.strip_suffix(".idx")
            && !keep.contains(id)
        {
            let _ = fs::remove_file(&path);
        }
    }
    removed
}
