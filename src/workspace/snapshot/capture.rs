//! Walks a worktree without following symlinks and stages new file contents as blobs.
//!
//! Every directory and file is opened relative to its parent's descriptor with
//! `O_NOFOLLOW`, so a workspace user who swaps a directory for a symlink mid-walk cannot
//! make the (root) service read files outside the worktree.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use sha2::{Digest, Sha256};

use super::manifest::{Entry, EntryKind, hex};
use super::{Progress, ProgressFn};
use crate::workspace::error::{WsError, WsResult};

/// Files modified this close to the previous capture are re-read (racy timestamps).
const RACY_MARGIN_NS: i64 = 200_000_000;

/// State of one capture in progress.
pub(super) struct Walker<'a> {
    pub blobs: &'a Path,
    pub staging: PathBuf,
    pub previous: HashMap<&'a str, &'a EntryKind>,
    pub previous_at_ns: i64,
    pub delay: Option<Duration>,
    pub progress: ProgressFn<'a>,
    pub entries: Vec<Entry>,
    pub skipped: Vec<String>,
    /// Staged temp file and the hash it will be stored under.
    pub staged: Vec<(PathBuf, String)>,
    pub staged_set: HashSet<String>,
    pub counters: Progress,
    pub new_bytes: u64,
}

/// Path of a blob in the store.
pub(super) fn blob_path(blobs: &Path, sha: &str) -> PathBuf {
    blobs.join(&sha[..2]).join(sha)
}

fn open_dir(dirfd: &OwnedFd, name: &CString, shown: &str) -> WsResult<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(dirfd, name.as_c_str(), flags, Mode::empty()).map_err(|e| WsError::errno(shown, e))
}

/// Opens the root of a tree for walking.
pub(super) fn open_root(root: &Path) -> WsResult<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(nix::fcntl::AT_FDCWD, root, flags, Mode::empty()).map_err(|e| WsError::errno(root, e))
}

impl Walker<'_> {
    /// Walks the directory `dirfd`, whose entries are named `prefix` + name.
    pub fn walk(&mut self, dirfd: &OwnedFd, prefix: &str) -> WsResult<()> {
        for name in crate::workspace::fdnames::names(dirfd, prefix)? {
            let Ok(text) = name.to_str() else {
                self.skipped.push(format!(
                    "{prefix}{} (name is not utf-8)",
                    name.to_string_lossy()
                ));
                continue;
            };
            let path = format!("{prefix}{text}");
            let st = fstatat(dirfd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| WsError::errno(&path, e))?;
            let mode = st.st_mode & 0o7777;
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFDIR {
                self.entries.push(Entry {
                    path: path.clone(),
                    kind: EntryKind::Dir { mode },
                });
                let child = open_dir(dirfd, &name, &path)?;
                self.walk(&child, &format!("{path}/"))?;
            } else if kind == SFlag::S_IFREG {
                let mtime_ns = st
                    .st_mtime
                    .saturating_mul(1_000_000_000)
                    .saturating_add(st.st_mtime_nsec);
                self.file(dirfd, &name, path, mode, st.st_size as u64, mtime_ns)?;
            } else if kind == SFlag::S_IFLNK {
                let target =
                    readlinkat(dirfd, name.as_c_str()).map_err(|e| WsError::errno(&path, e))?;
                match target.into_string() {
                    Ok(target) => self.entries.push(Entry {
                        path,
                        kind: EntryKind::Symlink { target },
                    }),
                    Err(_) => self
                        .skipped
                        .push(format!("{path} (symlink target is not utf-8)")),
                }
            } else {
                self.skipped.push(format!("{path} (special file)"));
            }
        }
        Ok(())
    }

    fn cached(&self, path: &str, size: u64, mtime_ns: i64) -> Option<String> {
        match self.previous.get(path) {
            Some(EntryKind::File {
                size: s,
                mtime_ns: m,
                sha256,
                ..
            }) if *s == size
                && *m == mtime_ns
                && mtime_ns + RACY_MARGIN_NS < self.previous_at_ns
                && blob_path(self.blobs, sha256).exists() =>
            {
                Some(sha256.clone())
            }
            _ => None,
        }
    }

    fn file(
        &mut self,
        dirfd: &OwnedFd,
        name: &CString,
        path: String,
        mode: u32,
        size: u64,
        mtime_ns: i64,
    ) -> WsResult<()> {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        let (sha256, size) = match self.cached(&path, size, mtime_ns) {
            Some(sha) => (sha, size),
            None => self.stage(dirfd, name, &path)?,
        };
        self.counters.files += 1;
        self.counters.bytes += size;
        if self.counters.files.is_multiple_of(500) {
            (self.progress)(self.counters);
        }
        self.entries.push(Entry {
            path,
            kind: EntryKind::File {
                mode,
                size,
                sha256,
                mtime_ns,
            },
        });
        Ok(())
    }

    /// Copies the file into the staging area while hashing it.
    fn stage(&mut self, dirfd: &OwnedFd, name: &CString, path: &str) -> WsResult<(String, u64)> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(dirfd, name.as_c_str(), flags, Mode::empty())
            .map_err(|e| WsError::errno(path, e))?;
        let mut src = File::from(fd);
        let tmp = self.staging.join(self.staged.len().to_string());
        let mut dst = File::create(&tmp).map_err(|e| WsError::io(&tmp, e))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = src.read(&mut buf).map_err(|e| WsError::io(path, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            dst.write_all(&buf[..n]).map_err(|e| WsError::io(&tmp, e))?;
            size += n as u64;
        }
        let sha = hex(&hasher.finalize());
        if self.staged_set.contains(&sha) || blob_path(self.blobs, &sha).exists() {
            std::fs::remove_file(&tmp).map_err(|e| WsError::io(&tmp, e))?;
        } else {
            self.staged_set.insert(sha.clone());
            self.staged.push((tmp, sha.clone()));
            self.new_bytes += size;
        }
        Ok((sha, size))
    }
}
