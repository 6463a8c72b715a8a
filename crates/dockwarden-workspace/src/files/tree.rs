//! Directory listing and recursive removal through descriptors (never following symlinks).

use std::ffi::CStr;
use std::os::fd::OwnedFd;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use super::ops::{FileInfo, info_of};
use super::resolve::map_errno;
use crate::error::{WsError, WsResult};

/// Lists the directory open at `fd`, whose path is `rel`.
pub(super) fn list(fd: &OwnedFd, rel: &str) -> WsResult<Vec<FileInfo>> {
    let mut out = Vec::new();
    for name in crate::fdnames::names(fd, rel)? {
        let shown = name.to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            shown.clone()
        } else {
            format!("{rel}/{shown}")
        };
        match fstatat(fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => out.push(info_of(&shown, &path, &st)),
            Err(Errno::ENOENT) => {} // removed while listing
            Err(e) => return Err(WsError::errno(&path, e)),
        }
    }
    Ok(out)
}

/// Removes `name` in `parent`; directories only with `recursive`.
pub(super) fn remove(parent: &OwnedFd, name: &CStr, shown: &str, recursive: bool) -> WsResult<()> {
    match unlinkat(parent, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) => return Ok(()),
        Err(Errno::EISDIR) => {}
        Err(e) => return Err(map_errno(shown, e)),
    }
    if recursive {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let dir = openat(parent, name, flags, Mode::empty()).map_err(|e| map_errno(shown, e))?;
        for child in crate::fdnames::names(&dir, shown)? {
            let child_shown = format!("{shown}/{}", child.to_string_lossy());
            remove(&dir, &child, &child_shown, true)?;
        }
    }
    unlinkat(parent, name, UnlinkatFlags::RemoveDir).map_err(|e| map_errno(shown, e))
}
