//! Command-line driver of the snapshot store for `benches/snapshot_scale.sh` (no harness):
//!
//! ```text
//! snapshot_scale_tool capture STORE ROOT ID [PREVIOUS_ID]
//! snapshot_scale_tool restore STORE ID DEST
//! snapshot_scale_tool fork    STORE ID DEST NEW_ID   (restore, then the baseline capture)
//! snapshot_scale_tool load    STORE ID               (open the store, load the manifest)
//! ```
//!
//! Manifest checksums are kept in `STORE.ids/<id>`. Prints one JSON line per capture.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use dockwarden::workspace::snapshot::{LocalSnapshotStore, Manifest, SnapshotStore};

fn ids(store: &Path) -> PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push(".ids");
    PathBuf::from(p)
}

fn load(s: &LocalSnapshotStore, store: &Path, id: &str) -> Manifest {
    let sha = std::fs::read_to_string(ids(store).join(id)).unwrap();
    s.load(id, sha.trim()).unwrap()
}

fn capture(s: &LocalSnapshotStore, store: &Path, root: &Path, id: &str, prev: Option<&Manifest>) {
    let c = s.capture(id, root, prev, &|_| {}).unwrap();
    std::fs::create_dir_all(ids(store)).unwrap();
    std::fs::write(ids(store).join(id), &c.manifest_sha256).unwrap();
    println!(
        "{{\"id\":\"{id}\",\"files\":{},\"bytes\":{},\"hashed\":{},\"new_bytes\":{}}}",
        c.files, c.bytes, c.hashed, c.new_bytes
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["capture", store, root, id, rest @ ..] => {
            let store = Path::new(store);
            let s = LocalSnapshotStore::open(store).unwrap();
            // As the service does: the previous manifest only if the store wants one.
            let prev = rest
                .first()
                .filter(|_| s.wants_previous(Path::new(root)))
                .map(|p| load(&s, store, p));
            capture(&s, store, Path::new(root), id, prev.as_ref());
        }
        ["restore", store, id, dest] => {
            let store = Path::new(store);
            let s = LocalSnapshotStore::open(store).unwrap();
            let m = load(&s, store, id);
            s.restore(&m, Path::new(dest), None, &|_| {}).unwrap();
        }
        ["fork", store, id, dest, new_id] => {
            let store = Path::new(store);
            let s = LocalSnapshotStore::open(store).unwrap();
            let m = load(&s, store, id);
            s.restore(&m, Path::new(dest), None, &|_| {}).unwrap();
            capture(&s, store, Path::new(dest), new_id, None);
        }
        ["load", store, id] => {
            let store = Path::new(store);
            let s = LocalSnapshotStore::open(store).unwrap();
            let m = load(&s, store, id);
            println!("{{\"id\":\"{id}\",\"entries\":{}}}", m.entries.len());
        }
        [] => println!("snapshot_scale_tool: run by benches/snapshot_scale.sh; nothing to do"),
        _ => {
            eprintln!("usage: see the header of benches/snapshot_scale_tool.rs");
            std::process::exit(2);
        }
    }
}
