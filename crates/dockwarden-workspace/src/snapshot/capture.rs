//! Walks a worktree without following symlinks and stages new file contents as blobs.
//!
//! Every directory is opened with `dockwarden_sys::beneath` (`openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`) by its name relative to its parent's descriptor (one path
//! component: no walk from the root per directory), and every file relative to its directory's descriptor with `O_NOFOLLOW`, so
//! a workspace user who swaps a directory for a symlink mid-walk cannot make the (root)
//! service read files outside the worktree. Each descriptor was opened beneath one the walk
//! opened before, back to the root. (A directory the user renames out of the worktree
//! mid-walk is read where it went, as a file being read already was: it holds only what
//! the user could have put in the worktree.) Below [`PARENT_FD_DEPTH`] directories are
//! opened from the root by their whole path, so the descriptors a walk holds stay few.
//!
//! Several workers walk directories from a shared queue. A file whose stat data matches
//! the worktree's index ([`super::index`]) keeps its hash without being opened; any other
//! file is read once, hashed with BLAKE3, and written to staging only if no blob has its
//! hash yet.
//!
//! A live tree changes under the walk (build temp files, `.git/index.lock`): an entry that
//! vanishes between listing and reading is left out and counted, and a file whose stat data
//! changes while it is read is read again (up to [`READ_ATTEMPTS`] times) so that what is
//! recorded is one state of the file; both are counted in the result. Timestamps move in
//! coarse ticks, so a file changed less than a second ago must also read the same twice.

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use dockwarden_sys::beneath;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use rustix::fs::FileType;

use std::sync::Arc;

use super::blob::Kind;
use super::digest::{self, Digest};
use super::index::{Cursor, Index, RACY_MARGIN_NS, Stat};
use super::listing::Listing;
use super::manifest::{Entry, EntryKind};
use super::pack::{self, Object, PACK_MAX, PackIndex, PackWriter};
use super::{Progress, ProgressFn};
use crate::error::{WsError, WsResult};

/// Files up to this size are read into memory once, hashed, then written if new; larger
/// ones are hashed while they are copied to staging.
const IN_MEMORY: u64 = 8 << 20;

/// Directories at most this deep keep their descriptor for their subdirectories' opens;
/// deeper ones are opened by their path from the root. Bounds the descriptors a walk holds
/// (about this many per worker: the walk is depth-first).
const PARENT_FD_DEPTH: usize = 24;

/// Linux's `PATH_MAX`, terminating NUL included.
const PATH_MAX: usize = 4096;

/// How often a file that changes while it is read is read again before the last read is
/// recorded as it is (and left out of the stat index, so the next capture reads it again).
pub(super) const READ_ATTEMPTS: u32 = 3;

/// Errors that mean the name is gone or is no longer what the listing saw.
fn vanished(e: Errno) -> bool {
    matches!(e, Errno::ENOENT | Errno::ENOTDIR)
}

/// Errors that mean a name now is a symlink (refused by `O_NOFOLLOW` / `RESOLVE_NO_SYMLINKS`).
fn became_symlink(e: Errno) -> bool {
    matches!(e, Errno::ELOOP | Errno::EXDEV)
}

/// True if two stats of one open file show no change in between.
fn same_state(a: &Stat, b: &Stat) -> bool {
    a.size == b.size && a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns
}

/// True if the file's status changed less than a second ago (its stat cannot vouch that
/// nothing was written during a read: timestamps move in ticks).
fn recently_changed(st: &Stat) -> bool {
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(i64::MAX, |d| {
            i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
        });
    st.ctime_ns.max(st.mtime_ns) > now_ns.saturating_sub(1_000_000_000)
}

/// Opens the root of a tree for walking.
pub(super) fn open_root(root: &Path) -> WsResult<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(nix::fcntl::AT_FDCWD, root, flags, Mode::empty()).map_err(|e| WsError::errno(root, e))
}

pub(super) fn stat_of(st: &FileStat) -> Stat {
    Stat::from_parts(
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_size as u64,
        (st.st_mtime, st.st_mtime_nsec),
        (st.st_ctime, st.st_ctime_nsec),
    )
}

/// What a capture found: entries (in no particular order; each directory before the
/// walk lists it), and what it staged.
#[derive(Default)]
pub(super) struct Walked {
    pub entries: Vec<Entry>,
    /// Beside each entry: the stat data the next capture may trust (settled files only).
    pub stats: Vec<Option<Stat>>,
    /// What one worker found, in its own order.
    found: Vec<(Entry, Option<Stat>)>,
    pub skipped: Vec<String>,
    /// Staged temp file, the hash it will be stored under, and its kind if final (`None`:
    /// raw, compressed at publication where the store compresses).
    pub staged: Vec<(PathBuf, Digest, Option<Kind>)>,
    /// This worker's compression context for packed objects (one per object would cost an
    /// allocation of its work space each time).
    zctx: Option<zstd::bulk::Compressor<'static>>,
    /// Staged packs of small files and their objects.
    pub packs: Vec<(PathBuf, Vec<Object>)>,
    pub counters: Progress,
    pub new_bytes: u64,
    /// Files read and hashed (the rest were recognised by their stat data).
    pub hashed: u64,
    /// Entries listed but gone (or no longer of their type) when read; left out.
    pub vanished: u64,
    /// Files whose content changed while they were read, and were read again.
    pub changed_while_read: u64,
    /// Directories that vanished after their parent listed them: they and everything
    /// under them are left out.
    pub gone_dirs: Vec<String>,
}

/// The inputs of one capture.
pub(super) struct Walker<'a> {
    pub blobs: &'a Path,
    pub packs: &'a PackIndex,
    pub staging: &'a Path,
    pub index: Option<&'a Index>,
    /// Used only without an index: hashes of files with the same size and mtime.
    pub previous: HashMap<&'a str, &'a EntryKind>,
    pub previous_at_ns: i64,
    pub delay: Option<Duration>,
    pub progress: ProgressFn<'a>,
    /// New loose blobs are stored compressed (the store cannot clone): files read into
    /// memory are compressed by the worker that read them.
    pub compress_blobs: bool,
    /// The hashes of the store's loose blobs, listed when first needed (`None`: the
    /// listing failed, and each hash is looked up on disk).
    pub loose: OnceLock<Option<HashSet<Digest>>>,
}

/// A directory still to walk: its path, and its parent's descriptor (none for the root
/// and for directories opened from the root).
struct Pending {
    rel: String,
    parent: Option<Arc<OwnedFd>>,
}

struct Shared<'a> {
    /// Directories still to walk (a stack: depth first), and how many are being walked.
    queue: Mutex<(Vec<Pending>, usize)>,
    wake: Condvar,
    failed: AtomicBool,
    error: Mutex<Option<WsError>>,
    staged_set: Mutex<HashSet<Digest>>,
    pack: Mutex<PackWriter>,
    next_tmp: AtomicU64,
    meter: super::Meter<'a>,
}

impl Walker<'_> {
    /// Walks the tree open at `root` with several workers.
    pub fn run(&self, root: &OwnedFd) -> WsResult<Walked> {
        let shared = Shared {
            queue: Mutex::new((
                vec![Pending {
                    rel: String::new(),
                    parent: None,
                }],
                0,
            )),
            wake: Condvar::new(),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            staged_set: Mutex::new(HashSet::new()),
            pack: Mutex::new(PackWriter::new(self.staging, "pack")),
            next_tmp: AtomicU64::new(0),
            meter: super::Meter::new(self.progress, (0, 0)),
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
        let mut out = Walked {
            packs: shared
                .pack
                .into_inner()
                .map_err(|_| WsError::Internal("pack writer poisoned".into()))?
                .finish()?,
            ..Walked::default()
        };
        let parts: Vec<Walked> = parts.collect();
        // One allocation of the exact size: no growth copies while the workers' lists live.
        let mut found = Vec::with_capacity(parts.iter().map(|p| p.found.len()).sum());
        for p in parts {
            found.extend(p.found);
            out.skipped.extend(p.skipped);
            out.staged.extend(p.staged);
            out.counters.files += p.counters.files;
            out.counters.bytes += p.counters.bytes;
            out.new_bytes += p.new_bytes;
            out.hashed += p.hashed;
            out.vanished += p.vanished;
            out.changed_while_read += p.changed_while_read;
            out.gone_dirs.extend(p.gone_dirs);
        }
        // Left in the workers' order: trees group entries by directory themselves, and the
        // stat index sorts only when it is rewritten.
        if !out.gone_dirs.is_empty() {
            let gone: HashSet<&str> = out.gone_dirs.iter().map(String::as_str).collect();
            let under_gone = |path: &str| {
                gone.contains(path)
                    || path
                        .match_indices('/')
                        .any(|(i, _)| gone.contains(&path[..i]))
            };
            found.retain(|(e, _)| !under_gone(&e.path));
        }
        out.stats = found.iter().map(|(_, st)| *st).collect();
        // Collected in place (the buffer of `found` is reused): no second list of entries.
        out.entries = found.into_iter().map(|(e, _)| e).collect();
        out.skipped.sort();
        Ok(out)
    }

    fn worker(&self, root: &OwnedFd, sh: &Shared) -> Walked {
        let mut out = Walked::default();
        let mut listing = Listing::default();
        // Subdirectories the last directory found, and whether this worker walked one.
        let mut found: Vec<Pending> = Vec::new();
        let mut walked = false;
        loop {
            let dir = {
                let Ok(mut q) = sh.queue.lock() else {
                    sh.failed.store(true, Ordering::Relaxed);
                    sh.wake.notify_all();
                    return out;
                };
                // One lock a directory: hand in what it found, take the next.
                let more = found.len();
                q.0.append(&mut found);
                if walked {
                    q.1 -= 1;
                }
                // This worker takes one of them: wake the others only for the rest.
                if more > 1 {
                    sh.wake.notify_all();
                }
                loop {
                    if sh.failed.load(Ordering::Relaxed) {
                        sh.wake.notify_all();
                        return out;
                    }
                    if let Some(d) = q.0.pop() {
                        q.1 += 1;
                        break d;
                    }
                    if q.1 == 0 {
                        // Nothing queued and nothing being walked: the walk is done.
                        sh.wake.notify_all();
                        return out;
                    }
                    q = match sh.wake.wait(q) {
                        Ok(q) => q,
                        Err(_) => return out,
                    };
                }
            };
            walked = true;
            if let Err(e) = self.walk_dir(root, dir, &mut listing, &mut found, sh, &mut out) {
                sh.failed.store(true, Ordering::Relaxed);
                if let Ok(mut slot) = sh.error.lock() {
                    slot.get_or_insert(e);
                }
            }
        }
    }

    /// Lists one directory (`rel` is "" for the root or ends without a slash).
    /// Its subdirectories go to `subdirs`, and its own entry (from `fstat` of the opened
    /// directory: its parent's listing told its type) to `out`.
    fn walk_dir(
        &self,
        root: &OwnedFd,
        dir: Pending,
        listing: &mut Listing,
        subdirs: &mut Vec<Pending>,
        sh: &Shared,
        out: &mut Walked,
    ) -> WsResult<()> {
        let rel = dir.rel.as_str();
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        // As long as a path the kernel could resolve from the root (and a restore could
        // create): opening by one component would not notice.
        if rel.len() >= PATH_MAX {
            return Err(WsError::errno(rel, Errno::ENAMETOOLONG));
        }
        let opened = match (&dir.parent, rel.rsplit_once('/')) {
            (Some(parent), Some((_, name))) => {
                beneath::open(parent, Path::new(name), flags, Mode::empty())
            }
            (Some(parent), None) => beneath::open(parent, Path::new(rel), flags, Mode::empty()),
            (None, _) => beneath::open(root, Path::new(rel), flags, Mode::empty()),
        };
        drop(dir.parent);
        let dirfd = match opened {
            Ok(fd) => fd,
            Err(e) if !rel.is_empty() && (vanished(e) || became_symlink(e)) => {
                out.vanished += 1;
                out.gone_dirs.push(rel.to_string());
                return Ok(());
            }
            Err(e) => return Err(WsError::errno(rel, e)),
        };
        if !rel.is_empty() {
            let st = fstat(&dirfd).map_err(|e| WsError::errno(rel, e))?;
            out.found.push((
                Entry {
                    path: rel.to_string(),
                    kind: EntryKind::Dir {
                        mode: st.st_mode & 0o7777,
                        mtime_ns: stat_of(&st).mtime_ns,
                    },
                },
                None,
            ));
        }
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        let mut cursor = self.index.map(Index::cursor);
        match listing.read(&dirfd) {
            Ok(()) => {}
            // A directory removed while open lists as ENOENT.
            Err(e) if !rel.is_empty() && e.kind() == std::io::ErrorKind::NotFound => {
                out.vanished += 1;
                out.gone_dirs.push(rel.to_string());
                return Ok(());
            }
            Err(e) => return Err(WsError::io(rel, e)),
        }
        // Shallow directories lend their descriptor to their subdirectories' opens.
        let dirfd = Arc::new(dirfd);
        let lend = rel.matches('/').count() < PARENT_FD_DEPTH;
        for (name, ty) in listing.iter() {
            let Ok(text) = name.to_str() else {
                out.skipped.push(format!(
                    "{prefix}{} (name is not utf-8)",
                    name.to_string_lossy()
                ));
                continue;
            };
            let mut path = String::with_capacity(prefix.len() + text.len());
            path.push_str(&prefix);
            path.push_str(text);
            if ty == FileType::Directory {
                // Its entry is made when it is opened (its stat comes from that descriptor).
                subdirs.push(Pending {
                    rel: path,
                    parent: lend.then(|| Arc::clone(&dirfd)),
                });
                continue;
            }
            let st = match fstatat(&*dirfd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) if vanished(e) => {
                    out.vanished += 1;
                    continue;
                }
                Err(e) => return Err(WsError::errno(&path, e)),
            };
            let mtime_ns = stat_of(&st).mtime_ns;
            let kind = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
            if kind == SFlag::S_IFDIR {
                // No type in the listing (`DT_UNKNOWN`), or it became a directory since.
                subdirs.push(Pending {
                    rel: path,
                    parent: lend.then(|| Arc::clone(&dirfd)),
                });
            } else if kind == SFlag::S_IFREG {
                self.file(&dirfd, name, path, stat_of(&st), &mut cursor, sh, out)?;
            } else if kind == SFlag::S_IFLNK {
                let target = match readlinkat(&*dirfd, name) {
                    Ok(t) => t,
                    // Gone, or replaced by something that is not a symlink.
                    Err(e) if vanished(e) || e == Errno::EINVAL => {
                        out.vanished += 1;
                        continue;
                    }
                    Err(e) => return Err(WsError::errno(&path, e)),
                };
                match target.into_string() {
                    Ok(target) => out.found.push((
                        Entry {
                            path,
                            kind: EntryKind::Symlink { target, mtime_ns },
                        },
                        None,
                    )),
                    Err(_) => out
                        .skipped
                        .push(format!("{path} (symlink target is not utf-8)")),
                }
            } else {
                out.skipped.push(format!("{path} (special file)"));
            }
        }
        Ok(())
    }

    /// The hash of an unchanged file, from the index (or, without one, the previous manifest).
    fn known(&self, path: &str, st: &Stat, cursor: &mut Option<Cursor<'_>>) -> Option<Digest> {
        if let Some(cursor) = cursor {
            return cursor.lookup(path, st);
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
                && self.stored(hash) =>
            {
                Some(*hash)
            }
            _ => None,
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site, in the directory walk; the entry's pieces and the walk's state"
    )]
    fn file(
        &self,
        dirfd: &OwnedFd,
        name: &CStr,
        path: String,
        st: Stat,
        cursor: &mut Option<Cursor<'_>>,
        sh: &Shared,
        out: &mut Walked,
    ) -> WsResult<()> {
        if let Some(d) = self.delay {
            std::thread::sleep(d);
        }
        let (hash, st, settled) = match self.known(&path, &st, cursor) {
            Some(hash) => (hash, st, true),
            None => match self.hash_file(dirfd, name, &path, sh, out)? {
                Some(found) => found,
                None => return Ok(()),
            },
        };
        out.counters.files += 1;
        out.counters.bytes += st.size;
        sh.meter.file(st.size);
        out.found.push((
            Entry {
                path,
                kind: EntryKind::File {
                    mode: st.mode & 0o7777,
                    size: st.size,
                    hash,
                    mtime_ns: st.mtime_ns,
                },
            },
            settled.then_some(st),
        ));
        Ok(())
    }

    /// Reads and hashes one file, staging its content if the store lacks it. Returns the
    /// hash, the stat of what was read and whether it stayed unchanged while read, or `None`
    /// if the name vanished or no longer is a file.
    fn hash_file(
        &self,
        dirfd: &OwnedFd,
        name: &CStr,
        path: &str,
        sh: &Shared,
        out: &mut Walked,
    ) -> WsResult<Option<(Digest, Stat, bool)>> {
        // O_NONBLOCK: a FIFO swapped in after the stat must not hang the capture.
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let fd = match openat(dirfd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if vanished(e) || became_symlink(e) => {
                out.vanished += 1;
                return Ok(None);
            }
            Err(e) => return Err(WsError::errno(path, e)),
        };
        let st = fstat(&fd).map_err(|e| WsError::errno(path, e))?;
        if SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) != SFlag::S_IFREG {
            out.skipped
                .push(format!("{path} (changed type during the snapshot)"));
            return Ok(None);
        }
        let mut src = File::from(fd);
        let mut before = stat_of(&st);
        out.hashed += 1;
        let mut attempt = 1;
        let mut previous: Option<Digest> = None;
        let mut changed = false;
        loop {
            let read = self.read_one(&mut src, path, before.size, sh)?;
            let after = fstat(&src).map_err(|e| WsError::errno(path, e))?;
            let after = stat_of(&after);
            let mut settled = same_state(&before, &after) && read.size == after.size;
            changed |= !settled;
            // File timestamps advance in coarse ticks: a write in the same tick as `before`
            // leaves them unchanged (seen: torn reads with identical stats). A file changed
            // within the last second is settled only when two reads in a row agree.
            if settled && recently_changed(&after) {
                settled = previous == Some(read.hash);
                changed |= previous.is_some() && !settled;
            }
            if settled || attempt == READ_ATTEMPTS {
                if changed {
                    out.changed_while_read += 1;
                }
                let mut st = before;
                st.size = read.size;
                let hash = read.hash;
                self.keep(read, sh, out)?;
                return Ok(Some((hash, st, settled)));
            }
            // Changed while read, or not yet confirmed: drop what was read and read again.
            previous = Some(read.hash);
            if let Some(tmp) = read.tmp {
                std::fs::remove_file(&tmp).map_err(|e| WsError::io(&tmp, e))?;
            }
            use std::io::Seek;
            src.rewind().map_err(|e| WsError::io(path, e))?;
            before = after;
            attempt += 1;
        }
    }

    /// Reads a file once from its start: into memory if small, else hashed while copied to
    /// a staging file. A small file is read up to `size` (its size when opened) and no
    /// further: the caller's `fstat` after the read tells whether it grew or changed.
    fn read_one(&self, src: &mut File, path: &str, size: u64, sh: &Shared) -> WsResult<Read1> {
        if size <= IN_MEMORY {
            let buf = read_sized(src, size as usize).map_err(|e| WsError::io(path, e))?;
            return Ok(Read1 {
                size: buf.len() as u64,
                hash: *blake3::hash(&buf).as_bytes(),
                data: Some(buf),
                tmp: None,
            });
        }
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
        Ok(Read1 {
            size,
            hash: *hasher.finalize().as_bytes(),
            data: None,
            tmp: Some(tmp),
        })
    }

    /// Stages what was read if the store lacks its hash, else drops it.
    fn keep(&self, read: Read1, sh: &Shared, out: &mut Walked) -> WsResult<()> {
        let new = self.claim(&read.hash, sh);
        match (read.data, read.tmp) {
            (_, Some(tmp)) if !new => {
                std::fs::remove_file(&tmp).map_err(|e| WsError::io(&tmp, e))?;
            }
            (_, Some(tmp)) => {
                out.staged.push((tmp, read.hash, None));
                out.new_bytes += read.size;
            }
            (Some(data), None) if new && read.size <= PACK_MAX => {
                let key = read.hash;
                let io = |e| WsError::io(self.staging, e);
                if out.zctx.is_none() {
                    out.zctx = Some(pack::compressor().map_err(io)?);
                }
                let Some(zctx) = out.zctx.as_mut() else {
                    return Err(WsError::Internal("no compression context".into()));
                };
                let frame = zctx.compress(&data).map_err(io)?;
                sh.pack
                    .lock()
                    .map_err(|_| WsError::Internal("pack writer poisoned".into()))?
                    .add(key, &frame, read.size as u32)?;
                out.new_bytes += read.size;
            }
            (Some(data), None) if new => {
                let tmp = self.tmp_name(sh);
                let kind = if self.compress_blobs {
                    super::blob::stage_compressed(&data, &tmp).map_err(|e| WsError::io(&tmp, e))?
                } else {
                    std::fs::write(&tmp, &data).map_err(|e| WsError::io(&tmp, e))?;
                    Kind::Raw
                };
                out.staged.push((tmp, read.hash, Some(kind)));
                out.new_bytes += read.size;
            }
            _ => {}
        }
        Ok(())
    }

    /// True if the store has `hash`, packed or loose. The loose blobs are listed once, when
    /// the first new content is met (a garbage collection cannot remove one meanwhile: it
    /// waits for captures). A blob another capture publishes after the listing is missed:
    /// this one stores the same content again, under the same name.
    fn stored(&self, hash: &Digest) -> bool {
        if self.packs.get(hash).is_some() {
            return true;
        }
        let loose = self.loose.get_or_init(|| {
            super::blob::hashes(self.blobs)
                .inspect_err(|e| tracing::warn!(error = %e, "loose blobs not listed"))
                .ok()
        });
        match loose {
            Some(set) => set.contains(hash),
            None => super::blob::exists(self.blobs, &digest::hex(hash)),
        }
    }

    /// True if this capture must store `hash` (no blob has it and no worker staged it).
    fn claim(&self, hash: &Digest, sh: &Shared) -> bool {
        if self.stored(hash) {
            return false;
        }
        let Ok(mut set) = sh.staged_set.lock() else {
            return true;
        };
        set.insert(*hash)
    }

    fn tmp_name(&self, sh: &Shared) -> PathBuf {
        self.staging
            .join(sh.next_tmp.fetch_add(1, Ordering::Relaxed).to_string())
    }
}

/// One read of a file: its content in memory, or in a staging file.
struct Read1 {
    size: u64,
    hash: Digest,
    data: Option<Vec<u8>>,
    tmp: Option<PathBuf>,
}

/// Reads up to `size` bytes from `src`'s position: fewer only if the file ends first. No
/// zeroed buffer and no size probe (`read_to_end` on a `File` asks `statx` and `lseek` for
/// a size hint, and reads once more to see the end).
fn read_sized(src: &mut File, size: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(size);
    src.take(size as u64).read_to_end(&mut buf)?;
    Ok(buf)
}
