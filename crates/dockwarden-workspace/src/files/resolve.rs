//! Beneath-the-worktree path resolution with `dockwarden_sys::beneath` (`openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`).
//!
//! INVARIANT: every file operation goes through a descriptor opened here, so `..`, absolute
//! paths and symlinks anywhere in the path fail with `invalid_path` instead of escaping,
//! even if the workspace user changes the tree while the (root) service works on it.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use dockwarden_sys::beneath;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

use crate::error::{WsError, WsResult};

/// Checks a caller's path lexically and returns it cleaned (`""` is the worktree itself).
pub fn clean_rel(path: &str) -> WsResult<String> {
    dockwarden_policy::path_clean::clean_relative_no_dotdot(path)
        .ok_or_else(|| WsError::InvalidPath(path.to_string()))
}

/// Maps a resolution errno to the API's error for `shown`.
pub(super) fn map_errno(shown: &str, e: Errno) -> WsError {
    match e {
        Errno::ELOOP | Errno::EXDEV => WsError::InvalidPath(shown.to_string()),
        Errno::ENOENT => WsError::NoSuchPath(shown.to_string()),
        Errno::ENOTDIR => WsError::Invalid(format!("a parent of `{shown}` is not a directory")),
        Errno::EISDIR => WsError::Invalid(format!("`{shown}` is a directory")),
        Errno::EEXIST => WsError::Invalid(format!("`{shown}` already exists")),
        Errno::ENOTEMPTY => {
            WsError::Invalid(format!("directory `{shown}` is not empty; pass recursive"))
        }
        e => WsError::errno(shown, e),
    }
}

/// Opens the worktree root itself (never through a symlink).
pub(super) fn open_root(worktree: &Path) -> WsResult<OwnedFd> {
    beneath::dir(worktree).map_err(|e| WsError::errno(worktree, e))
}

/// Opens `rel` (already cleaned) beneath `root`.
pub(super) fn open_beneath(
    root: &OwnedFd,
    rel: &str,
    flags: OFlag,
    mode: Mode,
) -> WsResult<OwnedFd> {
    beneath::open(root, Path::new(rel), flags, mode).map_err(|e| match e {
        // `..` and absolute paths never get here (`clean_rel`): a symlink was met.
        Errno::ELOOP | Errno::EXDEV => super::symlink::refusal(root, rel),
        e => map_errno(rel, e),
    })
}

/// What a file of this type is, for messages.
fn kind_name(st: &FileStat) -> &'static str {
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        k if k == SFlag::S_IFDIR => "a directory",
        k if k == SFlag::S_IFLNK => "a symlink",
        k if k == SFlag::S_IFIFO => "a FIFO",
        k if k == SFlag::S_IFSOCK => "a socket",
        k if k == SFlag::S_IFCHR => "a character device",
        k if k == SFlag::S_IFBLK => "a block device",
        _ => "not a file",
    }
}

/// Opens `rel` (already cleaned) beneath `root` for reading, once it is known to be a
/// regular file: opened for reading first, a FIFO would block (a thread per request, for
/// ever) and a device would be opened before its type was seen. `dir_hint` is added to the
/// refusal of a directory.
pub(super) fn open_regular(
    root: &OwnedFd,
    rel: &str,
    dir_hint: &str,
) -> WsResult<(OwnedFd, FileStat)> {
    // O_PATH opens nothing for I/O; a symlink as the last component still fails to resolve.
    let path = open_beneath(root, rel, OFlag::O_PATH, Mode::empty())?;
    let st = fstat(&path).map_err(|e| WsError::errno(rel, e))?;
    let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    if kind != SFlag::S_IFREG {
        let hint = if kind == SFlag::S_IFDIR { dir_hint } else { "" };
        return Err(WsError::Invalid(format!(
            "`{rel}` is {}, not a regular file{hint}",
            kind_name(&st)
        )));
    }
    // INVARIANT: the magic link reopens the inode checked above (a file's type never changes),
    // with no name looked up again; O_NONBLOCK in case that invariant is ever broken.
    let proc = format!("/proc/self/fd/{}", path.as_raw_fd());
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(proc.as_str(), flags, Mode::empty())
        .map_err(|e| WsError::errno(rel, e))?;
    Ok((fd, st))
}

/// Splits a cleaned non-root path into its parent directory and its name. The parent is
/// opened for reading (not `O_PATH`) so that changes in it can be made durable with fsync.
pub(super) fn parent_of(root: &OwnedFd, rel: &str) -> WsResult<(OwnedFd, CString)> {
    let (dir, name) = match rel.rsplit_once('/') {
        Some((d, n)) => (d, n),
        None if rel.is_empty() => {
            return Err(WsError::Invalid(
                "the worktree root cannot be changed".into(),
            ));
        }
        None => ("", rel),
    };
    let fd = open_beneath(
        root,
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        Mode::empty(),
    )?;
    let name = CString::new(name).map_err(|_| WsError::InvalidPath(rel.to_string()))?;
    Ok((fd, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_parent_components_and_absolute_paths() {
        assert!(matches!(clean_rel("../x"), Err(WsError::InvalidPath(_))));
        assert!(matches!(
            clean_rel("a/../../x"),
            Err(WsError::InvalidPath(_))
        ));
        assert!(matches!(
            clean_rel("/etc/passwd"),
            Err(WsError::InvalidPath(_))
        ));
        assert_eq!(clean_rel("./a//b/").ok().as_deref(), Some("a/b"));
        assert_eq!(clean_rel("").ok().as_deref(), Some(""));
    }
}

#[cfg(test)]
mod prop {
    use proptest::prelude::*;

    use super::clean_rel;

    proptest! {
        #[test]
        fn cleaned_paths_never_climb_or_start_at_root(parts in proptest::collection::vec("[a-z.]{0,3}|\\.\\.|/", 0..8)) {
            let path = parts.join("/");
            if let Ok(clean) = clean_rel(&path) {
                prop_assert!(!clean.starts_with('/'));
                prop_assert!(clean.split('/').all(|c| c != ".." && c != "."));
            }
        }
    }
}
