//! Snapshot benchmarks on a 10k-file tree: first capture into an empty store, incremental
//! re-capture of the unchanged tree, and restore.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use dockwarden::workspace::snapshot::{LocalSnapshotStore, Manifest, SnapshotStore};

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;

fn make_tree(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let body = format!("file {d}/{f}\n").repeat(64);
            std::fs::write(dir.join(format!("f{f:03}.txt")), body).unwrap();
        }
    }
    // Let mtimes age past the racy-timestamp margin, as in a real worktree.
    std::thread::sleep(Duration::from_millis(300));
}

struct Fixture {
    _dir: tempfile::TempDir,
    tree: PathBuf,
    base: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    make_tree(&tree);
    let base = dir.path().to_path_buf();
    Fixture {
        _dir: dir,
        tree,
        base,
    }
}

fn load(store: &LocalSnapshotStore, id: &str, sha: &str) -> Manifest {
    store.load(id, sha).unwrap()
}

fn benches(c: &mut Criterion) {
    let fx = fixture();
    let mut g = c.benchmark_group("snapshot_10k_files");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let mut n = 0u32;
    g.bench_function("first_capture", |b| {
        b.iter_batched(
            || {
                n += 1;
                let root = fx.base.join(format!("store-first-{n}"));
                LocalSnapshotStore::open(&root).unwrap()
            },
            |store| {
                store
                    .capture("snap-first", &fx.tree, None, &|_| {})
                    .unwrap()
            },
            BatchSize::PerIteration,
        )
    });
    let store = LocalSnapshotStore::open(&fx.base.join("store-incr")).unwrap();
    let first = store.capture("snap-0", &fx.tree, None, &|_| {}).unwrap();
    let previous = load(&store, "snap-0", &first.manifest_sha256);
    let mut i = 0u32;
    g.bench_function("incremental_capture_unchanged", |b| {
        b.iter(|| {
            i += 1;
            let c = store
                .capture(&format!("snap-i{i}"), &fx.tree, Some(&previous), &|_| {})
                .unwrap();
            assert_eq!(c.new_bytes, 0);
            c
        })
    });
    g.bench_function("unchanged_capture_without_previous", |b| {
        b.iter(|| {
            i += 1;
            store
                .capture(&format!("snap-n{i}"), &fx.tree, None, &|_| {})
                .unwrap()
        })
    });
    let mut r = 0u32;
    g.bench_function("restore", |b| {
        b.iter_batched(
            || {
                r += 1;
                fx.base.join(format!("restore-{r}"))
            },
            |dest| store.restore(&previous, &dest, None, &|_| {}).unwrap(),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(snapshot, benches);
criterion_main!(snapshot);
