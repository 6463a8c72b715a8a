//! The pin directory and the mounts in it: root-only checks, pin targets, the bind mount of a
//! descriptor, and `/proc/self/mountinfo`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use dockwarden_sys::mountinfo;
use nix::mount::{MntFlags, MsFlags};

use super::pins::PinError;

/// The pin directory and every ancestor must be root's and not writable by others (a sticky
/// directory such as `/tmp` aside), or the workspace user could swap a pin for a symlink.
pub(super) fn check_root_only(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    for a in dir.ancestors() {
        let m = std::fs::symlink_metadata(a)?;
        let writable_by_others = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
        if m.file_type().is_symlink()
            || m.uid() != 0
            || (a == dir && m.mode() & 0o077 != 0)
            || writable_by_others
        {
            return Err(std::io::Error::other(format!(
                "`{}` must be a directory owned by root and writable only by root",
                a.display()
            )));
        }
    }
    Ok(())
}

/// Creates the pin directory (mode 0700) if needed and checks it is root's alone.
pub(super) fn ensure_dir(dir: &Path) -> Result<(), PinError> {
    let io = |source| PinError::Dir {
        path: dir.display().to_string(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io)?;
    let meta = std::fs::symlink_metadata(dir).map_err(io)?;
    if !meta.is_dir() {
        return Err(io(std::io::Error::other("not a directory")));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
    check_root_only(dir).map_err(io)
}

/// A new, empty mount target of the pinned object's type.
pub(super) fn create_target(target: &Path, is_dir: bool) -> std::io::Result<()> {
    if is_dir {
        std::fs::DirBuilder::new().mode(0o700).create(target)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(target)
            .map(drop)
    }
}

/// Bind-mounts the descriptor onto its target, remounts it `nosuid,nodev` (keeping `ro` and
/// `noexec` of the source's mount), then makes the pin mount private so nothing mounted
/// beneath it later propagates. The daemon's (r)bind of the pin copies those flags into the
/// container: a setuid-root file or device node a container leaves in the bind grants nothing
/// through the pin.
pub(super) fn mount_pin(fd: &OwnedFd, target: &Path) -> std::io::Result<()> {
    let src = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    nix::mount::mount(
        Some(&src),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )?;
    let harden = || -> nix::Result<()> {
        nix::mount::mount(
            None::<&str>,
            target,
            None::<&str>,
            remount_flags(target)?,
            None::<&str>,
        )?;
        nix::mount::mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_PRIVATE,
            None::<&str>,
        )
    };
    if let Err(e) = harden() {
        let _ = nix::mount::umount2(target, MntFlags::MNT_DETACH);
        return Err(e.into());
    }
    Ok(())
}

/// `MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV`, plus the per-mount flags the new bind
/// already has that a bind remount would otherwise drop (`ro`, `noexec`; atime flags are kept
/// by the kernel).
fn remount_flags(target: &Path) -> nix::Result<MsFlags> {
    use nix::sys::statvfs::FsFlags;
    let have = nix::sys::statvfs::statvfs(target)?.flags();
    let mut f = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if have.contains(FsFlags::ST_RDONLY) {
        f |= MsFlags::MS_RDONLY;
    }
    if have.contains(FsFlags::ST_NOEXEC) {
        f |= MsFlags::MS_NOEXEC;
    }
    Ok(f)
}

/// Removes an (unmounted) pin target: `rmdir` or `unlink`, never a recursive delete.
pub(super) fn remove_target(path: &Path, is_dir: bool) {
    let r = if is_dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(pin = %path.display(), "removing pin target: {e}")
        }
        _ => {}
    }
}

/// Mount points directly inside `dir`, from `/proc/self/mountinfo`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    mountinfo::children(&mountinfo::own(), dir)
        .into_iter()
        .map(|p| p.display().to_string())
        .collect()
}
