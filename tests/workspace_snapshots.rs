//! Snapshots: kill then connect keeps every file (tracked, uncommitted, ignored, modes,
//! symlinks); a gone worktree is restored and reported; forks share storage and diverge.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::wait_until;
use serde_json::json;
use workspace_support::{Svc, fixture_repo, pids_of};

const CHANGES: &str = "echo ignored > build/out.log && echo draft > untracked.txt && \
    echo edited >> README.md && chmod 700 src/run.sh && ln -s src/run.sh run-link";

fn assert_changes_kept(svc: &Svc, id: &str) {
    let wt = svc.worktree(id);
    assert_eq!(
        std::fs::read_to_string(wt.join("build/out.log")).unwrap(),
        "ignored\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("untracked.txt")).unwrap(),
        "draft\n"
    );
    assert!(
        std::fs::read_to_string(wt.join("README.md"))
            .unwrap()
            .ends_with("edited\n")
    );
    assert_eq!(
        std::fs::metadata(wt.join("src/run.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    assert_eq!(
        std::fs::read_link(wt.join("run-link")).unwrap().to_str(),
        Some("src/run.sh")
    );
    let status = svc.exec(id, "git status --short --ignored");
    assert_eq!(
        status["stdout"], " M README.md\n?? run-link\n?? untracked.txt\n!! build/\n",
        "{status}"
    );
}

#[test]
fn kill_then_connect_keeps_files_including_ignored_ones() {
    let svc = Svc::start(23000, &[], &[]);
    let repo = fixture_repo(svc.dir.path());
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "k", "repo": repo.display().to_string() })),
    );
    let uid = created["workspace"]["uid"].as_u64().unwrap() as u32;
    assert_eq!(svc.exec("k", CHANGES)["exit_code"], 0);

    wait_until(Duration::from_secs(10), "run script", || {
        !pids_of(uid).is_empty()
    });
    let killed = svc.ok("POST", "/v1/workspaces/k/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped");
    assert!(
        pids_of(uid).is_empty(),
        "kill stops every process of the workspace"
    );
    let snap = killed["snapshot"]["id"].as_str().unwrap().to_string();
    assert_eq!(killed["workspace"]["latest_snapshot"], snap.as_str());
    // The archive script ran before the snapshot.
    assert_eq!(
        std::fs::read_to_string(svc.worktree("k").join("build/archived.txt")).unwrap(),
        "archived\n"
    );
    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces/k/exec",
        Some(json!({ "cmd": "true" })),
    );
    // The exec resumes it; the worktree was intact, so nothing was restored.
    assert_eq!((status, v["resumed"].as_bool()), (200, Some(true)), "{v}");
    assert!(v["recovery"].is_null(), "{v}");

    let connected = svc.ok("POST", "/v1/workspaces/k/connect", None);
    assert_eq!(connected["workspace"]["status"], "running");
    assert!(
        connected["recovery"].is_null(),
        "worktree intact: nothing restored"
    );
    wait_until(Duration::from_secs(10), "run script restarted", || {
        !pids_of(uid).is_empty()
    });
    assert_changes_kept(&svc, "k");

    // Worktree gone while stopped: connect restores it from the latest snapshot.
    svc.ok("POST", "/v1/workspaces/k/kill", None);
    std::fs::remove_dir_all(svc.worktree("k")).unwrap();
    let out = svc.cli(&["connect", "k"]);
    assert!(out.status.success(), "{out:?}");
    let info = svc.ok("GET", "/v1/workspaces/k", None);
    let rec = &info["last_recovery"];
    assert!(rec["restored_from"].is_string(), "{info}");
    assert_changes_kept(&svc, "k");
    assert_eq!(
        std::fs::metadata(svc.worktree("k").join("untracked.txt"))
            .unwrap()
            .uid(),
        uid
    );
}

#[test]
fn invalid_worktree_is_restored_and_lost_changes_are_reported() {
    let svc = Svc::start(23100, &[], &[]);
    let repo = fixture_repo(svc.dir.path());
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "r", "repo": repo.display().to_string() })),
    );
    // The run script writes `build/run.txt` in the background; let it land before the
    // snapshot, or it is (rightly) reported as changed after the snapshot.
    let run_txt = svc.worktree("r").join("build/run.txt");
    wait_until(Duration::from_secs(10), "run script", || run_txt.exists());
    svc.exec("r", "echo saved > saved.txt");
    svc.ok("POST", "/v1/workspaces/r/snapshot", None);
    // After the snapshot: a new file, then the repository is wrecked (no `.git`).
    svc.exec("r", "echo unsaved > unsaved.txt && rm -rf .git");
    let connected = svc.ok("POST", "/v1/workspaces/r/connect", None);
    // Upkeep checks live worktrees on every tick too: if it restored this one before the
    // connect, the connect has nothing to recover and the report is the workspace's last.
    let rec = match &connected["recovery"] {
        serde_json::Value::Null => &connected["workspace"]["last_recovery"],
        r => r,
    };
    let snap = svc.ok("GET", "/v1/workspaces/r/snapshots", None)[0]["id"].clone();
    assert_eq!(rec["restored_from"], snap, "{connected}");
    let unrecovered: Vec<&str> = rec["unrecovered"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(unrecovered, vec!["unsaved.txt"], "{rec}");
    assert!(
        rec["note"].as_str().unwrap().contains("not recovered"),
        "{rec}"
    );
    // Nothing is silently dropped: the damaged tree is kept aside.
    let aside = std::path::PathBuf::from(rec["preserved_at"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(aside.join("unsaved.txt")).unwrap(),
        "unsaved\n"
    );
    assert_eq!(svc.read("r", "saved.txt").1, b"saved\n");
    assert_eq!(
        svc.exec("r", "git rev-parse --is-inside-work-tree")["stdout"],
        "true\n"
    );
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/r", None)["last_recovery"],
        *rec
    );
}

#[test]
fn forks_from_one_snapshot_share_storage_and_change_independently() {
    let svc = Svc::start(23200, &[], &[]);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "base", "metadata": { "repo": "x" } })),
    );
    svc.exec(
        "base",
        "seq 1 20000 > numbers.txt && echo start > approach.txt",
    );
    let killed = svc.ok("POST", "/v1/workspaces/base/kill", None);
    let snap = killed["snapshot"]["id"].as_str().unwrap().to_string();
    let listed = svc.ok("GET", "/v1/workspaces?meta.repo=x", None);
    assert_eq!(listed[0]["latest_snapshot"], snap.as_str());

    let mut forks = Vec::new();
    for name in ["a", "b"] {
        let body = json!({ "id": name, "from": snap, "inherit_parent_metadata": true, "metadata": { "try": name } });
        let created = svc.ok("POST", "/v1/workspaces", Some(body));
        assert_eq!(
            created["workspace"]["metadata"],
            json!({ "repo": "x", "try": name })
        );
        assert_eq!(created["workspace"]["from_snapshot"], snap.as_str());
        forks.push(created);
    }
    for (name, f) in ["a", "b"].iter().zip(&forks) {
        // Forks share storage: their baseline snapshot stored no new bytes.
        let snaps = svc.ok("GET", &format!("/v1/workspaces/{name}/snapshots"), None);
        assert_eq!(snaps[0]["new_bytes"], 0, "{snaps}");
        assert_eq!(f["workspace"]["status"], "ready", "{name}");
    }
    assert_ne!(
        forks[0]["workspace"]["uid"], forks[1]["workspace"]["uid"],
        "each fork has its own uid"
    );
    // The CLI forks too, showing the restore's progress.
    let out = svc.cli(&["create", "--from", &snap, "--id", "c"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("created c ("),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("restore: 2 files"),
        "{out:?}"
    );
    svc.exec("a", "echo approach-a > approach.txt");
    svc.exec("b", "echo approach-b > approach.txt && rm numbers.txt");
    assert_eq!(svc.read("a", "approach.txt").1, b"approach-a\n");
    assert_eq!(svc.read("b", "approach.txt").1, b"approach-b\n");
    assert_eq!(svc.read("a", "numbers.txt").0, 200);
    assert_eq!(svc.read("b", "numbers.txt").0, 404);
    assert_eq!(svc.read("base", "approach.txt").1, b"start\n");

    // Deleting the parent keeps the forks' data (shared blobs are still referenced).
    svc.ok("DELETE", "/v1/workspaces/base", None);
    svc.ok("POST", "/v1/workspaces/a/kill", None);
    std::fs::remove_dir_all(svc.worktree("a")).unwrap();
    svc.ok("POST", "/v1/workspaces/a/connect", None);
    assert_eq!(
        svc.read("a", "numbers.txt").1.len(),
        std::fs::metadata(svc.worktree("a").join("numbers.txt"))
            .unwrap()
            .len() as usize
    );
    assert_eq!(svc.read("a", "approach.txt").1, b"approach-a\n");
}

#[test]
fn unchanged_files_are_not_stored_again() {
    let svc = Svc::start(23300, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "i" })));
    svc.exec(
        "i",
        "head -c 1000000 /dev/urandom > blob.bin && echo v1 > small.txt",
    );
    let first = svc.ok("POST", "/v1/workspaces/i/snapshot", None);
    assert!(first["new_bytes"].as_u64().unwrap() >= 1_000_000);
    svc.exec("i", "echo v2 > small.txt");
    let second = svc.ok("POST", "/v1/workspaces/i/snapshot", None);
    assert_eq!(
        second["new_bytes"], 3,
        "only the changed small file is stored: {second}"
    );
    assert_eq!(second["bytes"], first["bytes"]);
}

/// Seed 004: `kill()` keeps the snapshots, so `connect` still works. Thirty manual snapshots
/// of a workspace that is then stopped are all listed, with `--keep-snapshots 1`, and a fork
/// from the oldest has its content. Meanwhile baselines refreshed every second are pruned
/// once a newer one supersedes them: the create's own baseline goes, the manual ones stay.
#[test]
fn thirty_snapshots_of_a_stopped_workspace_are_all_listed_and_the_oldest_forks() {
    let svc = Svc::start(
        30250,
        &[
            "--keep-snapshots",
            "1",
            "--baseline-stale-after",
            "1",
            "--tick-ms",
            "100",
        ],
        &[],
    );
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "r" })));
    let first = svc.ok("GET", "/v1/workspaces/r/snapshots", None)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut manual = Vec::new();
    for i in 0..30 {
        svc.exec("r", &format!("echo {i} > n.txt"));
        let s = svc.ok("POST", "/v1/workspaces/r/snapshot", None);
        manual.push(s["id"].as_str().unwrap().to_owned());
    }
    let listed = |svc: &Svc| -> Vec<(String, String)> {
        svc.ok("GET", "/v1/workspaces/r/snapshots", None)
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    // Baselines every second while the workspace is live and used (a baseline is refreshed
    // only after activity): the superseded ones are pruned in batches of five, the create's
    // first among them.
    wait_until(
        Duration::from_secs(60),
        "a superseded baseline pruned",
        || {
            svc.exec("r", "true");
            std::thread::sleep(Duration::from_millis(300));
            !listed(&svc).iter().any(|(id, _)| *id == first)
        },
    );
    let now = listed(&svc);
    for id in &manual {
        assert!(
            now.iter().any(|(s, _)| s == id),
            "manual {id} pruned: {now:?}"
        );
    }
    let baselines = now.iter().filter(|(_, r)| r == "baseline").count();
    assert!(
        baselines <= 1 + 1 + 4,
        "{baselines} baselines kept: {now:?}"
    );

    // Stopped: nothing more is pruned, every manual snapshot is still there.
    svc.ok("POST", "/v1/workspaces/r/kill", None);
    std::thread::sleep(Duration::from_secs(2));
    let stopped = listed(&svc);
    for id in &manual {
        assert!(
            stopped.iter().any(|(s, _)| s == id),
            "manual {id} pruned: {stopped:?}"
        );
    }
    assert!(stopped.iter().any(|(_, r)| r == "kill"), "{stopped:?}");
    // A fork from the oldest manual snapshot has its content.
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "r-old", "from": manual[0] })),
    );
    assert_eq!(svc.exec("r-old", "cat n.txt")["stdout"], "0\n");
    // The fork's parent snapshot is referenced: still there after more captures of `r`.
    svc.ok("POST", "/v1/workspaces/r/connect", None);
    svc.ok("POST", "/v1/workspaces/r/snapshot", None);
    assert!(listed(&svc).iter().any(|(s, _)| *s == manual[0]));
    svc.ok("DELETE", "/v1/workspaces/r-old", None);
    svc.ok("DELETE", "/v1/workspaces/r", None);
}
