//! Space kept back for closing transitions on a full disk: a file of zeros beside the
//! state database, given up when a journal row could otherwise not be removed, and taken
//! again once the disk has room.
//!
//! Without it a full disk leaves a journal row behind (SQLite needs room in its WAL to
//! delete a row), and the workspace can then neither be stopped nor cleaned up.

use std::io::Write;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::workspace::error::free_bytes;

/// Enough for many small transactions in the WAL.
pub const RESERVE_BYTES: u64 = 4 * 1024 * 1024;

/// The reserve file of one state directory.
#[derive(Debug)]
pub struct Reserve {
    path: PathBuf,
}

impl Reserve {
    pub fn new(path: &Path) -> Self {
        Reserve {
            path: path.to_path_buf(),
        }
    }

    /// True when the reserve is held.
    pub fn held(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= RESERVE_BYTES)
    }

    /// Takes the reserve again if it is missing and the disk has room for it and more.
    pub fn ensure(&self) {
        if self.held() || free_bytes(&self.path) < RESERVE_BYTES.saturating_mul(2) {
            return;
        }
        // Real blocks, not a sparse file: `set_len` would reserve nothing.
        let chunk = vec![0u8; 64 * 1024];
        let written = std::fs::File::create(&self.path).and_then(|mut f| {
            for _ in 0..RESERVE_BYTES / chunk.len() as u64 {
                f.write_all(&chunk)?;
            }
            f.sync_all()
        });
        if let Err(e) = written {
            warn!(path = %self.path.display(), error = %e, "could not take the space reserve");
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Gives the reserve up; true if there was one to give.
    pub fn release(&self) -> bool {
        let had = std::fs::remove_file(&self.path).is_ok();
        if had {
            info!(path = %self.path.display(), "disk full: released the space reserve");
        }
        had
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_taken_released_and_taken_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Reserve::new(&dir.path().join("reserve"));
        r.ensure();
        assert!(r.held());
        assert!(r.release());
        assert!(!r.held());
        assert!(!r.release(), "nothing left to release");
        r.ensure();
        assert!(r.held());
    }
}
