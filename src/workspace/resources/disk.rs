//! The disk axis on this machine: a loop-mounted XFS pool (`mkfs.xfs -m reflink=1`, mounted
//! `prjquota`) at `<state>/workspaces`, one project quota per worktree (project id = the
//! workspace uid). Growing raises the quota, and grows the pool image with `xfs_growfs` when
//! the pool itself is short. The snapshot store (`<state>/snapshots`) is outside the pool.
//!
//! "Full" is read from the filesystem: XFS answers `statfs` on a project directory with the
//! project's quota as the size, so a worktree whose free space is under `FULL_BELOW` is full.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;
use tracing::{info, warn};

use super::config::{PoolMode, ResourcesConfig};

/// A worktree with less free space than this is full.
pub const FULL_BELOW: u64 = 1 << 20;
const XFS_MAGIC: i64 = 0x5846_5342;

/// Where worktrees' disk is enforced, or why it is not.
#[derive(Debug, Clone)]
pub enum Disk {
    Pool { mount: PathBuf, image: PathBuf },
    NotEnforced { reason: String },
}

/// Size, use and free space of one worktree, as the filesystem reports them.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskUsage {
    pub size_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
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

fn is_xfs_mount(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let xfs = nix::sys::statfs::statfs(dir)
        .map(|s| s.filesystem_type().0 as i64 == XFS_MAGIC)
        .unwrap_or(false);
    let own_dev = match (std::fs::metadata(dir), dir.parent().map(std::fs::metadata)) {
        (Ok(d), Some(Ok(p))) => d.dev() != p.dev(),
        _ => false,
    };
    xfs && own_dev
}

/// Statfs of a path: (size, used, free) in bytes.
pub fn usage(path: &Path) -> Option<DiskUsage> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = s.fragment_size() as u64;
    let size = s.blocks() as u64 * frag;
    let free = s.blocks_available() as u64 * frag;
    Some(DiskUsage {
        size_bytes: size,
        used_bytes: size.saturating_sub(s.blocks_free() as u64 * frag),
        free_bytes: free,
    })
}

impl Disk {
    /// Sets up (or finds again) the pool at `<state>/workspaces` as `cfg` asks; any reason
    /// it cannot be used leaves the disk axis not enforced, and the service still runs.
    pub fn open(state_dir: &Path, cfg: &ResourcesConfig) -> Disk {
        let not = |reason: String| Disk::NotEnforced { reason };
        if cfg.pool == PoolMode::Off {
            return not("the disk pool is off (`[disk] pool = \"off\"`)".into());
        }
        match Self::try_open(state_dir, cfg.pool_size) {
            Ok(d) => d,
            Err(reason) if cfg.pool == PoolMode::On => {
                warn!(%reason, "disk pool requested but unavailable");
                not(reason)
            }
            Err(reason) => not(reason),
        }
    }

    fn try_open(state_dir: &Path, pool_size: u64) -> Result<Disk, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("the service is not root: no loop device or project quota".into());
        }
        let mount = state_dir.join("workspaces");
        let image = state_dir.join("disk-pool.img");
        std::fs::create_dir_all(&mount).map_err(|e| format!("{}: {e}", mount.display()))?;
        if is_xfs_mount(&mount) {
            return Ok(Disk::Pool { mount, image });
        }
        let busy = std::fs::read_dir(&mount).map(|mut d| d.next().is_some()).unwrap_or(true);
        if busy {
            return Err("worktrees already exist on the state directory's filesystem".into());
        }
        if !image.exists() {
            let f = std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
            f.set_len(pool_size).map_err(|e| format!("{}: {e}", image.display()))?;
            let img = image.display().to_string();
            if let Err(e) = run("mkfs.xfs", &["-q", "-m", "reflink=1", &img]) {
                let _ = std::fs::remove_file(&image);
                return Err(e);
            }
        }
        let (img, dir) = (image.display().to_string(), mount.display().to_string());
        run("mount", &["-o", "loop,prjquota", &img, &dir])?;
        info!(pool = %dir, "worktrees on an XFS pool with project quotas");
        Ok(Disk::Pool { mount, image })
    }

    pub fn enforced(&self) -> bool {
        matches!(self, Disk::Pool { .. })
    }

    /// Gives `worktree` project `project` with a hard limit of `bytes`, growing the pool
    /// first when it has less free space than the quota may claim.
    pub fn set_quota(&self, worktree: &Path, project: u32, bytes: u64) -> Result<(), String> {
        let Disk::Pool { mount, image } = self else {
            return Err("disk is not enforced".into());
        };
        let used = usage(worktree).map(|u| u.used_bytes).unwrap_or(0);
        ensure_room(mount, image, bytes.saturating_sub(used))?;
        let m = mount.display().to_string();
        let p = project.to_string();
        let w = worktree.display().to_string();
        run("xfs_quota", &["-x", "-c", &format!("project -s -p {w} {p}"), &m])?;
        let kib = bytes.div_ceil(1024);
        run("xfs_quota", &["-x", "-c", &format!("limit -p bhard={kib}k {p}"), &m])?;
        Ok(())
    }

    /// Whether the worktree's filesystem (its project quota) is full.
    pub fn is_full(&self, worktree: &Path) -> bool {
        self.enforced() && usage(worktree).is_some_and(|u| u.free_bytes < FULL_BELOW)
    }

    /// Removes the project's quota limit (the directory goes with the workspace).
    pub fn clear_quota(&self, project: u32) {
        if let Disk::Pool { mount, .. } = self {
            let m = mount.display().to_string();
            let _ = run("xfs_quota", &["-x", "-c", &format!("limit -p bhard=0 {project}"), &m]);
        }
    }
}

/// Grows the pool (sparse image, `losetup -c`, `xfs_growfs`) so it has `needed` bytes free.
fn ensure_room(mount: &Path, image: &Path, needed: u64) -> Result<(), String> {
    let Some(u) = usage(mount) else {
        return Err(format!("cannot statfs {}", mount.display()));
    };
    if u.free_bytes >= needed {
        return Ok(());
    }
    let grow = (needed - u.free_bytes).max(u.size_bytes / 4);
    let len = std::fs::metadata(image).map_err(|e| e.to_string())?.len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(image)
        .map_err(|e| format!("{}: {e}", image.display()))?;
    f.set_len(len + grow).map_err(|e| e.to_string())?;
    let m = mount.display().to_string();
    let dev = run("findmnt", &["-n", "-o", "SOURCE", &m])?;
    run("losetup", &["-c", dev.trim()])?;
    run("xfs_growfs", &[&m])?;
    info!(pool = %m, grown_by = grow, "disk pool grown");
    Ok(())
}
