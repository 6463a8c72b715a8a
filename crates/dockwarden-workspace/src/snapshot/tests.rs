//! Unit tests of the local snapshot store on real files (no root needed).
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::{EntryKind, LocalSnapshotStore, Manifest, SnapshotStore};
use crate::error::WsError;

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("sub/deep/b.bin"), vec![7u8; 100_000]).unwrap();
    std::fs::write(root.join("sub/dup.txt"), b"alpha").unwrap();
    std::fs::write(root.join("run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    symlink("../etc/passwd", root.join("dangling")).unwrap();
}

fn capture(
    store: &LocalSnapshotStore,
    id: &str,
    root: &Path,
    prev: Option<&Manifest>,
) -> (Manifest, super::Captured) {
    let c = store.capture(id, root, prev, &|_| {}).unwrap();
    (store.load(id, &c.manifest_sha256).unwrap(), c)
}

#[test]
fn capture_and_restore_round_trip_with_modes_symlinks_and_dedup() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m, c) = capture(&store, "s1", &src, None);
    assert_eq!(c.files, 4);
    assert_eq!(
        c.new_bytes,
        5 + 100_000 + 10,
        "the duplicate is stored once"
    );
    let dest = dir.path().join("dest");
    store.restore(&m, &dest, None, &|_| {}).unwrap();
    assert_eq!(std::fs::read(dest.join("sub/dup.txt")).unwrap(), b"alpha");
    assert_eq!(
        std::fs::read(dest.join("sub/deep/b.bin")).unwrap().len(),
        100_000
    );
    assert_eq!(
        std::fs::metadata(dest.join("run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o750
    );
    assert_eq!(
        std::fs::read_link(dest.join("dangling")).unwrap().to_str(),
        Some("../etc/passwd")
    );
    assert!(
        store.restore(&m, &dest, None, &|_| {}).is_err(),
        "never restores over an existing tree"
    );
}

#[test]
fn recapture_of_an_unchanged_tree_stores_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    std::thread::sleep(std::time::Duration::from_millis(250));
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, _) = capture(&store, "s1", &src, None);
    let (m2, c2) = capture(&store, "s2", &src, Some(&m1));
    assert_eq!(c2.new_bytes, 0);
    assert_eq!(m1.entries, m2.entries);
}

#[test]
fn corrupted_blobs_and_manifests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    // Above the pack limit: a loose blob (packed objects: `tests_packs`).
    std::fs::write(src.join("large.bin"), vec![5u8; 2 << 20]).unwrap();
    let root = dir.path().join("store");
    let store = LocalSnapshotStore::open(&root).unwrap();
    let (m, c) = capture(&store, "s1", &src, None);
    assert!(matches!(
        store.load("s1", &"0".repeat(64)),
        Err(WsError::CorruptSnapshot { .. })
    ));
    let sha = m
        .entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::File { hash, size, .. } if *size == 2 << 20 => {
                Some(super::digest::hex(hash))
            }
            _ => None,
        })
        .unwrap();
    // Whichever kind the store wrote (raw, or `.zst` where the filesystem cannot clone).
    let (blob, _) = super::blob::find(&root.join("blobs"), &sha).unwrap();
    std::fs::write(blob, b"evil!").unwrap();
    let err = store
        .restore(&m, &dir.path().join("dest"), None, &|_| {})
        .unwrap_err();
    assert!(matches!(err, WsError::CorruptSnapshot { .. }), "{err}");
    assert!(store.load("s1", &c.manifest_sha256).is_ok());
}

#[test]
fn rejects_manifest_that_writes_through_its_own_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f"), b"x").unwrap();
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (mut m, _) = capture(&store, "s1", &src, None);
    let file = m.entries[0].kind.clone();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    m.entries = vec![
        super::Entry {
            path: "link".into(),
            kind: EntryKind::Symlink {
                target: outside.display().to_string(),
                mtime_ns: 0,
            },
        },
        super::Entry {
            path: "link/pwned".into(),
            kind: file,
        },
    ];
    let err = store
        .restore(&m, &dir.path().join("dest"), None, &|_| {})
        .unwrap_err();
    assert!(matches!(err, WsError::CorruptSnapshot { .. }), "{err}");
    assert!(!outside.join("pwned").exists());
}

#[test]
fn garbage_collection_keeps_blobs_shared_with_kept_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, _) = capture(&store, "s1", &src, None);
    std::fs::write(src.join("only-in-s2.txt"), b"new").unwrap();
    let (_, c2) = capture(&store, "s2", &src, Some(&m1));
    assert_eq!(c2.new_bytes, 3);
    assert_eq!(
        store.collect_garbage(&["s1".to_string()]).unwrap(),
        2,
        "only s2's own file and its own root tree go"
    );
    store
        .restore(&m1, &dir.path().join("dest"), None, &|_| {})
        .unwrap();
}

#[test]
fn a_tree_deeper_than_the_walks_held_descriptors_round_trips_and_recaptures_by_stat() {
    // Directories below `PARENT_FD_DEPTH` (24) are opened from the root by their path;
    // those above through their parent's descriptor. Both must give the same tree.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut rel = std::path::PathBuf::new();
    for depth in 0..40 {
        rel.push(format!("d{depth}"));
        std::fs::create_dir_all(src.join(&rel)).unwrap();
        std::fs::write(src.join(&rel).join("f"), format!("level {depth}")).unwrap();
        std::fs::create_dir_all(src.join(&rel).with_file_name(format!("e{depth}"))).unwrap();
        symlink("f", src.join(&rel).join("l")).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(250));
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, c1) = capture(&store, "s1", &src, None);
    assert_eq!((c1.files, c1.hashed, c1.vanished), (40, 40, 0));
    assert_eq!(
        m1.entries.len(),
        40 * 4,
        "per level: a dir, a file, a symlink, a sibling"
    );
    let (m2, c2) = capture(&store, "s2", &src, Some(&m1));
    assert_eq!(
        (c2.files, c2.hashed),
        (40, 0),
        "every file found in the index"
    );
    assert_eq!(m1.entries, m2.entries);
    let dest = dir.path().join("dest");
    store.restore(&m2, &dest, None, &|_| {}).unwrap();
    let deepest = dest.join(&rel);
    assert_eq!(std::fs::read(deepest.join("f")).unwrap(), b"level 39");
    assert_eq!(
        std::fs::read_link(deepest.join("l")).unwrap().to_str(),
        Some("f")
    );
}
