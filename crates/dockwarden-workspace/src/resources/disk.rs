//! The disk axis on this machine: each worktree is its own loop-mounted XFS filesystem
//! (`mkfs.xfs -m reflink=1`), an image at `<state>/disks/<uid>.img` mounted on the
//! worktree. Growing is online: the sparse image is extended, `losetup -c` tells the loop
//! device, and `xfs_growfs` grows the mounted filesystem. The snapshot store
//! (`<state>/snapshots`) is outside every image.
//!
//! Why not one XFS pool with a project quota per worktree: this kernel has no XFS quota
//! support (`XFS: quota support not available in this kernel`), and ext4 images cannot
//! grow online here (`resize2fs` needs CAP_SYS_RESOURCE, which the service lacks);
//! see docs/resources.md. "Full" is read from the filesystem (`statvfs`), never from stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use tracing::{info, warn};

use super::config::{DiskMode, ResourcesConfig};
use super::idmap;

/// A worktree with less free space than this is full.
pub const FULL_BELOW: u64 = 1 << 20;
/// Smallest disk: below this XFS has no room for its log.
pub const MIN_DISK: u64 = 32 << 20;

/// Where worktrees' disk is enforced, or why it is not.
#[derive(Debug, Clone)]
pub enum Disk {
    /// One image per workspace in `dir`.
    Images {
        dir: PathBuf,
    },
    NotEnforced {
        reason: String,
    },
}

/// Size, use and free space of one worktree, as the filesystem reports them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DiskUsage {
    #[serde(alias = "sizeBytes")]
    pub size_bytes: u64,
    #[serde(alias = "usedBytes")]
    pub used_bytes: u64,
    #[serde(alias = "freeBytes")]
    pub free_bytes: u64,
}

pub(super) fn run(cmd: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("`{cmd}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{cmd} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether `dir` is a mount point (its device differs from its parent's).
pub fn is_mount(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(dir), dir.parent().map(std::fs::metadata)) {
        (Ok(d), Some(Ok(p))) => d.dev() != p.dev(),
        _ => false,
    }
}

/// Statfs of a path: size, used and free (for unprivileged writers) in bytes.
pub fn usage(path: &Path) -> Option<DiskUsage> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = s.fragment_size() as u64;
    let size = s.blocks() as u64 * frag;
    Some(DiskUsage {
        size_bytes: size,
        used_bytes: size.saturating_sub(s.blocks_free() as u64 * frag),
        free_bytes: s.blocks_available() as u64 * frag,
    })
}

fn have(tool: &str) -> bool {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

/// Where worktree images live.
pub fn images_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("disks")
}

/// The image of the worktree of the workspace with `uid`.
pub fn image_path(state_dir: &Path, uid: u32) -> PathBuf {
    images_dir(state_dir).join(format!("{uid}.img"))
}

impl Disk {
    /// Decides from `cfg` and this machine whether worktrees get images; any reason they
    /// cannot leaves the disk axis not enforced, and the service still runs.
    pub fn open(state_dir: &Path, cfg: &ResourcesConfig) -> Disk {
        let not = |reason: String| Disk::NotEnforced { reason };
        if cfg.disk == DiskMode::Off {
            return not("disk enforcement is off (`[disk] images = \"off\"`)".into());
        }
        let missing = if !nix::unistd::geteuid().is_root() {
            Some("the service is not root: no loop devices".to_string())
        } else if !Path::new("/dev/loop-control").exists() {
            Some("no loop devices (`/dev/loop-control` is missing)".into())
        } else {
            ["mkfs.xfs", "xfs_growfs", "losetup"]
                .iter()
                .find(|t| !have(t))
                .map(|t| format!("`{t}` is missing (install xfsprogs; scripts/setup.sh does)"))
        };
        match missing {
            Some(reason) => {
                if cfg.disk == DiskMode::On {
                    warn!(%reason, "disk enforcement requested but unavailable");
                }
                not(reason)
            }
            None => {
                let dir = images_dir(state_dir);
                // Images made before this was enforced sit in a directory others could read.
                if dir.exists()
                    && let Err(e) = root_only_dir(&dir)
                {
                    warn!(error = %e, "the disk images' directory could not be made root-only");
                }
                Disk::Images { dir }
            }
        }
    }

    pub fn enforced(&self) -> bool {
        matches!(self, Disk::Images { .. })
    }

    fn image(&self, uid: u32) -> Option<PathBuf> {
        match self {
            Disk::Images { dir } => Some(dir.join(format!("{uid}.img"))),
            Disk::NotEnforced { .. } => None,
        }
    }

    /// Makes the worktree a filesystem of `bytes`: on first use an image is made, the
    /// worktree's content copied in and the image mounted on it; later, a mounted image is
    /// grown online (never shrunk) and an unmounted one (after a reboot) mounted again.
    pub fn ensure(&self, worktree: &Path, uid: u32, bytes: u64) -> Result<(), String> {
        let Some(image) = self.image(uid) else {
            return Err("disk is not enforced".into());
        };
        let bytes = bytes.max(MIN_DISK);
        if !image.exists() {
            return create(&image, worktree, uid, bytes);
        }
        if !is_mount(worktree) {
            mount_as(&image, worktree, uid)?;
        }
        let len = std::fs::metadata(&image).map_err(|e| e.to_string())?.len();
        if bytes > len {
            grow(&image, worktree, bytes)?;
        }
        Ok(())
    }

    /// Whether the worktree's filesystem is full.
    ///
    /// XFS frees the blocks of a removed file in the background (inode inactivation), so a
    /// command that deleted a large file and then failed could read as full for a moment: a
    /// filesystem that looks full is synced (which runs that work) and read again.
    pub fn is_full(&self, worktree: &Path) -> bool {
        let looks_full = || usage(worktree).is_some_and(|u| u.free_bytes < FULL_BELOW);
        if !self.enforced() || !looks_full() {
            return false;
        }
        if let Ok(dir) = std::fs::File::open(worktree) {
            let _ = nix::unistd::syncfs(&dir);
        }
        looks_full()
    }

    /// Unmounts the worktree's image and removes it (the workspace's processes are gone).
    pub fn remove(&self, worktree: &Path, uid: u32) {
        let Some(image) = self.image(uid) else { return };
        if is_mount(worktree) {
            let w = worktree.display().to_string();
            if run("umount", &[&w], &[]).is_err() {
                let _ = run("umount", &["-l", &w], &[]);
            }
        }
        let _ = std::fs::remove_file(&image);
    }
}

/// A new image of `bytes` whose content will belong to `uid` (its label says so: the disk
/// owner, `idmap`).
fn mkfs(image: &Path, bytes: u64, uid: u32) -> Result<(), String> {
    if let Some(d) = image.parent() {
        root_only_dir(d)?;
    }
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(image)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    f.set_len(bytes)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    let img = image.display().to_string();
    // mkfs.xfs refuses filesystems under 300 MB unless told it runs for tests; small
    // workspace disks are what the sizing asks for, so it is told (the variables only lift
    // that size check).
    let small: &[(&str, &str)] = if bytes < 300_000_000 {
        &[("TEST_DIR", "1"), ("TEST_DEV", "1"), ("QA_CHECK_FS", "1")]
    } else {
        &[]
    };
    let label = idmap::label_for(uid);
    run(
        "mkfs.xfs",
        &["-q", "-f", "-m", "reflink=1", "-L", &label, &img],
        small,
    )
    .map(|_| ())
}

/// Mounts a worktree image on `at`. `nouuid`: a fork's image is a block-level clone of its
/// parent's, with the same filesystem UUID, and XFS refuses a second mount of a UUID
/// otherwise. (A fresh UUID would need `xfs_admin -U`, which refuses a clone taken from a
/// frozen filesystem until its log is replayed by a mount.) One image per uid, mounted only
/// where `is_mount` says nothing is, so no image is mounted twice.
pub fn mount(image: &Path, at: &Path) -> Result<(), String> {
    let (img, dir) = (image.display().to_string(), at.display().to_string());
    run(
        "mount",
        &["-o", "loop,nosuid,nodev,nouuid", &img, &dir],
        &[],
    )
    .map(|_| ())
}

/// Mounts the worktree image `image` on `at` so that its content belongs to `uid`: plainly
/// when the image's disk owner is `uid` (or it has none recorded), else through an idmapped
/// mount that swaps the disk owner and `uid` (a fork's block-level clone; `idmap`).
pub fn mount_as(image: &Path, at: &Path, uid: u32) -> Result<(), String> {
    let owner = idmap::disk_owner(image);
    let Some(disk_uid) = owner.filter(|&d| d != uid) else {
        return mount(image, at);
    };
    let stage = image.with_file_name(format!(".idmap-{uid}"));
    // What a crash between the two mounts left.
    if is_mount(&stage) {
        let _ = nix::mount::umount2(&stage, nix::mount::MntFlags::MNT_DETACH);
    }
    std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
    mount(image, &stage)?;
    let moved = idmap::move_swapped(&stage, at, disk_uid, uid);
    if moved.is_err() && is_mount(&stage) {
        let _ = nix::mount::umount2(&stage, nix::mount::MntFlags::MNT_DETACH);
    }
    let _ = std::fs::remove_dir(&stage);
    moved?;
    info!(at = %at.display(), disk_uid, uid, "worktree image mounted with its owner mapped");
    Ok(())
}

/// New image: content copied in through a staging mount, then mounted on the worktree.
fn create(image: &Path, worktree: &Path, uid: u32, bytes: u64) -> Result<(), String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    mkfs(image, bytes, uid)?;
    let meta = std::fs::metadata(worktree).map_err(|e| format!("{}: {e}", worktree.display()))?;
    let stage = worktree.with_file_name(".disk-stage");
    let _ = std::fs::create_dir(&stage);
    let undo = |e: String| {
        let _ = run("umount", &[&stage.display().to_string()], &[]);
        let _ = std::fs::remove_dir(&stage);
        let _ = std::fs::remove_file(image);
        e
    };
    mount(image, &stage).map_err(undo)?;
    let src = format!("{}/.", worktree.display());
    run("cp", &["-a", &src, &stage.display().to_string()], &[]).map_err(|e| {
        undo(format!(
            "the worktree does not fit a disk of {} MiB: {e}",
            bytes >> 20
        ))
    })?;
    nix::unistd::chown(&stage, Some(meta.uid().into()), Some(meta.gid().into()))
        .map_err(|e| undo(e.to_string()))?;
    std::fs::set_permissions(
        &stage,
        std::fs::Permissions::from_mode(meta.mode() & 0o7777),
    )
    .map_err(|e| undo(e.to_string()))?;
    run("umount", &[&stage.display().to_string()], &[]).map_err(undo)?;
    let _ = std::fs::remove_dir(&stage);
    // The copy is on the image; the originals would only be hidden under the mount.
    std::fs::remove_dir_all(worktree).map_err(|e| format!("{}: {e}", worktree.display()))?;
    std::fs::create_dir(worktree).map_err(|e| format!("{}: {e}", worktree.display()))?;
    mount(image, worktree)?;
    info!(worktree = %worktree.display(), uid, size = bytes, "worktree on its own XFS image");
    Ok(())
}

/// The private daemon's data root (images, containers, volumes, build cache, logs) on an
/// XFS image of its own, as large as the worktree's disk, so the disk size bounds what the
/// workspace's containers write too. Made on first use, mounted on `at` when it is not, and
/// grown online (never shrunk) to follow the worktree's disk. Mounted without
/// `nosuid,nodev`: image layers keep their set-id files and overlay whiteouts; everything in
/// it is owned by the workspace's remapped ids, never by host root (`userns-remap`).
pub fn ensure_data(image: &Path, at: &Path, uid: u32, bytes: u64) -> Result<(), String> {
    let bytes = bytes.max(MIN_DISK);
    if !image.exists() {
        mkfs(image, bytes, uid)?;
    }
    if !is_mount(at) {
        std::fs::create_dir_all(at).map_err(|e| format!("{}: {e}", at.display()))?;
        let (img, dir) = (image.display().to_string(), at.display().to_string());
        run("mount", &["-o", "loop", &img, &dir], &[])?;
        info!(at = %dir, size = bytes, "daemon data root on its own XFS image");
    }
    let len = std::fs::metadata(image).map_err(|e| e.to_string())?.len();
    if bytes > len {
        grow(image, at, bytes)?;
    }
    Ok(())
}

/// The size of the filesystem `path` is on, in bytes.
pub fn size_of(path: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    Some(st.blocks() as u64 * st.fragment_size() as u64)
}

/// Makes `dir` (and its parents) and keeps it root's alone (0700): an image holds a whole
/// worktree, readable by anyone who can read the file.
///
/// INVARIANT: every worktree image, data image and snapshot image clone is beneath a 0700
/// root directory (`<state>/disks`, `docker/` of the workspace), so no workspace user reads
/// another's files through its image.
pub fn root_only_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Online growth: extend the sparse image, refresh the loop device, `xfs_growfs`.
fn grow(image: &Path, worktree: &Path, bytes: u64) -> Result<(), String> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(image)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    f.set_len(bytes).map_err(|e| e.to_string())?;
    let w = worktree.display().to_string();
    let dev = run("findmnt", &["-n", "-o", "SOURCE", "--mountpoint", &w], &[])?;
    run("losetup", &["-c", dev.trim()], &[])?;
    run("xfs_growfs", &[&w], &[])?;
    info!(worktree = %w, size = bytes, "worktree disk grown online");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XFS frees a removed file's blocks in the background: right after `rm` of a file that
    /// filled the disk, `statvfs` can still say full (measured here: 3 of 30 tries). A
    /// failed command after such an `rm` must not be taken for a full disk.
    #[test]
    fn a_disk_emptied_just_now_is_not_full() {
        if !nix::unistd::geteuid().is_root() || !have("mkfs.xfs") || !have("losetup") {
            println!("skipped: needs root, xfsprogs and loop devices");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let image = dir.path().join("disks/1.img");
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).expect("mkdir");
        create(&image, &wt, 0, 64 << 20).expect("image");
        let disk = Disk::Images {
            dir: image.parent().expect("parent").to_owned(),
        };
        let mut wrongly_full = 0;
        for _ in 0..30 {
            let big = wt.join("big");
            fill(&big);
            assert!(
                disk.is_full(&wt),
                "writing past the disk fills it: {:?} bytes free",
                usage(&wt).map(|u| u.free_bytes)
            );
            std::fs::remove_file(&big).expect("rm");
            if disk.is_full(&wt) {
                wrongly_full += 1;
            }
        }
        let _ = nix::mount::umount2(&wt, nix::mount::MntFlags::MNT_DETACH);
        assert_eq!(wrongly_full, 0, "an emptied disk read as full");
    }

    /// Writes `path` in small pieces, as `head -c` does, until the filesystem refuses.
    fn fill(path: &Path) {
        use std::io::Write;
        // The previous round's file may still be being freed in the background: a create
        // can meet ENOSPC until the filesystem is synced.
        let mut f = std::fs::File::create(path)
            .or_else(|_| {
                let dir = std::fs::File::open(path.parent().expect("parent"))?;
                let _ = nix::unistd::syncfs(&dir);
                std::fs::File::create(path)
            })
            .expect("create");
        let piece = [0u8; 64 << 10];
        while f.write_all(&piece).is_ok() {}
        let _ = f.sync_all();
    }
}
