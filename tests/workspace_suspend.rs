//! Suspension (issue 27, point 3): idle or `suspend` freezes the workspace's cgroup in place
//! and snapshots it; `resume`, or any verb, thaws it; a workspace suspended for
//! `archive_after_secs` is archived (stopped with a snapshot). Real service, real cgroup
//! freezer, a real HTTP server started by the run script.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::path::PathBuf;
use std::time::Duration;

use common::wait_until;
use serde_json::{Value, json};
use workspace_support::Svc;

/// The workspace cgroup's v1 freezer state file, when this machine has one.
fn freezer_state(uid: u64) -> Option<PathBuf> {
    let p = PathBuf::from(format!(
        "/sys/fs/cgroup/freezer/dockwarden_ws_{uid}/freezer.state"
    ));
    let v2 = PathBuf::from(format!("/sys/fs/cgroup/dockwarden_ws_{uid}/cgroup.freeze"));
    if p.exists() {
        Some(p)
    } else if v2.exists() {
        Some(v2)
    } else {
        None
    }
}

fn frozen(state: &PathBuf) -> bool {
    let text = std::fs::read_to_string(state).unwrap_or_default();
    matches!(text.trim(), "FROZEN" | "1")
}

/// Skips (with the reason printed) where the service cannot make a freezable cgroup.
macro_rules! skip_without_freezer {
    ($uid:expr) => {
        match freezer_state($uid) {
            Some(p) => p,
            None => {
                eprintln!(
                    "SKIP: no cgroup freezer for the workspace (not root, or no freezer controller mounted)"
                );
                return;
            }
        }
    };
}

/// The run script's server: its pid inside the workspace, and whether it answers.
fn server(svc: &Svc, id: &str) -> (String, bool) {
    let r = svc.exec(
        id,
        "pgrep -f 'http.server 18765' | head -1; curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:18765/",
    );
    let out = r["stdout"].as_str().unwrap_or_default().to_owned();
    let mut lines = out.lines();
    let pid = lines.next().unwrap_or_default().trim().to_owned();
    let answered = lines.next().is_some_and(|l| l.trim() == "200");
    (pid, answered)
}

fn status(svc: &Svc, id: &str) -> String {
    let (_, ws) = svc.api("GET", &format!("/v1/workspaces/{id}"), None);
    ws["status"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_run_script_server_survives_suspend_and_resume_with_its_pid() {
    let svc = Svc::start(30600, &["--tick-ms", "100"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let repo = repo::repo_with(
        dir.path(),
        "serves",
        &json!({ "runtime": "standard", "scripts": {
            "run": "exec /usr/bin/python3 -m http.server 18765 --bind 127.0.0.1"
        } }),
    );
    let ws = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "s", "repo": repo.to_str().unwrap() })),
    );
    let uid = ws["workspace"]["uid"]
        .as_u64()
        .or(ws["uid"].as_u64())
        .expect("uid");
    let state = skip_without_freezer!(uid);
    wait_until(
        Duration::from_secs(20),
        "the run script's server answers",
        || server(&svc, "s").1,
    );
    let (pid, _) = server(&svc, "s");
    assert!(!pid.is_empty(), "no server pid");
    svc.exec("s", "echo kept > note.txt");

    let sus = svc.ok("POST", "/v1/workspaces/s/suspend", None);
    assert_eq!(sus["workspace"]["status"], "suspended", "{sus}");
    let snap = sus["snapshot_id"]
        .as_str()
        .expect("a snapshot at suspension");
    assert!(frozen(&state), "the workspace cgroup is not frozen");
    let procs = std::fs::read_to_string(state.with_file_name("cgroup.procs")).unwrap();
    assert!(
        !procs.trim().is_empty(),
        "the frozen cgroup holds the workspace's processes"
    );
    let snaps = svc.ok("GET", "/v1/workspaces/s/snapshots", None);
    assert!(
        snaps
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == snap && s["reason"] == "suspend"),
        "{snaps}"
    );
    // Suspending again changes nothing; reading files does not need it thawed.
    let again = svc.ok("POST", "/v1/workspaces/s/suspend", None);
    assert!(again["snapshot_id"].is_null(), "{again}");

    let res = svc.ok("POST", "/v1/workspaces/s/resume", None);
    assert_eq!(res["thawed"], true, "{res}");
    assert_eq!(res["workspace"]["status"], "running");
    assert!(!frozen(&state), "still frozen after resume");
    let (pid_after, answered) = server(&svc, "s");
    assert!(answered, "the server does not answer after resume");
    assert_eq!(pid_after, pid, "the server was restarted, not resumed");

    // Any verb thaws first: an exec on a suspended workspace runs, on the same server.
    svc.ok("POST", "/v1/workspaces/s/suspend", None);
    assert_eq!(status(&svc, "s"), "suspended");
    let r = svc.exec("s", "cat note.txt");
    assert_eq!(r["stdout"], "kept\n", "{r}");
    assert_eq!(status(&svc, "s"), "running");
    assert_eq!(server(&svc, "s"), (pid, true));

    // The CLI says what it did.
    let out = svc.cli(&["suspend", "s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("suspended: "), "{text}");
    assert!(text.contains("snapshot at suspension: "), "{text}");
    let out = svc.cli(&["resume", "s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("resumed in "), "{text}");
    svc.ok("DELETE", "/v1/workspaces/s", None);
}

#[test]
fn an_idle_workspace_is_suspended_then_archived_with_a_snapshot() {
    let svc = Svc::start(30650, &["--tick-ms", "100"], &[]);
    let ws = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "i", "idle_timeout_secs": 1, "archive_after_secs": 3 })),
    );
    let uid = ws["workspace"]["uid"]
        .as_u64()
        .or(ws["uid"].as_u64())
        .expect("uid");
    let state = skip_without_freezer!(uid);
    svc.exec("i", "echo before > f.txt");
    wait_until(Duration::from_secs(15), "suspended when idle", || {
        status(&svc, "i") == "suspended"
    });
    assert!(frozen(&state));
    let suspended: Value = svc.ok("GET", "/v1/workspaces/i", None);
    let at = suspended["suspended_at_ms"]
        .as_u64()
        .expect("suspended_at_ms");
    wait_until(
        Duration::from_secs(20),
        "archived after archive_after_secs",
        || status(&svc, "i") == "stopped",
    );
    let ws = svc.ok("GET", "/v1/workspaces/i", None);
    assert_eq!(ws["last_stop"]["reason"], "idle", "{ws}");
    assert!(ws["last_stop"]["snapshot_id"].is_string(), "{ws}");
    assert!(
        ws["last_stop"]["at_ms"].as_u64().unwrap() >= at + 3000,
        "archived before archive_after_secs: {ws}"
    );
    assert!(
        !frozen(&state),
        "a stopped workspace's cgroup is left frozen"
    );
    // Connect brings it back with its files.
    svc.ok("POST", "/v1/workspaces/i/connect", None);
    let r = svc.exec("i", "cat f.txt");
    assert_eq!(r["stdout"], "before\n");
    svc.ok("DELETE", "/v1/workspaces/i", None);
}

#[test]
fn archive_after_zero_keeps_idle_stop_without_suspension() {
    let svc = Svc::start(30700, &["--tick-ms", "100"], &[]);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "z", "idle_timeout_secs": 1, "archive_after_secs": 0 })),
    );
    let mut seen = Vec::new();
    wait_until(Duration::from_secs(15), "stopped when idle", || {
        let s = status(&svc, "z");
        seen.push(s.clone());
        s == "stopped"
    });
    assert!(
        !seen.iter().any(|s| s == "suspended"),
        "suspended with archive_after_secs 0: {seen:?}"
    );
    let ws = svc.ok("GET", "/v1/workspaces/z", None);
    assert_eq!(ws["last_stop"]["reason"], "idle", "{ws}");
    svc.ok("DELETE", "/v1/workspaces/z", None);
}
