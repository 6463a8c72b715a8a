//! Idle stop: a workspace with no activity for its idle timeout is snapshotted and
//! stopped; a running exec counts as activity.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::time::{Duration, Instant};

use common::wait_until;
use serde_json::json;
use workspace_support::Svc;

#[test]
fn idle_stop_after_a_short_timeout_but_not_while_an_exec_runs() {
    // `--archive-after 0`: idle archives at once instead of suspending first
    // (tests/workspace_suspend.rs covers suspension).
    let svc = Svc::start(25000, &["--tick-ms", "100", "--archive-after", "0"], &[]);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "idle", "idle_timeout_secs": 1 })),
    );
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "default" })));
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/default", None)["idle_timeout_secs"],
        3600
    );

    // An exec twice as long as the idle timeout: the workspace must stay live throughout.
    let started = Instant::now();
    let r = svc.exec("idle", "sleep 2.5; echo still-here > alive.txt; echo done");
    assert_eq!(r["stdout"], "done\n");
    assert!(started.elapsed() >= Duration::from_millis(2500));
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/idle", None)["status"],
        "running"
    );

    // With nothing running it stops about one timeout later, with a snapshot.
    let quiet = Instant::now();
    wait_until(Duration::from_secs(10), "idle stop", || {
        svc.ok("GET", "/v1/workspaces/idle", None)["status"] == "stopped"
    });
    assert!(
        quiet.elapsed() >= Duration::from_millis(800),
        "stopped too early: {:?}",
        quiet.elapsed()
    );
    let snaps = svc.ok("GET", "/v1/workspaces/idle/snapshots", None);
    assert_eq!(snaps[0]["reason"], "idle");
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/default", None)["status"],
        "ready",
        "default timeout is long"
    );

    // Connect brings it back with its files.
    svc.ok("POST", "/v1/workspaces/idle/connect", None);
    assert_eq!(svc.read("idle", "alive.txt").1, b"still-here\n");
}
