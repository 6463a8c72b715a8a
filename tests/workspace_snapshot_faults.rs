//! Snapshots of a live tree against the real service (issue 15, items 2 and 3): files that
//! vanish during a capture are left out and counted; a failed capture leaves no staging.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::time::Duration;

use serde_json::json;
use workspace_support::Svc;

/// A per-file delay in captures, so that the test's deletions land mid-walk.
const SLOW: &[(&str, &str)] = &[("DOCKWARDEN_TEST_SNAPSHOT_DELAY_MS", "4")];

fn staging_left(svc: &Svc) -> Vec<String> {
    std::fs::read_dir(svc.state.join("snapshots/tmp"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn files_vanishing_during_a_capture_are_left_out_and_the_snapshot_succeeds() {
    let svc = Svc::start(29600, &[], SLOW);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "v" })));
    let made = svc.exec(
        "v",
        "mkdir -p keep build/objs && echo kept > keep/a.txt && \
         for i in $(seq 1 400); do echo tmp$i > build/$i.tmp; done && \
         for d in $(seq 1 30); do mkdir build/objs/$d && echo o > build/objs/$d/o; done && \
         echo lock > .git-index.lock",
    );
    assert_eq!(made["exit_code"], 0, "{made}");
    let wt = svc.worktree("v");
    let (status, body) = std::thread::scope(|s| {
        let snap = s.spawn(|| svc.api("POST", "/v1/workspaces/v/snapshot", None));
        // The capture sleeps 4 ms per file: it is inside `build` by now, as a build tool
        // cleaning its temp files would find it.
        std::thread::sleep(Duration::from_millis(500));
        std::fs::remove_dir_all(wt.join("build")).unwrap();
        std::fs::remove_file(wt.join(".git-index.lock")).unwrap();
        snap.join().unwrap()
    });
    assert!((200..300).contains(&status), "{status} {body}");
    let vanished = body["vanished"].as_u64().unwrap();
    assert!(vanished > 0, "nothing counted as vanished: {body}");
    let files = body["files"].as_u64().unwrap();
    assert!((1..1 + 400 + 30 + 1).contains(&files), "{body}");
    assert!(staging_left(&svc).is_empty());

    // The snapshot is recorded and restores what it captured.
    let id = body["id"].as_str().unwrap().to_string();
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "v2", "from": id })),
    );
    assert_eq!(
        std::fs::read_to_string(svc.worktree("v2").join("keep/a.txt")).unwrap(),
        "kept\n"
    );
}

/// Makes `dir/ddd…/ddd…/…`, longer than PATH_MAX, one level at a time.
fn deep_path(dir: &std::path::Path) {
    use nix::fcntl::{OFlag, open, openat};
    use nix::sys::stat::{Mode, mkdirat};
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY;
    let mut fd = open(dir, flags, Mode::empty()).unwrap();
    let name = "d".repeat(200);
    for _ in 0..25 {
        mkdirat(&fd, name.as_str(), Mode::from_bits_truncate(0o755)).unwrap();
        fd = openat(&fd, name.as_str(), flags, Mode::empty()).unwrap();
    }
}

#[test]
fn a_failed_capture_leaves_no_staging_directory() {
    let svc = Svc::start(29700, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    // New content first (staged by the capture), then a path longer than PATH_MAX, which
    // no capture can open: the snapshot fails after staging blobs.
    let made = svc.exec("f", "for i in $(seq 1 50); do echo new$i > n$i; done");
    assert_eq!(made["exit_code"], 0, "{made}");
    deep_path(&svc.worktree("f"));
    let (status, body) = svc.api("POST", "/v1/workspaces/f/snapshot", None);
    assert!(
        status >= 400,
        "a capture of an unreadable tree failed: {status} {body}"
    );
    assert!(body["message"].is_string(), "{body}");
    assert!(
        staging_left(&svc).is_empty(),
        "staging left: {:?}",
        staging_left(&svc)
    );
    // The service is still usable: remove the long path and snapshot again.
    let cleaned = std::process::Command::new("rm")
        .args(["-rf", &"d".repeat(200)])
        .current_dir(svc.worktree("f"))
        .status()
        .unwrap();
    assert!(cleaned.success());
    let ok = svc.ok("POST", "/v1/workspaces/f/snapshot", None);
    assert!(ok["files"].as_u64().unwrap() >= 50, "{ok}");
    assert!(staging_left(&svc).is_empty());
}
