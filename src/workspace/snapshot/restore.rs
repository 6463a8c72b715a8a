//! Materialises a manifest into a fresh directory, verifying every blob's checksum.
//!
//! The destination is built where the workspace user cannot write (the service's own
//! directory), and every entry's parent must be a directory this restore created, so a
//! tampered manifest cannot write through a symlink.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::{PermissionsExt, lchown, symlink};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::capture::blob_path;
use super::manifest::{EntryKind, Manifest, hex, safe_rel_path};
use super::{Progress, ProgressFn};
use crate::workspace::error::{WsError, WsResult};

fn corrupt(m: &Manifest, detail: String) -> WsError {
    WsError::CorruptSnapshot {
        id: m.id.clone(),
        detail,
    }
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// Restores `m` into `dest` (which must not exist yet).
pub(super) fn restore(
    m: &Manifest,
    blobs: &Path,
    dest: &Path,
    owner: Option<(u32, u32)>,
    progress: ProgressFn<'_>,
) -> WsResult<()> {
    fs::create_dir(dest).map_err(|e| WsError::io(dest, e))?;
    fs::set_permissions(dest, fs::Permissions::from_mode(0o700))
        .map_err(|e| WsError::io(dest, e))?;
    let mut dirs: HashSet<&str> = HashSet::from([""]);
    let mut dir_modes = Vec::new();
    let mut done = Progress::default();
    for e in &m.entries {
        if !safe_rel_path(&e.path) || !dirs.contains(parent_of(&e.path)) {
            return Err(corrupt(
                m,
                format!("entry `{}` is outside the tree", e.path),
            ));
        }
        let target = dest.join(&e.path);
        match &e.kind {
            EntryKind::Dir { mode } => {
                fs::create_dir(&target).map_err(|err| WsError::io(&target, err))?;
                dirs.insert(e.path.as_str());
                dir_modes.push((target.clone(), *mode));
            }
            EntryKind::File {
                mode,
                sha256,
                mtime_ns,
                ..
            } => {
                done.bytes += restore_file(m, blobs, sha256, &target, *mode, *mtime_ns)?;
                done.files += 1;
                if done.files.is_multiple_of(500) {
                    progress(done);
                }
            }
            EntryKind::Symlink { target: to } => {
                symlink(to, &target).map_err(|err| WsError::io(&target, err))?;
            }
        }
        if let Some((uid, gid)) = owner {
            lchown(&target, Some(uid), Some(gid)).map_err(|err| WsError::io(&target, err))?;
        }
    }
    // Modes last and deepest first, so read-only directories do not block their children.
    for (dir, mode) in dir_modes.iter().rev() {
        fs::set_permissions(dir, fs::Permissions::from_mode(*mode))
            .map_err(|e| WsError::io(dir, e))?;
    }
    if let Some((uid, gid)) = owner {
        lchown(dest, Some(uid), Some(gid)).map_err(|e| WsError::io(dest, e))?;
    }
    fs::set_permissions(dest, fs::Permissions::from_mode(m.root_mode))
        .map_err(|e| WsError::io(dest, e))?;
    progress(done);
    Ok(())
}

/// Restores one file with its mode and mtime; returns its size.
fn restore_file(
    m: &Manifest,
    blobs: &Path,
    sha: &str,
    target: &Path,
    mode: u32,
    mtime_ns: i64,
) -> WsResult<u64> {
    let (file, n) = copy_blob(m, blobs, sha, target)?;
    let io = |err| WsError::io(target, err);
    file.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io)?;
    let mtime = UNIX_EPOCH + Duration::from_nanos(u64::try_from(mtime_ns).unwrap_or(0));
    file.set_modified(mtime).map_err(io)?;
    Ok(n)
}

/// Copies one blob to `target`, checking its content against its name.
fn copy_blob(m: &Manifest, blobs: &Path, sha: &str, target: &Path) -> WsResult<(File, u64)> {
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(corrupt(m, format!("bad blob name `{sha}`")));
    }
    let src_path = blob_path(blobs, sha);
    let mut src =
        File::open(&src_path).map_err(|e| corrupt(m, format!("blob `{sha}` unreadable: {e}")))?;
    let mut dst = File::create_new(target).map_err(|e| WsError::io(target, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n_total = 0u64;
    loop {
        let n = src.read(&mut buf).map_err(|e| WsError::io(&src_path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])
            .map_err(|e| WsError::io(target, e))?;
        n_total += n as u64;
    }
    if hex(&hasher.finalize()) != sha {
        return Err(corrupt(m, format!("blob `{sha}` fails its checksum")));
    }
    Ok((dst, n_total))
}
