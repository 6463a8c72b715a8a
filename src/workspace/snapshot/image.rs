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
use std::time::Duration;

use nix::fcntl::AtFlags;
use nix::sys::stat::{FchmodatFlags, Mode, fchmodat, fstatat};
use nix::unistd::{Gid, Uid, fchown, fchownat};

use super::Captured;
use super::capture::open_root;
use super::digest::Digest;
use super::index::{self, Stat};
use super::manifest::{Entry, EntryKind, Manifest};
use super::par;
use crate::workspace::error::{WsError, WsResult};

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
/// workspace's: every entry (and the root) owned by `owner`, then the tree's stat index
/// written from `m`'s hashes and the stat data after the change of owner, so the next
/// capture reads no file. No content is read. Fails (and the caller restores instead) if
/// any file's type, size, mode or mtime disagrees with `m`. Returns the files indexed.
pub(super) fn adopt_clone(
    index_dir: &Path,
    m: &Manifest,
    root: &Path,
    owner: Option<(u32, u32)>,
) -> WsResult<u64> {
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
    let last = files
        .iter()
        .map(|(_, st, _)| st.ctime_ns)
        .max()
        .unwrap_or(0);
    let wait = last + index::RACY_MARGIN_NS + 1_000_000 - index::now_ns();
    if wait > 0 {
        std::thread::sleep(Duration::from_nanos(wait.unsigned_abs()));
    }
    let n = files.len() as u64;
    let (dev, ino) = root_id(root)?;
    index::store_entries(
        &index::path_for(index_dir, dev, ino),
        index::now_ns(),
        &mut files,
    )
    .map_err(|e| WsError::io(index_dir, e))?;
    Ok(n)
}
