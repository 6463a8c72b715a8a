//! Walks a worktree without following symlinks and stages new file contents as blobs.
//!
//! Every directory is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from
//! the root's descriptor and every file relative to its directory's descriptor with
//! `O_NOFOLLOW`, so a workspace user who swaps a directory for a symlink mid-walk cannot
//! make the (root) service read files outside the worktree.
//!
//! Several workers walk directories from a shared queue. A file whose stat data matches
//! the worktree's index ([`super::index`]) keeps its hash without being opened; any other
//! file is read once, hashed with BLAKE3, and written to staging only if no blob has its
//! hash yet.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat, openat2, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};

use super::index::{Index, RACY_MARGIN_NS, Stat};
use super::manifest::{Entry, EntryKind};
use super::{Progress, ProgressFn};
use crate::workspace::error::{WsError, WsResult};

/// Files up to this size are read into memory once, hashed, then written if new; larger
/// ones are hashed while they are copied to staging.
const IN_MEMORY: u64 = 8 << 20;

/// Path of a blob in the store.
pub(super) fn blob_path(blobs: &Path, hash: &str) -> PathBuf {
    blobs.join(&hash[..2]).join(hash)
}

/// Opens the root of a tree for walking.
pub(super) fn open_root(root: &Path) -> WsResult<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(nix::fcntl::AT_FDCWD, root, flags, Mode::empty()).map_err(|e| WsError::errno(root, e))
}

fn stat_of(st: &FileStat) -> Stat {
    Stat::from_parts(
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_size as u64,
        (st.st_mtime, st.st_mtime_nsec),
        (st.st_ctime, st.st_ctime_nsec),
    )
}

/// What a capture found: entries in path order, and what it staged.
#[derive(Default)]
pub(super) struct Walked {
    pub entries: Vec<Entry>,
    pub skipped: Vec<String>,
    /// Staged temp file and the hash it will be stored under.
    pub staged: Vec<(PathBuf, String)>,
    /// Stat data and hash of every file, for the next capture.
    pub index: Vec<(String, Stat, String)>,
    pub counters: Progress,
    pub new_bytes: u64,
    /// Files read and hashed (the rest were recognised by their stat data).
    pub hashed: u64,
}

/// The inputs of one capture.
pub(super) struct Walker<'a> {
    pub blobs: &'a Path,
    pub staging: &'a Path,
    pub index: Option<&'a Index>,
    /// Used only without an index: hashes of files with the same size and mtime.
    pub previous: HashMap<&'a str, &'a EntryKind>,
    pub previous_at_ns: i64,
    pub delay: Option<Duration>,
    pub progress: ProgressFn<'a>,
}

struct Shared {
    /// Directories still to walk, and how many are being walked.
    queue: Mutex<(Vec<String>, usize)>,
    wake: Condvar,
    failed: AtomicBool,
    error: Mutex<Option<WsError>>,
    staged_set: Mutex<HashSet<String>>,
    next_tmp: AtomicU64,
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Walker<'_> {
    /// Walks the tree open at `root` with several workers.
    pub fn run(&self, root: &OwnedFd) -> WsResult<Walked> {
        let shared = Shared {
            queue: Mutex::new((vec![String::new()], 0)),
            wake: Condvar::new(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            staged_set: Mutex::new(HashSet::new()),
            next_tmp: AtomicU64::new(0),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        };
        let parts: Vec<Option<Walked>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..super::par::workers())
                .map(|_| s.spawn(|| self.worker(root, &shared)))
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        if parts.iter().any(Option::is_none) {
            shared.failed.store(true, Ordering::Relaxed);
        }
        let parts = parts.into_iter().flatten();
        if let Ok(Some(e)) = shared.error.into_inner() {
            return Err(e);
        }
        if shared.failed.load(Ordering::Relaxed) {
            return Err(WsError::Internal("a capture worker panicked".into()));
        }
        let mut out = Walked::default();
        for p in parts {
            out.entries.extend(p.entries);
            out.skipped.extend(p.skipped);
            out.staged.extend(p.staged);
            out.index.extend(p.index);
            out.counters.files += p.counters.files;
            out.counters.bytes += p.counters.bytes;
            out.new_bytes += p.new_bytes;
            out.hashed += p.hashed;
        }
        // Byte order puts every directory before its children.
        out.entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        out.skipped.sort();
        Ok(out)
    }

    fn worker(&self, root: &OwnedFd, sh: &Shared) -> Walked {
        let mut out = Walked::default();
        loop {
            let dir = {
                let Ok(mut q) = sh.queue.lock() else {
                    sh.failed.store(true, Ordering::Relaxed);
                    return out;
                };
                loop {
                    if sh.failed.load(Ordering::Relaxed) {
                        return out;
                    }
                    if let Some(d) = q.0.pop() {
                        q.1 += 1;
                        break d;
                    }
                    if q.1 == 0 {
                        return out;
                    }
                    q = match sh.wake.wait(q) {
                        Ok(q) => q,
                        Err(_) => return out,
                    };
                }
            };
            let result = self.walk_dir(root, &dir, sh, &mut out);
            if let Err(e) = result {
                sh.failed.store(true, Ordering::Relaxed);
                if let Ok(mut slot) = sh.error.lock() {
                    slot.get_or_insert(e);
                }
            }
            if let Ok(mut q) = sh.queue.lock() {
                q.1 -= 1;
            }
            sh.wake.notify_all();
        }
    }

    /// Lists one directory (`rel` is "" for the root or ends without a slash).
    fn walk_dir(&self, root: &OwnedFd, rel: &str, sh: &Shared, out: &mut Walked) -> WsResult<()> {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
            .resolve(
                ResolveFlag::RESOLVE_BENEATH
                    | ResolveFlag::RESOLVE_NO_SYMLINKS
                    | ResolveFlag::RESOLVE_NO_MAGICLINKS,
            );
        let dirfd = openat2(root, if rel.is_empty() { "." } else { rel }, how)
            .map_err(|e| WsError::errno(rel, e))?;
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        let mut subdirs = Vec::new();
        for name in crate::workspace::fdnames::names(&dirfd, rel)? {
            let Ok(text) = name.to_str() else {
                out.skipped.push(format!(
                    "{prefix}{} (name is not utf-8)",
                    name.to_string_lossy()
                ));
                continue;
            };
            let path = format!("{prefix}{text}");
            let st = fstatat(&dirfd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(|e| WsError::errno(&path, e))?;
            let mode = st.st_mode & 0o7777;
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFDIR {
                out.entries.push(Entry {
                    path: path.clone(),
                    kind: EntryKind::Dir { mode },
                });
                subdirs.push(path);
            } else if kind == SFlag::S_IFREG {
                self.file(&dirfd, &name, path, stat_of(&st), sh, out)?;
            } else if kind == SFlag::S_IFLNK {
                let target =
                    readlinkat(&dirfd, name.as_c_str()).map_err(|e| WsError::errno(&path, e))?;
                match target.into_string() {
                    Ok(target) => out.entries.push(Entry {
                        path,
                        kind: EntryKind::Symlink { target },
                    }),
                    Err(_) => out
                        .skipped
                        .push(format!("{path} (symlink target is not utf-8)")),
                }
            } else {
                out.skipped.push(format!("{path} (special file)"));
            }
        }
        if !subdirs.is_empty() {
            if let Ok(mut q) = sh.queue.lock() {
                q.0.extend(subdirs);
            }
            sh.wake.notify_all();
        }
        Ok(())
    }

    /// The hash of an unchanged file, from the index (or, without one, the previous manifest).
    fn known(&self, path: &str, st: &Stat) -> Option<String> {
        if let Some(index) = self.index {
            return index.lookup(path, st).map(str::to_string);
        }
        match self.previous.get(path) {
            Some(EntryKind::File {
                size,
                mtime_ns,
                hash,
                ..
            }) if *size == st.size
                && *mtime_ns == st.mtime_ns
                && st.mtime_ns.saturating_add(2 * RACY_MARGIN_NS) < self.previous_at_ns
                && st.ctime_ns.saturating_add(2 * RACY_MARGIN_NS) < self.previous_at_ns
                && blob_path(self.blobs, hash).exists() =>
            {
                Some(hash.clone())
            }
            _ => None,
        }
    }

    fn file(
        &self,
        dirfd: &OwnedFd,
        name: &CString,
        path: String,
        st: Stat,
        sh: &Shared,
        out: &mut Walked,
    ) -> WsResult<()> {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        let (hash, st) = match self.known(&path, &st) {
            Some(hash) => (hash, st),
            None => match self.hash_file(dirfd, name, &path, sh, out)? {
                Some(found) => found,
                None => return Ok(()),
            },
        };
        out.counters.files += 1;
        out.counters.bytes += st.size;
        let files = sh.files.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = sh.bytes.fetch_add(st.size, Ordering::Relaxed) + st.size;
        if files.is_multiple_of(500) {
            (self.progress)(Progress { files, bytes });
        }
        out.index.push((path.clone(), st, hash.clone()));
        out.entries.push(Entry {
            path,
            kind: EntryKind::File {
                mode: st.mode & 0o7777,
                size: st.size,
                hash,
                mtime_ns: st.mtime_ns,
            },
        });
        Ok(())
    }

    /// Reads and hashes one file, staging its content if the store lacks it. Returns the
    /// hash and the stat of what was read, or `None` if the name no longer is a file.
    fn hash_file(
        &self,
        dirfd: &OwnedFd,
        name: &CString,
        path: &str,
        sh: &Shared,
        out: &mut Walked,
    ) -> WsResult<Option<(String, Stat)>> {
        // O_NONBLOCK: a FIFO swapped in after the stat must not hang the capture.
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let fd = openat(dirfd, name.as_c_str(), flags, Mode::empty())
            .map_err(|e| WsError::errno(path, e))?;
        let st = fstat(&fd).map_err(|e| WsError::errno(path, e))?;
        if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
            out.skipped
                .push(format!("{path} (changed type during the snapshot)"));
            return Ok(None);
        }
        let mut st = stat_of(&st);
        let mut src = File::from(fd);
        out.hashed += 1;
        let hash = if st.size <= IN_MEMORY {
            let mut buf = Vec::with_capacity(st.size as usize);
            src.read_to_end(&mut buf)
                .map_err(|e| WsError::io(path, e))?;
            st.size = buf.len() as u64;
            let hash = blake3::hash(&buf).to_hex().to_string();
            if self.claim(&hash, sh) {
                let tmp = self.tmp_name(sh);
                let mut dst = File::create(&tmp).map_err(|e| WsError::io(&tmp, e))?;
                dst.write_all(&buf).map_err(|e| WsError::io(&tmp, e))?;
                out.staged.push((tmp, hash.clone()));
                out.new_bytes += st.size;
            }
            hash
        } else {
            let tmp = self.tmp_name(sh);
            let mut dst = File::create(&tmp).map_err(|e| WsError::io(&tmp, e))?;
            let mut hasher = blake3::Hasher::new();
            let mut buf = vec![0u8; 1 << 20];
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
            st.size = size;
            let hash = hasher.finalize().to_hex().to_string();
            if self.claim(&hash, sh) {
                out.staged.push((tmp, hash.clone()));
                out.new_bytes += size;
            } else {
                std::fs::remove_file(&tmp).map_err(|e| WsError::io(&tmp, e))?;
            }
            hash
        };
        Ok(Some((hash, st)))
    }

    /// True if this capture must store `hash` (no blob has it and no worker staged it).
    fn claim(&self, hash: &str, sh: &Shared) -> bool {
        if blob_path(self.blobs, hash).exists() {
            return false;
        }
        let Ok(mut set) = sh.staged_set.lock() else {
            return true;
        };
        set.insert(hash.to_string())
    }

    fn tmp_name(&self, sh: &Shared) -> PathBuf {
        self.staging
            .join(sh.next_tmp.fetch_add(1, Ordering::Relaxed).to_string())
    }
}
