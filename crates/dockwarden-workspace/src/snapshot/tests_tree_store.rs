//! Tree objects in the local store, on real files (no root needed): sharing between
//! snapshots, refusal of damaged or missing trees, old manifests, garbage collection.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::manifest::sha256_hex;
use super::{LocalSnapshotStore, Manifest, SnapshotStore};
use crate::error::WsError;

/// Two packages: `x` with one file, `y` with ten (so `x`'s tree is a small part of a pack).
fn two_packages(root: &Path) {
    std::fs::create_dir_all(root.join("x")).unwrap();
    std::fs::create_dir_all(root.join("y/lib")).unwrap();
    std::fs::write(root.join("x/only.js"), b"x").unwrap();
    for i in 0..10 {
        std::fs::write(root.join(format!("y/lib/m{i}.js")), format!("m{i}")).unwrap();
    }
    std::fs::write(root.join("top.json"), b"{}").unwrap();
}

fn packs(store: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(store.join("packs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn capture(s: &LocalSnapshotStore, id: &str, root: &Path) -> (Manifest, String) {
    let c = s.capture(id, root, None, &|_| {}).unwrap();
    (s.load(id, &c.manifest_sha256).unwrap(), c.manifest_sha256)
}

fn settle() {
    // Past the stat index's racy margin, so recaptures trust what they saw.
    std::thread::sleep(std::time::Duration::from_millis(120));
}

#[test]
fn an_unchanged_tree_adds_no_bytes_and_a_change_adds_only_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let (src, st) = (dir.path().join("src"), dir.path().join("store"));
    two_packages(&src);
    settle();
    let s = LocalSnapshotStore::open(&st).unwrap();
    let (m1, _) = capture(&s, "s1", &src);
    let before = packs(&st);
    let t1 = s.tree_hashes("s1");
    assert_eq!(t1.len(), 4, "root, x, y, y/lib");
    // Unchanged: no new pack at all, and a record of a few dozen bytes.
    let (m2, _) = capture(&s, "s2", &src);
    assert_eq!(packs(&st), before, "an unchanged capture writes no tree");
    assert_eq!(s.tree_hashes("s2"), t1);
    assert_eq!(m1.entries, m2.entries);
    let record = std::fs::metadata(s.manifest_file("s2")).unwrap().len();
    assert!(
        record < 200,
        "the record names the root only: {record} bytes"
    );
    // One file changed in y/lib: new trees for y/lib, y and the root; x is shared.
    std::fs::write(src.join("y/lib/m3.js"), b"changed").unwrap();
    settle();
    let (m3, _) = capture(&s, "s3", &src);
    let t3 = s.tree_hashes("s3");
    let new: Vec<_> = t3.iter().filter(|h| !t1.contains(h)).collect();
    assert_eq!(new.len(), 3, "y/lib, y and the root");
    let dest = dir.path().join("dest");
    s.restore(&m3, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("y/lib/m3.js")).unwrap(), b"changed");
    assert_eq!(std::fs::read(dest.join("x/only.js")).unwrap(), b"x");
}

#[test]
fn a_corrupt_or_missing_tree_object_is_refused_on_load() {
    let dir = tempfile::tempdir().unwrap();
    let (src, st) = (dir.path().join("src"), dir.path().join("store"));
    two_packages(&src);
    let s = LocalSnapshotStore::open(&st).unwrap();
    let (_, sha) = capture(&s, "s1", &src);
    drop(s);
    // The trees are the capture's last pack (after the small files' one).
    let names = packs(&st);
    let trees = st.join("packs").join(names.last().unwrap());
    let good = std::fs::read(&trees).unwrap();
    // A flipped byte inside the root tree's frame (the pack's own index stays valid).
    let objects = super::pack::read_index(&trees).unwrap();
    let root = objects.last().unwrap();
    let mut bad = good.clone();
    bad[(root.offset + u64::from(root.clen) / 2) as usize] ^= 0x40;
    std::fs::write(&trees, &bad).unwrap();
    let s = LocalSnapshotStore::open(&st).unwrap();
    match s.load("s1", &sha) {
        Err(WsError::CorruptSnapshot { detail, .. }) => {
            assert!(detail.contains("tree"), "{detail}")
        }
        other => panic!("a damaged tree loaded: {other:?}"),
    }
    drop(s);
    // The pack gone: every tree is missing.
    std::fs::remove_file(&trees).unwrap();
    let s = LocalSnapshotStore::open(&st).unwrap();
    match s.load("s1", &sha) {
        Err(WsError::CorruptSnapshot { detail, .. }) => {
            assert!(detail.contains("missing"), "{detail}")
        }
        other => panic!("a snapshot without its trees loaded: {other:?}"),
    }
    // Garbage collection keeps everything rather than trust a manifest it cannot read.
    let before = packs(&st);
    s.collect_garbage(&["s1".into()]).unwrap();
    assert_eq!(packs(&st), before);
    drop(s);
    std::fs::write(&trees, &good).unwrap();
    let s = LocalSnapshotStore::open(&st).unwrap();
    assert!(s.load("s1", &sha).is_ok(), "whole again");
}

#[test]
fn manifests_of_versions_1_and_2_still_load_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let (src, st) = (dir.path().join("src"), dir.path().join("store"));
    two_packages(&src);
    let s = LocalSnapshotStore::open(&st).unwrap();
    let (m, _) = capture(&s, "s1", &src);
    // The same snapshot as a version 2 file (what stores held before trees).
    let v2 = Manifest {
        version: 2,
        id: "old2".into(),
        ..m.clone()
    };
    let body = v2.encode_v2();
    std::fs::write(s.manifest_file("old2"), &body).unwrap();
    let back = s.load("old2", &sha256_hex(&body)).unwrap();
    assert_eq!((back.version, &back.entries), (2, &m.entries));
    let dest = dir.path().join("dest2");
    s.restore(&back, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("x/only.js")).unwrap(), b"x");
    // Version 1: JSON (its hashes SHA-256; decoding is what is checked here).
    let v1 = Manifest {
        version: 1,
        id: "old1".into(),
        ..m.clone()
    };
    let body = serde_json::to_vec(&v1).unwrap();
    std::fs::write(s.manifest_file("old1"), &body).unwrap();
    let back = s.load("old1", &sha256_hex(&body)).unwrap();
    assert_eq!((back.version, &back.entries), (1, &m.entries));
    // A version 2 manifest keeps its blobs through garbage collection, trees or not.
    s.collect_garbage(&["old2".into()]).unwrap();
    let back = s.load("old2", &sha256_hex(&v2.encode_v2())).unwrap();
    let dest = dir.path().join("dest2b");
    s.restore(&back, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("y/lib/m9.js")).unwrap(), b"m9");
}

#[test]
fn garbage_collection_keeps_shared_trees_and_drops_unreferenced_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (src, st) = (dir.path().join("src"), dir.path().join("store"));
    two_packages(&src);
    let s = LocalSnapshotStore::open(&st).unwrap();
    capture(&s, "s1", &src);
    let t1 = s.tree_hashes("s1");
    std::fs::remove_dir_all(src.join("y")).unwrap();
    std::fs::create_dir_all(src.join("y")).unwrap();
    std::fs::write(src.join("y/new.js"), b"new").unwrap();
    let (_, sha2) = capture(&s, "s2", &src);
    let t2 = s.tree_hashes("s2");
    let shared: Vec<_> = t1.iter().filter(|h| t2.contains(h)).collect();
    let only_s1: Vec<_> = t1.iter().filter(|h| !t2.contains(h)).collect();
    assert_eq!(shared.len(), 1, "x's tree, written by s1, is s2's too");
    assert_eq!(only_s1.len(), 3, "s1's root, y and y/lib");
    s.collect_garbage(&["s2".into()]).unwrap();
    for h in &only_s1 {
        assert!(!s.packed(h), "an unreferenced tree is dropped");
    }
    assert!(s.packed(shared[0]), "a tree s2 shares with s1 is kept");
    let m2 = s.load("s2", &sha2).unwrap();
    let dest = dir.path().join("dest");
    s.restore(&m2, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("x/only.js")).unwrap(), b"x");
    assert_eq!(std::fs::read(dest.join("y/new.js")).unwrap(), b"new");
    // A fresh store over the same directory agrees.
    drop(s);
    let s = LocalSnapshotStore::open(&st).unwrap();
    assert!(s.load("s2", &sha2).is_ok());
}
