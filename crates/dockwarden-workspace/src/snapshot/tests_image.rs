//! Unit tests of the store's side of whole-image clones (`image.rs`, `index::carry`) on
//! real files; the service-level tests with real XFS images are in
//! `tests/workspace_fork_image.rs`.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use super::index::{self, Index, Stat};
use super::{LocalSnapshotStore, SnapshotStore};

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("sub/deep")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("sub/deep/b.bin"), vec![7u8; 100_000]).unwrap();
    std::fs::write(root.join("run.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
}

/// A copy standing in for a block-level clone: same names, contents, modes and mtimes.
fn copy(src: &Path, dst: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(ok.success());
}

#[test]
fn an_adopted_tree_is_indexed_from_its_manifest_and_its_next_capture_reads_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let store = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let c1 = store.capture("s1", &src, None, &|_| {}).unwrap();
    let m = store.load("s1", &c1.manifest_sha256).unwrap();
    let fork = dir.path().join("fork");
    copy(&src, &fork);
    let root = nix::unistd::geteuid().is_root();
    let owner = root.then_some((4242, 4243));
    assert_eq!(store.adopt_clone(&m, &fork, owner, None).unwrap(), 3);
    let c2 = store.capture("s2", &fork, None, &|_| {}).unwrap();
    assert_eq!((c2.files, c2.hashed, c2.new_bytes), (3, 0, 0), "{c2:?}");
    if root {
        for p in ["", "a.txt", "sub", "sub/deep/b.bin", "run.sh", "link"] {
            let md = std::fs::symlink_metadata(fork.join(p)).unwrap();
            assert_eq!((md.uid(), md.gid()), (4242, 4243), "`{p}`");
        }
        let mode = std::fs::metadata(fork.join("run.sh")).unwrap().mode();
        assert_eq!(mode & 0o7777, 0o750);
    } else {
        println!("skipped: the change of owner (not root)");
    }

    // A tree that is not what the manifest says is refused, naming the file.
    let other = dir.path().join("other");
    copy(&src, &other);
    std::fs::write(other.join("sub/deep/b.bin"), b"shorter").unwrap();
    let err = store
        .adopt_clone(&m, &other, None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sub/deep/b.bin"), "{err}");
    let gone = dir.path().join("gone");
    copy(&src, &gone);
    std::fs::remove_file(gone.join("a.txt")).unwrap();
    assert!(store.adopt_clone(&m, &gone, None, None).is_err());
}

#[test]
fn an_index_carried_to_a_clone_is_trusted_on_its_device_and_recorded_at_the_freeze() {
    let dir = tempfile::tempdir().unwrap();
    let t: i64 = 1_000_000_000_000_000_000;
    let old = Stat {
        dev: 7,
        ino: 131,
        mode: 0o100644,
        size: 5,
        mtime_ns: t - 9_000_000_000,
        ctime_ns: t - 8_000_000_000,
    };
    let idx = Index::from_entries(t, vec![("a".into(), old, [3; 32])]);
    index::store(&index::path_for(dir.path(), 7, 128), &idx).unwrap();
    let frozen = t - 5_000_000_000;
    assert!(index::carry(dir.path(), (7, 128), (9, 128), frozen).unwrap());
    let carried = index::load(&index::path_for(dir.path(), 9, 128)).unwrap();
    assert_eq!(carried.recorded_at_ns, frozen, "lowered to the freeze");
    let on_clone = Stat { dev: 9, ..old };
    assert_eq!(carried.lookup("a", &on_clone), Some([3; 32]));
    assert_eq!(
        carried.lookup("a", &old),
        None,
        "the old device's stat is another file"
    );
    // A file changed just before the freeze is racy there and is read again.
    let late = Stat {
        ctime_ns: frozen - 1_000_000,
        ..on_clone
    };
    let idx = Index::from_entries(t, vec![("a".into(), Stat { dev: 7, ..late }, [3; 32])]);
    index::store(&index::path_for(dir.path(), 7, 128), &idx).unwrap();
    index::carry(dir.path(), (7, 128), (9, 128), frozen).unwrap();
    let carried = index::load(&index::path_for(dir.path(), 9, 128)).unwrap();
    assert_eq!(carried.lookup("a", &late), None);
    // Never raised: an index recorded before the freeze keeps its moment.
    index::carry(dir.path(), (9, 128), (11, 128), i64::MAX).unwrap();
    let again = index::load(&index::path_for(dir.path(), 11, 128)).unwrap();
    assert_eq!(again.recorded_at_ns, frozen);
    assert!(
        !index::carry(dir.path(), (5, 5), (6, 6), frozen).unwrap(),
        "nothing to carry"
    );
}

/// The stat index of `root` in `store`'s index directory, as (path, inode) pairs.
fn indexed_inodes(store_dir: &Path, root: &Path) -> Vec<(String, u64)> {
    let md = std::fs::metadata(root).unwrap();
    let idx = index::load(&index::path_for(
        &store_dir.join("index"),
        md.dev(),
        md.ino(),
    ))
    .unwrap();
    idx.entries()
        .map(|(p, st, _)| {
            assert_eq!(st.dev, md.dev(), "every record is on the root's device");
            (String::from_utf8(p.to_vec()).unwrap(), st.ino)
        })
        .collect()
}

#[test]
fn a_mapped_fork_takes_the_index_saved_beside_the_snapshot_only_when_it_agrees_with_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src);
    let store_dir = dir.path().join("store");
    let store = LocalSnapshotStore::open(&store_dir).unwrap();
    let c1 = store.capture("s1", &src, None, &|_| {}).unwrap();
    let m = store.load("s1", &c1.manifest_sha256).unwrap();
    let saved = dir.path().join("s1.idx");
    assert!(store.save_index(&src, &saved, i64::MAX).unwrap());
    let src_inodes = indexed_inodes(&store_dir, &src);
    assert_eq!(src_inodes.len(), 3);

    // Agreeing: the saved records are taken as they are (a block-level clone has the same
    // inodes), only their device is the fork's: no entry of the fork is looked at.
    let fork = dir.path().join("fork");
    copy(&src, &fork);
    assert_eq!(store.adopt_clone(&m, &fork, None, Some(&saved)).unwrap(), 3);
    assert_eq!(
        indexed_inodes(&store_dir, &fork),
        src_inodes,
        "from the saved index"
    );

    // A saved index of another tree (a file's content differs from the manifest's) is not
    // taken: the fork's own stat data are read, and are trusted by its next capture.
    let other = dir.path().join("other");
    copy(&src, &other);
    std::fs::write(other.join("a.txt"), b"ALPHA").unwrap();
    let other_store = LocalSnapshotStore::open(&dir.path().join("store2")).unwrap();
    other_store.capture("o1", &other, None, &|_| {}).unwrap();
    let wrong = dir.path().join("o1.idx");
    assert!(other_store.save_index(&other, &wrong, i64::MAX).unwrap());
    let fork2 = dir.path().join("fork2");
    copy(&src, &fork2);
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(
        store.adopt_clone(&m, &fork2, None, Some(&wrong)).unwrap(),
        3
    );
    let own: Vec<u64> = indexed_inodes(&store_dir, &fork2)
        .into_iter()
        .map(|(_, i)| i)
        .collect();
    let walked: Vec<u64> = ["a.txt", "run.sh", "sub/deep/b.bin"]
        .iter()
        .map(|p| std::fs::metadata(fork2.join(p)).unwrap().ino())
        .collect();
    assert_eq!(own, walked, "the fork's own inodes");
    // A torn or missing saved index: the same walk.
    std::fs::write(&saved, b"DWI\x01torn").unwrap();
    let fork3 = dir.path().join("fork3");
    copy(&src, &fork3);
    assert_eq!(
        store.adopt_clone(&m, &fork3, None, Some(&saved)).unwrap(),
        3
    );
    std::fs::remove_file(&saved).unwrap();
    assert_eq!(
        store.adopt_clone(&m, &fork3, None, Some(&saved)).unwrap(),
        3
    );
    std::thread::sleep(std::time::Duration::from_millis(60));
    let c = store.capture("s3", &fork3, None, &|_| {}).unwrap();
    assert_eq!(c.hashed, 0, "{c:?}");
}
