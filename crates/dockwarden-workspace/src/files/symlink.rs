//! The symlink rule of file calls: no symlink is ever followed. A symlink in a parent
//! component refuses the call; as the last component, `info`, `exists`, `remove` and
//! `rename` act on the link itself (lstat semantics) and reads, lists and copies refuse it.
//! Refusals name the component that is a symlink.

use std::os::fd::OwnedFd;

use nix::fcntl::AtFlags;
use nix::sys::stat::{SFlag, fstatat};

use crate::error::WsError;

/// The first component of `rel` (cleaned) that is a symlink, as a worktree path.
pub(super) fn first_symlink(root: &OwnedFd, rel: &str) -> Option<String> {
    let mut done = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        done = if done.is_empty() {
            part.to_string()
        } else {
            format!("{done}/{part}")
        };
        let st = fstatat(root, done.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK {
            return Some(done);
        }
    }
    None
}

/// The error for a resolution that met a symlink in `rel`; `InvalidPath` if none is found
/// (the tree changed meanwhile, or a magic link).
pub(super) fn refusal(root: &OwnedFd, rel: &str) -> WsError {
    match first_symlink(root, rel) {
        Some(link) => WsError::Symlink {
            path: rel.to_string(),
            link,
        },
        None => WsError::InvalidPath(rel.to_string()),
    }
}
