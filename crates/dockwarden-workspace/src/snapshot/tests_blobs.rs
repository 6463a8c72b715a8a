//! Loose blobs of the local store on real files (no root needed): compressed where the
//! store's filesystem cannot clone (ext4, tmpfs: the test's temp dir), raw ones from older
//! stores still read, and damaged compressed blobs refused.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use super::blob::{self, Kind};
use super::{EntryKind, LocalSnapshotStore, Manifest, SnapshotStore};
use crate::error::WsError;

/// Pseudo-random minified-JS-like text (compresses about 3×, like the bench's bundles).
fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&[u8]; 16] = [
        b"function",
        b"return",
        b"const ",
        b"this.",
        b"module",
        b"exports",
        b"=>",
        b"require(",
        b"value",
        b"length",
        b"null",
        b"undefined",
        b"props",
        b"state",
        b"){",
        b"};",
    ];
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % 16) as usize]);
        out.push(b"abcdefghijklmnopqrstuvwxyz_$0189"[(x >> 8) as usize % 32]);
    }
    out.truncate(len);
    out
}

/// Bytes no compressor can shrink.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn hash_of(m: &Manifest, path: &str) -> String {
    m.entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::File { hash, .. } if e.path == path => Some(super::digest::hex(hash)),
            _ => None,
        })
        .unwrap()
}

fn capture(store: &LocalSnapshotStore, id: &str, root: &Path) -> (Manifest, super::Captured) {
    let c = store.capture(id, root, None, &|_| {}).unwrap();
    (store.load(id, &c.manifest_sha256).unwrap(), c)
}

/// A temp dir whose filesystem cannot clone files, or `None` (after `skipped:`) if it can.
fn no_reflink_dir() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    if blob::probe_reflink(dir.path()).unwrap() {
        println!(
            "skipped: {} can clone files (reflink), so its store keeps large blobs raw",
            dir.path().display()
        );
        return None;
    }
    Some(dir)
}

/// A source tree with a 9 MiB bundle (streamed through staging), a 2 MiB one (read into
/// memory) and a 2 MiB incompressible file.
fn large_tree(src: &Path) -> Vec<(&'static str, Vec<u8>)> {
    std::fs::create_dir_all(src.join("dist")).unwrap();
    let files = vec![
        ("dist/bundle.js", text(9 << 20, 7)),
        ("dist/vendor.js", text(2 << 20, 8)),
        ("dist/addon.node", noise(2 << 20, 9)),
    ];
    for (p, body) in &files {
        std::fs::write(src.join(p), body).unwrap();
    }
    files
}

#[test]
fn a_store_without_reflink_keeps_large_blobs_compressed_and_restores_them_checked() {
    let Some(dir) = no_reflink_dir() else { return };
    let src = dir.path().join("src");
    let files = large_tree(&src);
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    assert!(store.compresses_blobs(), "the probe found no reflink");
    let (m, c) = capture(&store, "s1", &src);
    assert_eq!(c.new_bytes, (13 << 20) as u64);
    let blobs = root.join("blobs");
    for (path, body) in &files {
        let hash = hash_of(&m, path);
        let (at, kind) = blob::find(&blobs, &hash).unwrap();
        let stored = std::fs::metadata(&at).unwrap().len();
        if path.ends_with(".node") {
            assert_eq!(kind, Kind::Raw, "incompressible content stays raw");
            assert_eq!(stored, body.len() as u64);
        } else {
            assert_eq!(kind, Kind::Zstd, "{path}");
            assert!(
                stored * 2 < body.len() as u64,
                "{path}: {stored} bytes stored for {}",
                body.len()
            );
            assert!(!blob::path(&blobs, &hash, Kind::Raw).exists());
        }
    }
    // A second capture finds the compressed blobs: nothing new is stored.
    let (_, again) = capture(&store, "s2", &src);
    assert_eq!(again.new_bytes, 0, "{again:?}");
    let dest = dir.path().join("dest");
    store.restore(&m, &dest, None, &|_| {}).unwrap();
    for (path, body) in &files {
        assert!(std::fs::read(dest.join(path)).unwrap() == *body, "{path}");
    }
    assert_eq!(std::fs::read_dir(root.join("tmp")).unwrap().count(), 0);
}

/// Restores `m` into a new directory under `dir`; expects `CorruptSnapshot` and nothing left.
fn restore_refused(store: &LocalSnapshotStore, m: &Manifest, dir: &Path, name: &str) {
    let dest = dir.join(name);
    let err = store.restore(m, &dest, None, &|_| {}).unwrap_err();
    assert!(
        matches!(err, WsError::CorruptSnapshot { .. }),
        "{name}: {err}"
    );
    assert!(!dest.exists(), "{name}");
}

#[test]
fn a_corrupt_compressed_blob_is_refused_on_restore() {
    let Some(dir) = no_reflink_dir() else { return };
    let src = dir.path().join("src");
    large_tree(&src);
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    let (m, _) = capture(&store, "s1", &src);
    let hash = hash_of(&m, "dist/bundle.js");
    let zst: PathBuf = blob::path(&root.join("blobs"), &hash, Kind::Zstd);
    let good = std::fs::read(&zst).unwrap();

    // A flipped byte in the middle of the stream.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&zst, &bad).unwrap();
    restore_refused(&store, &m, dir.path(), "flipped");
    // Cut short.
    std::fs::write(&zst, &good[..good.len() - 1000]).unwrap();
    restore_refused(&store, &m, dir.path(), "truncated");
    // A well-formed stream of other content of the same length: only the hash tells.
    let other = zstd::stream::encode_all(&text(9 << 20, 70)[..], 3).unwrap();
    std::fs::write(&zst, &other).unwrap();
    restore_refused(&store, &m, dir.path(), "other content");
    // Longer than recorded: the restore stops reading one byte past the size.
    let longer = zstd::stream::encode_all(&text((9 << 20) + 4096, 7)[..], 3).unwrap();
    std::fs::write(&zst, &longer).unwrap();
    restore_refused(&store, &m, dir.path(), "longer");

    std::fs::write(&zst, &good).unwrap();
    store
        .restore(&m, &dir.path().join("healed"), None, &|_| {})
        .unwrap();
}

#[test]
fn raw_blobs_of_older_stores_still_restore_and_both_kinds_are_collected() {
    let Some(dir) = no_reflink_dir() else { return };
    let src = dir.path().join("src");
    let files = large_tree(&src);
    let root = dir.path().join("store");
    // A store as written before compressed blobs: every loose blob raw.
    let old = LocalSnapshotStore::open(&root).unwrap().with_raw_blobs();
    let (m1, _) = capture(&old, "s1", &src);
    let blobs = root.join("blobs");
    let bundle = hash_of(&m1, "dist/bundle.js");
    assert_eq!(blob::find(&blobs, &bundle).unwrap().1, Kind::Raw);
    drop(old);

    let store = LocalSnapshotStore::open(&root).unwrap();
    store
        .restore(&m1, &dir.path().join("d1"), None, &|_| {})
        .unwrap();
    assert!(std::fs::read(dir.path().join("d1/dist/bundle.js")).unwrap() == files[0].1);
    // The raw blob is found by later captures: not stored again in the other kind.
    let (_, c2) = capture(&store, "s2", &src);
    assert_eq!(c2.new_bytes, 0);
    assert!(!blob::path(&blobs, &bundle, Kind::Zstd).exists());
    // A new large file goes in compressed, next to the old raw blobs.
    std::fs::write(src.join("dist/new.js"), text(3 << 20, 11)).unwrap();
    let (m3, _) = capture(&store, "s3", &src);
    let new = hash_of(&m3, "dist/new.js");
    assert_eq!(blob::find(&blobs, &new).unwrap().1, Kind::Zstd);
    store
        .restore(&m3, &dir.path().join("d3"), None, &|_| {})
        .unwrap();
    assert!(std::fs::read(dir.path().join("d3/dist/new.js")).unwrap() == text(3 << 20, 11));
    // Garbage collection knows both names: keeping only s1 drops the compressed blob.
    store.collect_garbage(&["s1".to_string()]).unwrap();
    assert!(blob::find(&blobs, &new).is_none());
    assert!(blob::find(&blobs, &bundle).is_some());
    store.collect_garbage(&[]).unwrap();
    assert!(blob::find(&blobs, &bundle).is_none());
}
