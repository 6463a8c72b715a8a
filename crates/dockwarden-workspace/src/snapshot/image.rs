//! The store's side of whole-image clones (issue 16): when a worktree is its own XFS image,
//! a snapshot keeps a frozen `FICLONE` of that image, and a fork clones it instead of
//! restoring file by file. A block-level clone has the parent's inodes, timestamps and
//! contents on another device, so the stat index carries over with its device rewritten
//! ([`carry_index`]), and a fork needs no content read: its index is written from the
//! snapshot's manifest after its entries are given to the fork's owner ([`adopt_clone`]).

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

use nix::fcntl::AtFlags;
use nix::sys::stat::{FchmodatFlags, Mode, fchmodat, fstatat};
use nix::unistd::{Gid, Uid, fchown, fchownat};

use super::Captured;
use super::capture::open_root;
use super::digest::Digest;
use super::index::{self, Stat};
use super::manifest::{Entry, EntryKind, Manifest};
use super::par;
use crate::error::{WsError, WsResult};

fn root_id(root: &Path) -> WsResult<(u64, u64)> {
    let m = fs::metadata(root).map_err(|e| WsError::io(root, e))?;
    Ok((m.dev(), m.ino()))
}

/// Copies the stat index of the tree at `from` to the tree at `to`, a whole-filesystem
/// clone of it, recorded no later than `recorded_before_ns`; with `moved`, `from`'s index
/// is removed (a clone's mount goes away and its device number is reused). False when
/// `from` had no index.
pub(super) fn carry_index(
    index_dir: &Path,
    from: &Path,
    to: &Path,
    recorded_before_ns: i64,
    moved: bool,
) -> WsResult<bool> {
    let (src, dst) = (root_id(from)?, root_id(to)?);
    let carried = index::carry(index_dir, src, dst, recorded_before_ns)
        .map_err(|e| WsError::io(index_dir, e))?;
    if moved && src != dst {
        let _ = fs::remove_file(index::path_for(index_dir, src.0, src.1));
    }
    Ok(carried)
}

/// What a capture reports for a manifest recorded as it is (a fork's baseline).
pub(super) fn copied(manifest_sha256: String, m: &Manifest) -> Captured {
    let (files, bytes) = m.entries.iter().fold((0, 0), |(n, b), e| match &e.kind {
        EntryKind::File { size, .. } => (n + 1, b + size),
        _ => (n, b),
    });
    Captured {
        manifest_sha256,
        files,
        bytes,
        new_bytes: 0,
        hashed: 0,
        skipped: Vec::new(),
        vanished: 0,
        changed_while_read: 0,
    }
}

fn errno(path: &str, e: nix::errno::Errno) -> WsError {
    WsError::errno(path, e)
}

/// Gives one entry of the clone to `owner` (set-id bits put back: a chown clears them) and
/// returns a file's stat data, checked against the manifest.
fn adopt_entry(root: &OwnedFd, e: &Entry, owner: Option<(u32, u32)>) -> WsResult<Option<Stat>> {
    let path = e.path.as_str();
    if let Some((uid, gid)) = owner {
        fchownat(
            root,
            path,
            Some(Uid::from_raw(uid)),
            Some(Gid::from_raw(gid)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(|err| errno(path, err))?;
    }
    let EntryKind::File {
        mode,
        size,
        mtime_ns,
        ..
    } = &e.kind
    else {
        return Ok(None);
    };
    if owner.is_some() && mode & 0o6000 != 0 {
        // INVARIANT: nothing but this fork has used the clone, so the path is the file.
        fchmodat(
            root,
            path,
            Mode::from_bits_truncate(mode & 0o7777),
            FchmodatFlags::FollowSymlink,
        )
        .map_err(|err| errno(path, err))?;
    }
    let st = fstatat(root, path, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|err| errno(path, err))?;
    let stat = super::capture::stat_of(&st);
    let is_file = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !is_file
        || stat.size != *size
        || stat.mtime_ns != *mtime_ns
        || st.st_mode & 0o7777 != mode & 0o7777
    {
        return Err(WsError::Internal(format!(
            "the image clone disagrees with its manifest at `{path}`"
        )));
    }
    Ok(Some(stat))
}

/// Makes the tree at `root`, a whole-filesystem clone of the tree `m` describes, the new
/// workspace's, and writes its stat index so the next capture reads no file. No content is
/// read.
/// - With `owner`, every entry (and the root) is given to it, and the index is written from
///   `m`'s hashes and the stat data after the change of owner. Fails (and the caller
///   restores instead) if any file's type, size, mode or mtime disagrees with `m`.
/// - Without (the clone is mounted with its owner mapped, `resources::idmap`, so its inodes
///   are untouched), the index is the one `saved` beside the snapshot's image clone at its
///   capture, its device rewritten, when every record of it agrees with `m`; else the
///   entries' stat data are read as above.
///
/// Returns the files indexed.
pub(super) fn adopt_clone(
    index_dir: &Path,
    m: &Manifest,
    root: &Path,
    owner: Option<(u32, u32)>,
    saved: Option<&Path>,
) -> WsResult<u64> {
    let (dev, ino) = root_id(root)?;
    let to = index::path_for(index_dir, dev, ino);
    if owner.is_none()
        && let Some(saved) = saved
    {
        let agrees = |path: &[u8], st: &Stat, hash: &Digest| agrees_with(m, path, st, hash);
        match index::copy_to(saved, &to, dev, i64::MAX, agrees) {
            Ok(Some(n)) => return Ok(n as u64),
            Ok(None) => {
                tracing::warn!(index = %saved.display(), "the snapshot's saved stat index is missing or disagrees with its manifest: reading stat data")
            }
            Err(e) => return Err(WsError::io(index_dir, e)),
        }
    }
    let fd = open_root(root)?;
    let chunks: Vec<&[Entry]> = m.entries.chunks(512).collect();
    let files: Mutex<Vec<(String, Stat, Digest)>> = Mutex::new(Vec::new());
    par::for_each(&chunks, 1, |chunk| {
        let mut mine = Vec::with_capacity(chunk.len());
        for e in *chunk {
            if let (Some(st), EntryKind::File { hash, .. }) = (adopt_entry(&fd, e, owner)?, &e.kind)
            {
                mine.push((e.path.clone(), st, *hash));
            }
        }
        files
            .lock()
            .map_err(|_| WsError::Internal("adopt lock poisoned".into()))?
            .extend(mine);
        Ok(())
    })?;
    if let Some((uid, gid)) = owner {
        fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
            .map_err(|e| WsError::errno(root, e))?;
    }
    let mut files = files
        .into_inner()
        .map_err(|_| WsError::Internal("adopt lock poisoned".into()))?;
    // As after a restore: wait out the racy margin after the last change of owner, so the
    // next capture trusts every entry.
    index::settle_racy(files.iter().map(|(_, st, _)| st));
    let n = files.len() as u64;
    index::store_entries(&to, index::now_ns(), &mut files)
        .map_err(|e| WsError::io(index_dir, e))?;
    Ok(n)
}

/// Whether a stat index record (path, stat, hash) describes a file of `m` as `m` does:
/// the same hash, size, mtime and permission bits, and a regular file. Pure.
fn agrees_with(m: &Manifest, path: &[u8], st: &Stat, hash: &Digest) -> bool {
    let Ok(i) = m.entries.binary_search_by(|e| e.path.as_bytes().cmp(path)) else {
        return false;
    };
    match &m.entries[i].kind {
        EntryKind::File {
            hash: h,
            size,
            mtime_ns,
            mode,
            ..
        } => {
            h == hash
                && *size == st.size
                && *mtime_ns == st.mtime_ns
                && st.mode & libc::S_IFMT == libc::S_IFREG
                && st.mode & 0o7777 == mode & 0o7777
        }
        _ => false,
    }
}

/// Saves the stat index of the tree at `root` (a snapshot's image clone, mounted) as
/// `file`, recorded no later than `before_ns`, for the forks of that snapshot. False when
/// `root` has no index.
pub(super) fn save_index(
    index_dir: &Path,
    root: &Path,
    file: &Path,
    before_ns: i64,
) -> WsResult<bool> {
    let (dev, ino) = root_id(root)?;
    let from = index::path_for(index_dir, dev, ino);
    index::copy_to(&from, file, dev, before_ns, |_, _, _| true)
        .map(|n| n.is_some())
        .map_err(|e| WsError::io(file, e))
}
