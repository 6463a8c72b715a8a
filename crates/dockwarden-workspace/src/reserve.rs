//! Space kept back for closing transitions on a full disk: chunks of zeros in
//! `<state>/space.reserve/`, given up one at a time when a journal row or a stop could
//! otherwise not be recorded, and taken again once the disk has room.
//!
//! Without it a full disk leaves a journal row behind (SQLite needs room in its WAL to
//! delete a row), and the workspace can then neither be stopped nor cleaned up. Chunks,
//! not one file: what one release frees may be taken by a workspace still writing, and the
//! next transition still finds a chunk to give up.

use std::io::Write;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::error::free_bytes;

/// Each chunk holds many small transactions' WAL frames.
pub const CHUNK_BYTES: u64 = 1024 * 1024;
pub const CHUNKS: usize = 4;

/// The reserve of one state directory.
#[derive(Debug)]
pub struct Reserve {
    dir: PathBuf,
}

impl Reserve {
    pub fn new(dir: &Path) -> Self {
        Reserve {
            dir: dir.to_path_buf(),
        }
    }

    fn chunk(&self, i: usize) -> PathBuf {
        self.dir.join(format!("chunk-{i}"))
    }

    fn has(&self, i: usize) -> bool {
        std::fs::metadata(self.chunk(i)).is_ok_and(|m| m.len() >= CHUNK_BYTES)
    }

    /// How many chunks are held.
    pub fn held(&self) -> usize {
        (0..CHUNKS).filter(|i| self.has(*i)).count()
    }

    /// Takes missing chunks again while the disk has room for them and as much again.
    pub fn ensure(&self) {
        if self.held() == CHUNKS {
            return;
        }
        let _ = std::fs::create_dir_all(&self.dir);
        for i in (0..CHUNKS).filter(|i| !self.has(*i)) {
            if free_bytes(&self.dir) < CHUNK_BYTES.saturating_mul(2) {
                return;
            }
            if let Err(e) = write_chunk(&self.chunk(i)) {
                warn!(path = %self.dir.display(), error = %e, "could not take the space reserve");
                let _ = std::fs::remove_file(self.chunk(i));
                return;
            }
        }
    }

    /// Gives one chunk up; true if there was one to give.
    pub fn release(&self) -> bool {
        let Some(i) = (0..CHUNKS).rev().find(|i| self.chunk(*i).exists()) else {
            return false;
        };
        let had = std::fs::remove_file(self.chunk(i)).is_ok();
        if had {
            info!(path = %self.dir.display(), "disk full: released a chunk of the space reserve");
        }
        had
    }
}

/// Real blocks, not a sparse file: `set_len` would reserve nothing.
fn write_chunk(path: &Path) -> std::io::Result<()> {
    let block = vec![0u8; 64 * 1024];
    let mut f = std::fs::File::create(path)?;
    for _ in 0..CHUNK_BYTES / block.len() as u64 {
        f.write_all(&block)?;
    }
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_given_up_chunk_by_chunk_and_taken_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = Reserve::new(&dir.path().join("space.reserve"));
        r.ensure();
        assert_eq!(r.held(), CHUNKS);
        for left in (0..CHUNKS).rev() {
            assert!(r.release());
            assert_eq!(r.held(), left);
        }
        assert!(!r.release(), "nothing left to release");
        r.ensure();
        assert_eq!(r.held(), CHUNKS);
    }
}
