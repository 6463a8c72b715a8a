//! The snapshot store at scale, on real files: the stat-only fast path of incremental
//! captures (and its racy-timestamp guard), fork baselines taken from the restore's index,
//! and a crash in the middle of a restore.
#![allow(clippy::unwrap_used)]

use std::fs::{self, File, FileTimes};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use dockwarden::workspace::snapshot::{LocalSnapshotStore, Manifest, SnapshotStore};

/// Older than the store's racy-timestamp margin.
const SETTLE: Duration = Duration::from_millis(200);

fn tree(root: &Path, dirs: usize, files: usize) {
    for d in 0..dirs {
        let dir = root.join(format!("d{d:03}/sub"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..files {
            fs::write(
                dir.join(format!("f{f:04}.txt")),
                format!("{d}/{f}\n").repeat(20),
            )
            .unwrap();
        }
    }
}

fn capture(
    s: &LocalSnapshotStore,
    id: &str,
    root: &Path,
    prev: Option<&Manifest>,
) -> (Manifest, dockwarden::workspace::snapshot::Captured) {
    let c = s.capture(id, root, prev, &|_| {}).unwrap();
    (s.load(id, &c.manifest_sha256).unwrap(), c)
}

/// Rewrites `path` with `body` of the same size and puts its mtime back, as a rewrite within
/// the same second looks on a filesystem with whole-second timestamps.
fn rewrite_keeping_mtime(path: &Path, body: &[u8]) {
    let before = fs::metadata(path).unwrap();
    assert_eq!(before.len(), body.len() as u64);
    fs::write(path, body).unwrap();
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(before.modified().unwrap()))
        .unwrap();
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
}

fn restored(s: &LocalSnapshotStore, m: &Manifest, dest: &Path, rel: &str) -> Vec<u8> {
    s.restore(m, dest, None, &|_| {}).unwrap();
    fs::read(dest.join(rel)).unwrap()
}

#[test]
fn stat_fast_path_reads_nothing_of_an_unchanged_tree_and_one_file_when_one_changed() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src, 20, 50);
    std::thread::sleep(SETTLE);
    let s = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, c1) = capture(&s, "s1", &src, None);
    assert_eq!((c1.files, c1.hashed), (1000, 1000));
    let (m2, c2) = capture(&s, "s2", &src, Some(&m1));
    println!("unchanged: {} of {} files hashed", c2.hashed, c2.files);
    assert_eq!((c2.files, c2.hashed, c2.new_bytes), (1000, 0, 0));
    assert_eq!(m1.entries, m2.entries);

    let f = src.join("d007/sub/f0003.txt");
    let body = fs::read(&f)
        .unwrap()
        .to_ascii_uppercase()
        .iter()
        .map(|b| b ^ 1)
        .collect::<Vec<_>>();
    rewrite_keeping_mtime(&f, &body);
    let (m3, c3) = capture(&s, "s3", &src, Some(&m2));
    println!("one changed (same size, same mtime): {} hashed", c3.hashed);
    assert_eq!(c3.hashed, 1, "the changed file is hashed, and only it");
    assert_eq!(
        restored(&s, &m3, &dir.path().join("r3"), "d007/sub/f0003.txt"),
        body
    );
}

#[test]
fn stat_fast_path_picks_up_a_same_size_rewrite_within_the_same_second() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    let f = src.join("a.txt");
    // Captured right after the write: the entry is racy (its timestamps are as new as
    // the capture), so the next capture must not trust it even with identical stat data.
    fs::write(&f, b"first").unwrap();
    let s = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, _) = capture(&s, "s1", &src, None);
    rewrite_keeping_mtime(&f, b"again");
    let (m2, c2) = capture(&s, "s2", &src, Some(&m1));
    assert_eq!(c2.hashed, 1, "the racy entry is re-hashed");
    assert_eq!(restored(&s, &m2, &dir.path().join("r2"), "a.txt"), b"again");

    // The same rewrite long after the capture changes the ctime: also seen.
    std::thread::sleep(SETTLE);
    let (m3, c3) = capture(&s, "s3", &src, Some(&m2));
    assert_eq!(c3.hashed, 1, "s2 recorded a racy entry again");
    std::thread::sleep(SETTLE);
    rewrite_keeping_mtime(&f, b"third");
    let (m4, c4) = capture(&s, "s4", &src, Some(&m3));
    assert_eq!(c4.hashed, 1);
    assert_eq!(restored(&s, &m4, &dir.path().join("r4"), "a.txt"), b"third");
}

#[test]
fn a_restored_tree_is_captured_from_its_index_without_reading_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src, 10, 30);
    std::thread::sleep(SETTLE);
    let s = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, _) = capture(&s, "s1", &src, None);
    // A fork: restore, then its baseline capture with no previous manifest.
    let fork = dir.path().join("fork");
    s.restore(&m1, &fork, None, &|_| {}).unwrap();
    let (m2, c2) = capture(&s, "baseline", &fork, None);
    println!("fork baseline: {} of {} files hashed", c2.hashed, c2.files);
    assert_eq!((c2.files, c2.hashed, c2.new_bytes), (300, 0, 0));
    assert_eq!(m1.entries, m2.entries);
    // And the fork's first change is still seen.
    fs::write(fork.join("d003/sub/f0001.txt"), b"changed in the fork").unwrap();
    let (_, c3) = capture(&s, "next", &fork, Some(&m2));
    assert_eq!(c3.hashed, 1);
}

const CHILD_ENV: &str = "DOCKWARDEN_TEST_RESTORE_CRASH_DIR";

/// Runs only as the child of the crash test: restores, and ends the process (no
/// unwinding, no clean-up, like `kill -9`) once 500 files are written.
#[test]
fn crash_child_restores_and_aborts() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        println!("skipped: runs only as the child process of the restore crash test");
        return;
    };
    let dir = Path::new(&dir);
    let s = LocalSnapshotStore::open(&dir.join("store")).unwrap();
    let sha = fs::read_to_string(dir.join("sha")).unwrap();
    let m = s.load("s1", &sha).unwrap();
    let _ = s.restore(&m, &dir.join("dest"), None, &|p| {
        if p.files >= 500 {
            // Exits at once from a worker thread: no unwinding, no clean-up of the restore.
            std::process::exit(86);
        }
    });
    panic!("the restore should have been cut off");
}

#[test]
fn a_crash_mid_restore_leaves_no_half_restored_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    tree(&src, 20, 100);
    let s = LocalSnapshotStore::open(&dir.path().join("store")).unwrap();
    let (m1, c1) = capture(&s, "s1", &src, None);
    fs::write(dir.path().join("sha"), &c1.manifest_sha256).unwrap();

    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child_restores_and_aborts",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child was cut off: {out:?}");
    let dest = dir.path().join("dest");
    assert!(
        fs::symlink_metadata(&dest).is_err(),
        "no half-restored worktree in place"
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".dest.restoring-")
        })
        .map(|e| e.path())
        .collect();
    assert_eq!(leftovers.len(), 1, "the crash left its staging directory");
    let mut written = 0;
    for d in fs::read_dir(&leftovers[0]).unwrap().flatten() {
        written += fs::read_dir(d.path().join("sub"))
            .map(|r| r.count())
            .unwrap_or(0);
    }
    println!("the crashed restore had written {written} of 2000 files");
    assert!(
        (500..2000).contains(&written),
        "it crashed mid-way: {written}"
    );

    // The next restore into the same place clears the leftover and completes.
    s.restore(&m1, &dest, None, &|_| {}).unwrap();
    assert!(!leftovers[0].exists(), "leftover removed");
    assert_eq!(
        fs::read(dest.join("d019/sub/f0099.txt")).unwrap(),
        fs::read(src.join("d019/sub/f0099.txt")).unwrap()
    );
}
