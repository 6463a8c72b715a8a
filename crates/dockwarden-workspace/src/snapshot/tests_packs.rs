//! Packs of small files in the local store, on real files (no root needed).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::{LocalSnapshotStore, SnapshotStore};
use crate::error::WsError;

fn count(dir: &Path, ext: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            n += count(&p, ext);
        } else if ext.is_empty() || p.extension().is_some_and(|x| x == ext) {
            n += 1;
        }
    }
    n
}

fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let md = std::fs::symlink_metadata(&p).unwrap();
        n += md.blocks() * 512;
        if md.is_dir() {
            n += disk_bytes(&p);
        }
    }
    n
}

fn small_tree(root: &Path, files: usize, tag: &str) {
    std::fs::create_dir_all(root.join("lib")).unwrap();
    for i in 0..files {
        let line = format!("export const {tag}{i} = require('./m{}');\n", i % 17);
        std::fs::write(root.join(format!("lib/m{i}.js")), line.repeat(20 + i % 50)).unwrap();
    }
}

#[test]
fn small_files_are_packed_and_compressed_and_large_ones_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    small_tree(&src, 2000, "a");
    let big: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(src.join("big.bin"), &big).unwrap();
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    let c = store.capture("s1", &src, None, &|_| {}).unwrap();
    assert_eq!(c.files, 2001);
    assert_eq!(
        count(&root.join("blobs"), ""),
        1,
        "only the large file is a loose blob"
    );
    assert!(count(&root.join("packs"), "pack") >= 1);
    let raw_small = disk_bytes(&src.join("lib"));
    let packed = disk_bytes(&root.join("packs"));
    assert!(
        packed * 4 < raw_small,
        "2000 small files take {raw_small} bytes on disk, their packs {packed}"
    );
    // A store opened again finds the packed objects: a new capture stores nothing.
    drop(store);
    let store = LocalSnapshotStore::open(&root).unwrap();
    let again = store
        .capture("s2", &dir.path().join("src"), None, &|_| {})
        .unwrap();
    assert_eq!(again.new_bytes, 0, "{again:?}");
    let m = store.load("s2", &again.manifest_sha256).unwrap();
    let dest = dir.path().join("dest");
    store.restore(&m, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("big.bin")).unwrap(), big);
    for i in [0, 999, 1999] {
        assert_eq!(
            std::fs::read(dest.join(format!("lib/m{i}.js"))).unwrap(),
            std::fs::read(src.join(format!("lib/m{i}.js"))).unwrap()
        );
    }
}

#[test]
fn a_damaged_packed_object_fails_the_restore_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    small_tree(&src, 20, "c");
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    let c = store.capture("s1", &src, None, &|_| {}).unwrap();
    let m = store.load("s1", &c.manifest_sha256).unwrap();
    // The small files' pack (the capture's first; its last holds the trees).
    let pack = root.join("packs/s1-0.pack");
    let mut data = std::fs::read(&pack).unwrap();
    // Inside the objects, well before the index at the end.
    data[40] ^= 0x55;
    std::fs::write(&pack, &data).unwrap();
    let err = store
        .restore(&m, &dir.path().join("dest"), None, &|_| {})
        .unwrap_err();
    assert!(matches!(err, WsError::CorruptSnapshot { .. }), "{err}");
    assert!(!dir.path().join("dest").exists());
}

#[test]
fn garbage_collection_drops_dead_packs_and_rewrites_mostly_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    small_tree(&a, 300, "a");
    small_tree(&b, 300, "b");
    // One shared file, so that b's pack keeps a little of a's.
    std::fs::write(b.join("shared.js"), b"shared").unwrap();
    std::fs::write(a.join("shared.js"), b"shared").unwrap();
    let ca = store.capture("sa", &a, None, &|_| {}).unwrap();
    let cb = store.capture("sb", &b, None, &|_| {}).unwrap();
    // Each capture: a pack of small files and one of trees (the root and `lib`).
    assert_eq!(count(&root.join("packs"), "pack"), 4);
    // Keep only b: a's pack has one live object of 301 and is rewritten with it; a's
    // trees are all dead, so their pack goes.
    let removed = store.collect_garbage(&["sb".to_string()]).unwrap();
    assert_eq!(removed, 300 + 2, "a's own objects and trees go");
    assert_eq!(count(&root.join("packs"), "pack"), 3);
    let m = store.load("sb", &cb.manifest_sha256).unwrap();
    store
        .restore(&m, &dir.path().join("rb"), None, &|_| {})
        .unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("rb/shared.js")).unwrap(),
        b"shared"
    );
    assert!(store.load("sa", &ca.manifest_sha256).is_err());
    // Keep nothing: every pack goes.
    store.collect_garbage(&[]).unwrap();
    assert_eq!(count(&root.join("packs"), "pack"), 0);
    assert_eq!(count(&root.join("tmp"), ""), 0);
}

#[test]
fn a_capture_reusing_an_id_keeps_the_packs_other_snapshots_share() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    small_tree(&src, 300, "a");
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    store.capture("x", &src, None, &|_| {}).unwrap();
    // `y` stores nothing of its own: every object is in `x`'s packs.
    let y = store.capture("y", &src, None, &|_| {}).unwrap();
    // Other content under the same id `x`: its new packs must not replace the first ones.
    std::fs::remove_dir_all(&src).unwrap();
    small_tree(&src, 300, "b");
    store.capture("x", &src, None, &|_| {}).unwrap();
    let store = LocalSnapshotStore::open(&root).unwrap();
    let m = store.load("y", &y.manifest_sha256).unwrap();
    let dest = dir.path().join("dest");
    store.restore(&m, &dest, None, &|_| {}).unwrap();
    let first = std::fs::read_to_string(dest.join("lib/m7.js")).unwrap();
    assert!(first.contains("export const a7 "), "{first}");
}
