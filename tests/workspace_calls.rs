//! Calls of the lifecycle service that issue 15 changed, against the real service:
//! transparent resume of a stopped workspace, snapshot ids of kill, snapshot and idle stop,
//! the batch write, the symlink rule and rename, service errors, delete during `creating`,
//! and the start-up check of the state directory's parents.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::process::Command;
use std::time::Duration;

use common::{http, wait_until};
use repo::repo_with;
use serde_json::{Value, json};
use workspace_support::{BIN, Svc, pids_of};

#[test]
fn exec_write_and_snapshot_on_a_stopped_workspace_resume_it() {
    let svc = Svc::start(28700, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "r" })));
    svc.raw("PUT", "/v1/workspaces/r/files/content?path=a.txt", b"one");
    let killed = svc.ok("POST", "/v1/workspaces/r/kill", None);
    assert_eq!(killed["snapshot_id"], killed["snapshot"]["id"]);
    assert!(killed["snapshot_id"].is_string());
    let info = svc.ok("GET", "/v1/workspaces/r", None);
    assert_eq!(
        info["last_stop"]["snapshot_id"], killed["snapshot_id"],
        "{info}"
    );
    assert_eq!(info["last_stop"]["reason"], "kill");

    let out = svc.exec("r", "cat a.txt");
    assert_eq!(
        (out["stdout"].as_str(), out["resumed"].as_bool()),
        (Some("one"), Some(true))
    );
    assert_eq!(svc.ok("GET", "/v1/workspaces/r", None)["status"], "running");
    let again = svc.exec("r", "true");
    assert_eq!(again["resumed"], false);

    svc.ok("POST", "/v1/workspaces/r/kill", None);
    let (status, body) = svc.raw("PUT", "/v1/workspaces/r/files/content?path=b.txt", b"two");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["resumed"].as_bool()), (200, Some(true)), "{v}");

    svc.ok("POST", "/v1/workspaces/r/kill", None);
    // A read does not start it.
    assert_eq!(svc.read("r", "b.txt"), (200, b"two".to_vec()));
    assert_eq!(svc.ok("GET", "/v1/workspaces/r", None)["status"], "stopped");
    let snap = svc.ok("POST", "/v1/workspaces/r/snapshot", None);
    assert_eq!(snap["resumed"], true, "{snap}");
    assert_eq!(snap["snapshot_id"], snap["id"]);
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/r", None)["latest_snapshot"],
        snap["snapshot_id"]
    );
}

#[test]
fn idle_stop_records_its_snapshot_id_in_info() {
    // `--archive-after 0`: idle archives at once instead of suspending first
    // (tests/workspace_suspend.rs covers suspension).
    let svc = Svc::start(28750, &["--tick-ms", "200", "--archive-after", "0"], &[]);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "idle", "idle_timeout_secs": 1 })),
    );
    svc.raw("PUT", "/v1/workspaces/idle/files/content?path=x", b"x");
    wait_until(Duration::from_secs(30), "idle stop", || {
        svc.ok("GET", "/v1/workspaces/idle", None)["status"] == "stopped"
    });
    let info = svc.ok("GET", "/v1/workspaces/idle", None);
    assert_eq!(info["last_stop"]["reason"], "idle", "{info}");
    assert!(info["last_stop"]["snapshot_id"].is_string(), "{info}");
    assert_eq!(info["last_stop"]["snapshot_id"], info["latest_snapshot"]);
}

#[test]
fn batch_write_is_one_call_atomic_per_file_and_checked_before_writing() {
    let svc = Svc::start(28800, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "b" })));
    let done = svc.ok(
        "POST",
        "/v1/workspaces/b/files/batch",
        Some(json!({ "files": [
            { "path": "a.txt", "data": "alpha" },
            { "path": "dir/b.bin", "data_base64": "AAEC/w==" },
        ]})),
    );
    assert_eq!(done["written"], json!(["a.txt", "dir/b.bin"]));
    assert_eq!(svc.read("b", "a.txt"), (200, b"alpha".to_vec()));
    assert_eq!(svc.read("b", "dir/b.bin"), (200, vec![0, 1, 2, 255]));
    let leftovers = svc.exec("b", "find . -name '.*dw-*' | wc -l");
    assert_eq!(leftovers["stdout"], "0\n", "no temp files");

    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces/b/files/batch",
        Some(json!({ "files": [
            { "path": "c.txt", "data": "never" },
            { "path": "../escape", "data": "x" },
        ]})),
    );
    assert_eq!(
        (status, v["code"].as_str()),
        (400, Some("invalid_path")),
        "{v}"
    );
    assert_eq!(
        svc.read("b", "c.txt").0,
        404,
        "nothing of a refused batch is written"
    );

    let big = "x".repeat(2 * 1024 * 1024 + 1);
    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces/b/files/batch",
        Some(json!({ "files": [ { "path": "big", "data": big } ] })),
    );
    assert_eq!(
        (status, v["code"].as_str()),
        (413, Some("too_large")),
        "{v}"
    );
}

#[test]
fn service_errors_unknown_endpoint_filters_and_idempotent_create() {
    let svc = Svc::start(28850, &[], &[]);
    let (status, v) = svc.api("GET", "/v1/nothing/here", None);
    assert_eq!(
        (status, v["code"].as_str()),
        (404, Some("no_endpoint")),
        "{v}"
    );
    let (status, v) = svc.api("GET", "/v1/workspaces?owner=ada", None);
    assert_eq!(status, 400, "{v}");
    assert!(v["message"].as_str().unwrap().contains("meta."), "{v}");

    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "i", "metadata": { "a": "1" } })),
    );
    let again = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "i", "metadata": { "a": "2" }, "idle_timeout_secs": 5 })),
    );
    assert_eq!(again["created"], false);
    let notes = again["notes"][0].as_str().unwrap();
    assert!(
        notes.contains("`metadata`") && notes.contains("`idle_timeout_secs`"),
        "{notes}"
    );

    let out = svc.cli(&["delete", "--meta", "x=nomatch"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "no workspace matched"
    );
    let usage = Command::new(BIN)
        .args(["ws", "--socket"])
        .arg(&svc.socket)
        .arg("delete")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&usage.stderr);
    assert_eq!(usage.status.code(), Some(2), "{err}");
    assert!(err.contains("Usage") && !err.contains("backtrace"), "{err}");
}

#[test]
fn delete_during_creating_cancels_the_setup_and_exec_says_to_wait() {
    let svc = Svc::start(28900, &[], &[]);
    let repo = repo_with(
        svc.dir.path(),
        "forever",
        &json!({ "scripts": { "setup": "sleep 600" } }),
    );
    let socket = svc.socket.clone();
    let body = json!({ "id": "doomed", "repo": repo.display().to_string() }).to_string();
    let pending = std::thread::spawn(move || {
        http(&socket, "POST", "/v1/workspaces", body.as_bytes()).unwrap()
    });
    wait_until(Duration::from_secs(20), "setup running", || {
        !pids_of(28900).is_empty()
    });
    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces/doomed/exec",
        Some(json!({ "cmd": "true" })),
    );
    assert_eq!(status, 409, "{v}");
    let msg = v["message"].as_str().unwrap();
    assert!(
        msg.contains("setup is still running") && !msg.contains("connect"),
        "{msg}"
    );

    // Answers although the setup would run for ten minutes: it is cancelled.
    svc.ok("DELETE", "/v1/workspaces/doomed", None);
    let (status, created) = pending.join().unwrap();
    let created: Value = serde_json::from_slice(&created).unwrap();
    assert_eq!(status, 409, "the create reports the delete: {created}");
    assert!(
        created["message"]
            .as_str()
            .unwrap()
            .contains("deleted while its setup ran")
    );
    assert_eq!(svc.api("GET", "/v1/workspaces/doomed", None).0, 404);
    assert!(pids_of(28900).is_empty(), "setup processes stopped");
    assert!(!svc.state.join("workspaces/doomed").exists());
}

#[test]
fn symlink_components_are_named_and_rename_never_overwrites() {
    let svc = Svc::start(28950, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "s" })));
    svc.exec(
        "s",
        "mkdir -p real && echo in > real/f && ln -s real inlink && echo t > target && ln -s target flink",
    );
    // A symlink to a directory inside the worktree: refused, and named as a symlink.
    let (status, body) = svc.read("s", "inlink/f");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, v["code"].as_str()),
        (400, Some("invalid_path")),
        "{v}"
    );
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("`inlink` in `inlink/f` is a symlink"), "{msg}");
    assert!(!msg.contains("escapes"), "{msg}");
    // Last component: lstat semantics.
    let info = svc.ok("GET", "/v1/workspaces/s/files/info?path=flink", None);
    assert_eq!(info["kind"], "symlink", "{info}");
    let (status, body) = svc.read("s", "flink");
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 400);
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("`flink` is a symlink"),
        "{v}"
    );
    svc.ok("DELETE", "/v1/workspaces/s/files?path=flink", None);
    assert_eq!(
        svc.read("s", "target"),
        (200, b"t\n".to_vec()),
        "the target stays"
    );
    let gone = svc.ok("GET", "/v1/workspaces/s/files/exists?path=flink", None);
    assert_eq!(gone["exists"], false);

    // rename onto an existing file: refused with `exists`, naming the destination.
    svc.raw("PUT", "/v1/workspaces/s/files/content?path=a", b"a");
    svc.raw("PUT", "/v1/workspaces/s/files/content?path=b", b"b");
    let (status, v) = svc.api("POST", "/v1/workspaces/s/files/rename?from=a&to=b", None);
    assert_eq!((status, v["code"].as_str()), (409, Some("exists")), "{v}");
    assert!(v["message"].as_str().unwrap().contains("`b`"), "{v}");
    assert_eq!(svc.read("s", "b"), (200, b"b".to_vec()), "not overwritten");
    let (status, v) = svc.api("POST", "/v1/workspaces/s/files/rename?from=a&to=real", None);
    assert_eq!(status, 409, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("`real`"),
        "names the destination: {v}"
    );
}

#[test]
fn serve_under_a_0700_parent_refuses_to_start_with_the_fix() {
    if !nix_is_root() {
        println!("skipped: the traversal check applies when running as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(dir.path().join("s.sock"))
        .arg("--state-dir")
        .arg(private.join("state"))
        .args(["--uid-base", "28990", "--uid-count", "5", "--no-docker"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("mode 0700") && err.contains("chmod o+x"),
        "{err}"
    );
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|r| r.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
