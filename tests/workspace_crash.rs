//! Crash safety: `kill -9` of the service in the middle of a snapshot or of a create, then a
//! restart, leaves consistent state, never uses a half-written snapshot, and keeps every
//! acknowledged operation.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use common::wait_until;
use serde_json::json;
use std::time::Duration;
use workspace_support::{Svc, pids_of};

const SLOW: &[(&str, &str)] = &[("DOCKWARDEN_TEST_SNAPSHOT_DELAY_MS", "30")];

/// Entries in the snapshot staging area: a capture's directory while it runs.
fn staged_files(svc: &Svc) -> usize {
    let tmp = svc.state.join("snapshots/tmp");
    std::fs::read_dir(tmp).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn kill_9_in_the_middle_of_a_snapshot_keeps_the_previous_good_snapshot() {
    let mut svc = Svc::start(26000, &[], SLOW);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "c" })));
    svc.raw("PUT", "/v1/workspaces/c/files/content?path=a.txt", b"good");
    let good = svc.ok("POST", "/v1/workspaces/c/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before: Vec<String> = svc
        .ok("GET", "/v1/workspaces/c/snapshots", None)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();

    svc.exec(
        "c",
        "for i in $(seq 1 400); do echo $i > f$i; done; echo bad > a.txt",
    );
    let socket = svc.socket.clone();
    let pending =
        std::thread::spawn(move || common::http(&socket, "POST", "/v1/workspaces/c/snapshot", b""));
    wait_until(Duration::from_secs(20), "a snapshot in progress", || {
        staged_files(&svc) >= 1
    });
    // 30 ms per file: some 20 of the 400 new files are read (and packed) by now.
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(staged_files(&svc) >= 1, "the capture is still running");
    let (status, _) = svc.raw(
        "PUT",
        "/v1/workspaces/c/files/content?path=ack.txt",
        b"acknowledged",
    );
    assert_eq!(status, 200);
    svc.kill9();
    assert!(
        pending.join().unwrap().is_err(),
        "the snapshot was cut off, never acknowledged"
    );

    svc.restart(&[]);
    let info = svc.ok("GET", "/v1/workspaces/c", None);
    assert_eq!(info["status"], "running", "state is consistent: {info}");
    assert_eq!(
        info["latest_snapshot"],
        good.as_str(),
        "the half-written snapshot is not used"
    );
    let after: Vec<String> = svc
        .ok("GET", "/v1/workspaces/c/snapshots", None)
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(after, before);
    assert_eq!(staged_files(&svc), 0, "staging debris is cleared");
    assert_eq!(
        std::fs::read_dir(svc.state.join("snapshots/manifests"))
            .unwrap()
            .count(),
        before.len()
    );
    assert_eq!(
        svc.read("c", "ack.txt").1,
        b"acknowledged",
        "acknowledged write kept"
    );

    // The good snapshot is what a fork and a restore use.
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "fork", "from": good })),
    );
    assert_eq!(svc.read("fork", "a.txt").1, b"good");
    assert_eq!(svc.read("fork", "f1").0, 404);
    std::fs::remove_dir_all(svc.worktree("c")).unwrap();
    let connected = svc.ok("POST", "/v1/workspaces/c/connect", None);
    // Upkeep checks live worktrees on every tick too: if it restored this one before the
    // connect, the connect has nothing to recover and the report is the workspace's last.
    let rec = match &connected["recovery"] {
        serde_json::Value::Null => &connected["workspace"]["last_recovery"],
        r => r,
    };
    assert_eq!(rec["restored_from"], good.as_str(), "{connected}");
    assert_eq!(svc.read("c", "a.txt").1, b"good");

    // And the service works normally afterwards.
    let next = svc.ok("POST", "/v1/workspaces/c/snapshot", None);
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/c", None)["latest_snapshot"],
        next["id"]
    );
}

#[test]
fn kill_9_during_setup_rolls_the_unacknowledged_create_back() {
    let mut svc = Svc::start(26100, &[], &[]);
    let src = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "src" })));
    let next_uid = src["workspace"]["uid"].as_u64().unwrap() as u32 + 1;
    svc.exec(
        "src",
        "git init -q . && mkdir .dockwarden && \
        echo '{\"scripts\":{\"setup\":\"sleep 60\"}}' > .dockwarden/settings.json && \
        git add -A && git -c user.email=a@b -c user.name=a commit -qm slow",
    );
    let repo = svc.worktree("src").display().to_string();
    let socket = svc.socket.clone();
    let body = json!({ "id": "victim", "repo": repo }).to_string();
    let _pending = std::thread::spawn(move || {
        common::http(&socket, "POST", "/v1/workspaces", body.as_bytes())
    });
    wait_until(Duration::from_secs(20), "setup running", || {
        !pids_of(next_uid).is_empty()
    });
    svc.kill9();

    svc.restart(&[]);
    assert_eq!(
        svc.api("GET", "/v1/workspaces/victim", None).0,
        404,
        "never acknowledged, rolled back"
    );
    assert!(!svc.state.join("workspaces/victim").exists());
    wait_until(Duration::from_secs(5), "setup processes stopped", || {
        pids_of(next_uid).is_empty()
    });
    let again = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "victim" })));
    assert_eq!(again["created"], true);
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/src", None)["status"],
        "running",
        "others untouched"
    );
}
