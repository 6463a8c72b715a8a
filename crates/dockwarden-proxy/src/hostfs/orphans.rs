//! Pins left by proxies that are gone: a proxy killed for good (or moved to another
//! `--listen`, hence another default pin directory) leaves pins nobody releases. Each proxy,
//! when it reconciles, looks at the sibling pin directories whose lock is free and that were
//! made for the same daemon, and releases every pin no container of that daemon uses.
//! Pins still in use stay (their proxy may come back) and are looked at again next time.

use std::collections::BTreeSet;
use std::path::Path;

use nix::mount::MntFlags;

use super::state;

/// Cleans orphaned sibling directories of `own`; returns how many pins it released.
/// `sources` is every mount source of every container of `upstream`.
pub fn collect(own: &Path, upstream: &str, sources: &BTreeSet<String>) -> usize {
    let Some(parent) = own.parent() else { return 0 };
    let Ok(rd) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut released = 0;
    for ent in rd.flatten() {
        let dir = ent.path();
        let is_dir = ent.file_type().is_ok_and(|t| t.is_dir());
        let lock = state::lock_path(&dir);
        if dir == own {
            continue;
        }
        // INVARIANT: only directories a proxy made (its lock file exists) are touched.
        if is_dir && lock.exists() {
            released += collect_one(&dir, &lock, upstream, sources);
        } else if !is_dir
            && dir.extension().is_some_and(|e| e == "lock")
            && !dir.with_extension("").exists()
        {
            remove_stale_lock(&dir);
        }
    }
    released
}

fn collect_one(dir: &Path, lock: &Path, upstream: &str, sources: &BTreeSet<String>) -> usize {
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock)
    else {
        return 0;
    };
    if f.try_lock().is_err() {
        return 0; // its proxy is alive
    }
    if super::mounts::check_root_only(dir).is_err() {
        return 0;
    }
    let Ok((Some(up), mut pins)) = state::load(dir) else {
        return 0;
    };
    if up != upstream {
        return 0; // another daemon's containers; that daemon's proxy will see to them
    }
    let gone: Vec<_> = pins
        .values()
        .filter(|e| !sources.contains(&e.pin))
        .cloned()
        .collect();
    for e in &gone {
        let p = Path::new(&e.pin);
        if p.parent() != Some(dir) {
            continue;
        }
        let _ = nix::mount::umount2(p, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW);
        let _ = if e.is_dir {
            std::fs::remove_dir(p)
        } else {
            std::fs::remove_file(p)
        };
        pins.remove(&e.pin);
    }
    if let Err(e) = state::save(dir, &up, &pins) {
        tracing::warn!("{e}");
    }
    if pins.is_empty() && !dir.exists() {
        let _ = std::fs::remove_file(lock);
    }
    if !gone.is_empty() {
        tracing::info!(pin.dir = %dir.display(), released = gone.len(), "released pins of a proxy that is gone");
    }
    gone.len()
}

/// A lock file without its directory: removed once free.
fn remove_stale_lock(lock: &Path) {
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock)
    else {
        return;
    };
    // Removed while we hold the lock, so no proxy can be starting on it meanwhile.
    if f.try_lock().is_ok() {
        let _ = std::fs::remove_file(lock);
    }
}
