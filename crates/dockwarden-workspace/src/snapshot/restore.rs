//! Materialises a manifest into a fresh directory, verifying every blob's checksum.
//!
//! The tree is built in a staging directory beside `dest` (in the service's own directory,
//! where the workspace user cannot write), by several workers, then synced and renamed to
//! `dest` in one step: a crash mid-restore leaves only a staging directory, never a
//! half-restored `dest`, and the next restore to the same place removes it. Every entry's
//! parent must be a directory this restore created, so a tampered manifest cannot write
//! through a symlink. The restore also writes the new tree's stat index, so the capture
//! that follows (a fork's baseline) reuses the hashes instead of reading the tree again.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt, fchown, lchown, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest as _, Sha256};

use super::blob::{self, Kind};
use super::digest::{self, Digest};
use super::index::{self, Stat};
use super::manifest::{Entry, EntryKind, Manifest};
use super::pack::{self, PACK_MAX, PackIndex};
use super::{ProgressFn, par};
use crate::error::{WsError, WsResult};
use dockwarden_policy::path_clean::is_clean_relative;

/// Loose blobs are read (and written) in pieces of this size.
const CHUNK: usize = 1 << 20;

fn corrupt(m: &Manifest, detail: String) -> WsError {
    WsError::CorruptSnapshot {
        id: m.id.clone(),
        detail,
    }
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// The process umask, which `open` applies to a new file's mode.
fn umask() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o777)
}

/// Where a restore into `dest` is staged, and the prefix of leftovers from crashed ones.
fn staging_for(dest: &Path) -> WsResult<(PathBuf, String)> {
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dest
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| WsError::Internal(format!("bad restore target {}", dest.display())))?;
    let prefix = format!(".{name}.restoring-");
    let unique = format!("{prefix}{}-{}", std::process::id(), index::now_ns());
    Ok((parent.join(unique), prefix))
}

/// Removes staging directories of restores into `dest` that a crash interrupted.
fn clear_leftovers(dest: &Path, prefix: &str) {
    let Some(parent) = dest.parent() else { return };
    let Ok(rd) = fs::read_dir(parent) else { return };
    for e in rd.flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(prefix))
        {
            let p = e.path();
            make_writable(&p);
            let _ = fs::remove_dir_all(&p);
        }
    }
}

/// Read-only directories in a leftover would stop its removal.
fn make_writable(dir: &Path) {
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                make_writable(&e.path());
            }
        }
    }
}

/// Where the contents are: loose blobs and packs.
pub(super) struct Objects<'a> {
    pub blobs: &'a Path,
    pub packs_dir: &'a Path,
    pub packs: &'a PackIndex,
}

/// Restores `m` into `dest` (which must not exist yet) and records its stat index in
/// `index_dir`.
pub(super) fn restore(
    m: &Manifest,
    store: &Objects<'_>,
    index_dir: &Path,
    dest: &Path,
    owner: Option<(u32, u32)>,
    progress: ProgressFn<'_>,
) -> WsResult<()> {
    // Check the whole manifest before writing anything.
    let mut dirs: HashSet<&str> = HashSet::from([""]);
    let mut levels: Vec<Vec<(&str, u32, i64)>> = Vec::new();
    let mut leaves = Vec::new();
    for e in &m.entries {
        if !is_clean_relative(&e.path) || !dirs.contains(parent_of(&e.path)) {
            return Err(corrupt(
                m,
                format!("entry `{}` is outside the tree", e.path),
            ));
        }
        match &e.kind {
            EntryKind::Dir { mode, mtime_ns } => {
                dirs.insert(e.path.as_str());
                let depth = e.path.matches('/').count();
                if levels.len() <= depth {
                    levels.resize_with(depth + 1, Vec::new);
                }
                levels[depth].push((e.path.as_str(), *mode, *mtime_ns));
            }
            EntryKind::File { .. } | EntryKind::Symlink { .. } => leaves.push(e),
        }
    }
    if fs::symlink_metadata(dest).is_ok() {
        return Err(WsError::io(dest, std::io::ErrorKind::AlreadyExists.into()));
    }
    let (staging, prefix) = staging_for(dest)?;
    clear_leftovers(dest, &prefix);
    fs::create_dir(&staging).map_err(|e| WsError::io(&staging, e))?;
    let built = build(
        m, store, index_dir, &staging, &levels, &leaves, owner, progress,
    );
    let renamed = built.and_then(|()| {
        nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            &staging,
            nix::fcntl::AT_FDCWD,
            dest,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| WsError::errno(dest, e))
    });
    if let Err(e) = renamed {
        make_writable(&staging);
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(parent)
        .and_then(|d| d.sync_all())
        .map_err(|e| WsError::io(parent, e))
}

/// Builds the whole tree in `staging`, synced, with its index recorded.
#[allow(clippy::too_many_arguments)]
fn build(
    m: &Manifest,
    store: &Objects<'_>,
    index_dir: &Path,
    staging: &Path,
    levels: &[Vec<(&str, u32, i64)>],
    leaves: &[&Entry],
    owner: Option<(u32, u32)>,
    progress: ProgressFn<'_>,
) -> WsResult<()> {
    fs::set_permissions(staging, fs::Permissions::from_mode(0o700))
        .map_err(|e| WsError::io(staging, e))?;
    for level in levels {
        par::for_each(level, 256, |(path, _, _)| {
            let target = staging.join(path);
            fs::create_dir(&target).map_err(|err| WsError::io(&target, err))
        })?;
    }

    let ctx = Ctx {
        m,
        store,
        pack_files: Mutex::new(HashMap::new()),
        cloned: AtomicU64::new(0),
        meter: super::Meter::new(
            progress,
            leaves.iter().fold((0, 0), |(n, b), e| match &e.kind {
                EntryKind::File { size, .. } => (n + 1, b + size),
                _ => (n, b),
            }),
        ),
        staging,
        owner,
        umask: umask(),
        index: Mutex::new(Vec::with_capacity(leaves.len())),
    };
    par::for_each(leaves, 64, |e| ctx.leaf(&e.path, &e.kind))?;

    // Modes and mtimes last and deepest first, so read-only directories do not block their
    // children and nothing written later moves a directory's mtime.
    for level in levels.iter().rev() {
        par::for_each(level, 256, |(path, mode, mtime_ns)| {
            let target = staging.join(path);
            if let Some((uid, gid)) = owner {
                lchown(&target, Some(uid), Some(gid)).map_err(|e| WsError::io(&target, e))?;
            }
            fs::set_permissions(&target, fs::Permissions::from_mode(*mode))
                .map_err(|e| WsError::io(&target, e))?;
            set_mtime(&target, *mtime_ns)
        })?;
    }
    if let Some((uid, gid)) = owner {
        lchown(staging, Some(uid), Some(gid)).map_err(|e| WsError::io(staging, e))?;
    }
    fs::set_permissions(staging, fs::Permissions::from_mode(m.root_mode))
        .map_err(|e| WsError::io(staging, e))?;
    ctx.meter.report();
    tracing::debug!(
        restore.files = ctx.meter.now().files,
        restore.cloned = ctx.cloned.load(Ordering::Relaxed),
        "restore written"
    );

    // Durable before it is in place: a crash after the rename finds a whole tree.
    let dir = File::open(staging).map_err(|e| WsError::io(staging, e))?;
    nix::unistd::syncfs(&dir).map_err(|e| WsError::errno(staging, e))?;
    let root = dir.metadata().map_err(|e| WsError::io(staging, e))?;
    // Nothing but this restore touched the tree before this moment; waiting out the racy
    // margin after the last change lets the next capture trust every entry.
    let files: Vec<_> = ctx.index.into_inner().unwrap_or_default();
    index::settle_racy(files.iter().map(|(_, st, _)| st));
    let mut files = files;
    let _ = index::store_entries(
        &index::path_for(index_dir, root.dev(), root.ino()),
        index::now_ns(),
        &mut files,
    );
    Ok(())
}

/// Sets the mtime of a directory or symlink (not following it); 0 means not recorded.
fn set_mtime(path: &Path, mtime_ns: i64) -> WsResult<()> {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    if mtime_ns == 0 {
        return Ok(());
    }
    let mtime = TimeSpec::from_duration(Duration::from_nanos(mtime_ns.max(0).unsigned_abs()));
    utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &TimeSpec::UTIME_OMIT,
        &mtime,
        UtimensatFlags::NoFollowSymlink,
    )
    .map_err(|e| WsError::errno(path, e))
}

/// Creates a file to restore into, with the permission bits of `mode` (less the umask;
/// `finish_file` sets the rest).
fn create(target: &Path, mode: u32) -> WsResult<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .open(target)
        .map_err(|e| WsError::io(target, e))
}

struct Ctx<'a> {
    m: &'a Manifest,
    store: &'a Objects<'a>,
    /// Files and bytes of the whole manifest, for progress.
    /// Files restored as copy-on-write clones of their blob.
    cloned: AtomicU64,
    /// Packs opened so far, by their number in the pack index.
    pack_files: Mutex<HashMap<u32, Arc<File>>>,
    staging: &'a Path,
    owner: Option<(u32, u32)>,
    umask: u32,
    meter: super::Meter<'a>,
    index: Mutex<Vec<(String, Stat, Digest)>>,
}

/// The content hash of a manifest's version, fed in pieces.
enum Hasher {
    Sha(Sha256),
    Blake(Box<blake3::Hasher>),
}

impl Hasher {
    fn for_version(v: u32) -> Hasher {
        if v == 1 {
            Hasher::Sha(Sha256::new())
        } else {
            Hasher::Blake(Box::new(blake3::Hasher::new()))
        }
    }

    fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Sha(h) => h.update(b),
            Hasher::Blake(h) => {
                h.update(b);
            }
        }
    }

    fn hex(self) -> String {
        match self {
            Hasher::Sha(h) => crate::hex::encode(&h.finalize()),
            Hasher::Blake(h) => crate::hex::encode(h.finalize().as_bytes()),
        }
    }
}

impl Ctx<'_> {
    fn leaf(&self, path: &str, kind: &EntryKind) -> WsResult<()> {
        let target = self.staging.join(path);
        match kind {
            EntryKind::File {
                mode,
                size,
                hash,
                mtime_ns,
            } => {
                let st = self.file(&target, &digest::hex(hash), *size, *mode, *mtime_ns)?;
                if let Ok(mut idx) = self.index.lock() {
                    idx.push((path.to_string(), st, *hash));
                }
                self.meter.file(st.size);
            }
            EntryKind::Symlink {
                target: to,
                mtime_ns,
            } => {
                symlink(to, &target).map_err(|err| WsError::io(&target, err))?;
                if let Some((uid, gid)) = self.owner {
                    lchown(&target, Some(uid), Some(gid))
                        .map_err(|err| WsError::io(&target, err))?;
                }
                set_mtime(&target, *mtime_ns)?;
            }
            EntryKind::Dir { .. } => {}
        }
        Ok(())
    }

    /// Writes one file from its blob, checking the content against the blob's name, with
    /// its mode, owner and mtime; returns its stat data for the index.
    fn file(
        &self,
        target: &Path,
        hash: &str,
        size: u64,
        mode: u32,
        mtime_ns: i64,
    ) -> WsResult<Stat> {
        let m = self.m;
        let packed = (size <= PACK_MAX)
            .then(|| digest::parse(hash).and_then(|h| self.store.packs.get(&h)))
            .flatten();
        if let Some(loc) = packed {
            let data = self.packed(hash, loc)?;
            let mut hasher = Hasher::for_version(m.version);
            hasher.update(&data);
            if hasher.hex() != hash {
                return Err(corrupt(
                    m,
                    format!("packed object `{hash}` fails its checksum"),
                ));
            }
            let mut dst = create(target, mode)?;
            dst.write_all(&data).map_err(|e| WsError::io(target, e))?;
            return self.finish_file(dst, target, mode, mtime_ns);
        }
        let (src_path, kind) = blob::find(self.store.blobs, hash)
            .ok_or_else(|| corrupt(m, format!("blob `{hash}` is missing")))?;
        let src = File::open(&src_path)
            .map_err(|e| corrupt(m, format!("blob `{hash}` unreadable: {e}")))?;
        let mut dst = create(target, mode)?;
        // A raw blob is cloned where the filesystem can (shared extents: nothing written,
        // but what they hold is still read and checked); otherwise it is copied.
        let cloned = kind == Kind::Raw
            && size > PACK_MAX
            && super::clone::try_clone(&dst, &src).map_err(|e| WsError::io(target, e))?;
        let content = blob::reader(src, kind)
            .map_err(|e| corrupt(m, format!("blob `{hash}` unreadable: {e}")))?;
        let sink = (!cloned).then_some((&mut dst, target));
        self.read_checked(hash, size, content, sink)?;
        if cloned {
            self.cloned.fetch_add(1, Ordering::Relaxed);
        }
        self.finish_file(dst, target, mode, mtime_ns)
    }

    /// The one read-and-hash loop of loose blobs: reads `content` to its end (at most one
    /// byte past `size`, so a damaged compressed blob cannot fill the disk), hashing it and
    /// writing it to `sink` if there is one, and fails with `CorruptSnapshot` unless it is
    /// `size` bytes with the hash `hash`.
    fn read_checked(
        &self,
        hash: &str,
        size: u64,
        content: impl Read,
        mut sink: Option<(&mut File, &Path)>,
    ) -> WsResult<()> {
        let m = self.m;
        let mut content = content.take(size.saturating_add(1));
        let mut hasher = Hasher::for_version(m.version);
        let len = usize::try_from(size.saturating_add(1)).map_or(CHUNK, |n| n.min(CHUNK));
        let mut buf = vec![0u8; len];
        let mut read = 0u64;
        loop {
            let n = match content.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(corrupt(m, format!("blob `{hash}` unreadable: {e}"))),
            };
            hasher.update(&buf[..n]);
            read += n as u64;
            if let Some((dst, target)) = sink.as_mut() {
                dst.write_all(&buf[..n])
                    .map_err(|e| WsError::io(*target, e))?;
            }
        }
        if read != size || hasher.hex() != hash {
            return Err(corrupt(m, format!("blob `{hash}` fails its checksum")));
        }
        Ok(())
    }

    /// One packed object's content (not yet checked against its hash).
    fn packed(&self, hash: &str, loc: pack::Loc) -> WsResult<Vec<u8>> {
        let m = self.m;
        let file = {
            let mut open = self
                .pack_files
                .lock()
                .map_err(|_| WsError::Internal("pack files lock poisoned".into()))?;
            match open.get(&loc.pack) {
                Some(f) => f.clone(),
                None => {
                    let name = self
                        .store
                        .packs
                        .names
                        .get(loc.pack as usize)
                        .ok_or_else(|| corrupt(m, format!("no pack for `{hash}`")))?;
                    let path = self.store.packs_dir.join(name);
                    let f = Arc::new(
                        File::open(&path)
                            .map_err(|e| corrupt(m, format!("pack `{name}` unreadable: {e}")))?,
                    );
                    open.insert(loc.pack, f.clone());
                    f
                }
            }
        };
        pack::read_object(&file, loc)
            .map_err(|e| corrupt(m, format!("packed object `{hash}` unreadable: {e}")))
    }

    /// Owner, mode and mtime of a written file; returns its stat data for the index.
    fn finish_file(&self, dst: File, target: &Path, mode: u32, mtime_ns: i64) -> WsResult<Stat> {
        let io = |err| WsError::io(target, err);
        // Owner before mode: a chown clears set-id bits.
        if let Some((uid, gid)) = self.owner {
            fchown(&dst, Some(uid), Some(gid)).map_err(io)?;
        }
        if mode & !0o777 != 0 || mode & self.umask != 0 {
            dst.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(io)?;
        }
        let mtime = UNIX_EPOCH + Duration::from_nanos(u64::try_from(mtime_ns).unwrap_or(0));
        dst.set_modified(mtime).map_err(io)?;
        let md = dst.metadata().map_err(io)?;
        Ok(Stat::from_parts(
            md.dev(),
            md.ino(),
            md.mode(),
            md.size(),
            (md.mtime(), md.mtime_nsec()),
            (md.ctime(), md.ctime_nsec()),
        ))
    }
}
