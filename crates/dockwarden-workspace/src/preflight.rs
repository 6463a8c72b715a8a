//! Checks made before the service starts: workspace users must be able to traverse every
//! directory above their worktree, or each create would fail with an opaque i/o error.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{WsError, WsResult};

/// The first ancestor of `state_dir` (itself excluded: the service sets its mode) that
/// others cannot traverse.
pub fn untraversable_ancestor(state_dir: &Path) -> Option<(PathBuf, u32)> {
    let abs = std::path::absolute(state_dir).ok()?;
    let mut cur = abs.parent();
    while let Some(dir) = cur {
        if let Ok(meta) = std::fs::metadata(dir) {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o001 == 0 {
                return Some((dir.to_path_buf(), mode));
            }
        }
        cur = dir.parent();
    }
    None
}

/// Refuses to start when workspace users (other uids) could not reach their worktrees.
pub fn check_traversable(state_dir: &Path) -> WsResult<()> {
    match untraversable_ancestor(state_dir) {
        None => Ok(()),
        Some((dir, mode)) => Err(WsError::Invalid(format!(
            "workspace users cannot reach `{}`: `{}` has mode {mode:04o}; run `chmod o+x {}` or choose a `--state-dir` under a traversable directory",
            state_dir.display(),
            dir.display(),
            dir.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0700_parent_is_named_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let parent = dir.path().join("private");
        std::fs::create_dir(&parent).expect("mkdir");
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        let msg = check_traversable(&parent.join("state"))
            .expect_err("0700 parent")
            .to_string();
        assert!(msg.contains("mode 0700"), "{msg}");
        assert!(msg.contains("chmod o+x"), "{msg}");
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o711)).expect("chmod");
        let tmp_ok = untraversable_ancestor(&parent.join("state"));
        // The tempdir itself is 0700 too, so the next ancestor up is the one named.
        assert_ne!(tmp_ok.map(|(d, _)| d), Some(parent));
    }
}
