//! Create from a fixture git repository with a setup script; exec results and timeouts.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::time::{Duration, Instant};

use common::wait_until;
use serde_json::json;
use workspace_support::{Svc, fixture_repo, pids_of};

#[test]
fn create_from_fixture_repo_runs_setup_as_the_workspace_user() {
    let svc = Svc::start(21000, &[], &[]);
    let repo = fixture_repo(svc.dir.path());
    let body = json!({
        "id": "conv-1", "repo": repo.display().to_string(), "revision": "v1",
        "metadata": { "conversation": "42" }, "env": { "GREETING": "hello" },
        "secrets": { "TOKEN": "s3cret-value" },
    });
    let (status, created) = svc.api("POST", "/v1/workspaces", Some(body.clone()));
    assert_eq!(status, 201, "{created}");
    let ws = &created["workspace"];
    let uid = ws["uid"].as_u64().unwrap();
    assert!((21000..21050).contains(&uid));
    assert_eq!(ws["status"], "ready");
    let setup = &ws["setup"];
    assert_eq!(setup["ran"], true);
    assert_eq!(setup["exit_code"], 0, "{setup}");
    assert_eq!(setup["stdout"], format!("setting up as {uid}\n"));
    assert_eq!(setup["stderr"], "setup-stderr\n");
    assert!(
        ws["latest_snapshot"].is_string(),
        "a baseline snapshot is taken after setup"
    );

    // The setup ran as the workspace uid, with umask 022 and the env injected.
    let (_, setup_uid) = svc.read("conv-1", "build/setup-uid.txt");
    assert_eq!(
        String::from_utf8(setup_uid).unwrap().trim(),
        uid.to_string()
    );
    let (_, umask) = svc.read("conv-1", "build/setup-umask.txt");
    assert_eq!(String::from_utf8(umask).unwrap().trim(), "0022");
    let (_, greeting) = svc.read("conv-1", "build/greeting.txt");
    assert_eq!(greeting, b"hello\n");
    // Revision v1 is checked out: second.txt only exists in the later commit.
    let (code, _) = svc.read("conv-1", "second.txt");
    assert_eq!(code, 404);

    // The run script started in the background as the workspace user.
    let run_txt = svc.worktree("conv-1").join("build/run.txt");
    wait_until(Duration::from_secs(10), "run script", || {
        std::fs::read_to_string(&run_txt).is_ok_and(|t| t == format!("run-started-as-{uid}\n"))
    });
    assert!(!pids_of(uid as u32).is_empty());

    // Secrets are injected but never printed back by the service.
    let r = svc.exec(
        "conv-1",
        "echo $TOKEN; pwd; id -u; id -G; sudo -n true 2>/dev/null; echo sudo=$?",
    );
    let out = r["stdout"].as_str().unwrap();
    assert!(out.starts_with("s3cret-value\n"), "{out}");
    assert!(out.contains(&format!("{}\n", svc.worktree("conv-1").display())));
    assert!(
        out.contains(&format!("\n{uid}\n{uid}\n")),
        "no supplementary groups: {out}"
    );
    assert!(!out.contains("sudo=0"), "sudo must not work: {out}");
    for path in ["/v1/workspaces/conv-1", "/v1/workspaces"] {
        let (_, v) = svc.api("GET", path, None);
        assert!(
            !v.to_string().contains("s3cret-value"),
            "secret leaked by {path}"
        );
    }

    // Idempotent: the same id returns the existing workspace, not a fresh one.
    let (status, again) = svc.api("POST", "/v1/workspaces", Some(body));
    assert_eq!(status, 200);
    assert_eq!(again["created"], false);
    assert_eq!(again["workspace"]["uid"], uid);
    assert_eq!(again["workspace"]["status"], "running");

    // The CLI shows the outcome too.
    let out = svc.cli(&["info", "conv-1"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("conv-1 (running"),
        "{out:?}"
    );
}

#[test]
fn failing_setup_script_is_reported_not_hidden() {
    let svc = Svc::start(21100, &[], &[]);
    let repo = fixture_repo(svc.dir.path());
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "base", "repo": repo.display().to_string() })),
    );
    svc.exec("base", "printf '{\"scripts\":{\"setup\":\"echo broken >&2; exit 7\"}}' > .dockwarden/settings.json && git -c user.email=a@b -c user.name=a commit -qam broken");
    let src = svc.worktree("base");
    let (_, created) = svc.api(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "child", "repo": src.display().to_string() })),
    );
    assert_eq!(created["workspace"]["setup"]["exit_code"], 7, "{created}");
    assert_eq!(created["workspace"]["setup"]["stderr"], "broken\n");
}

#[test]
fn exec_nonzero_exit_is_a_result_and_timeout_kills_the_group_with_124() {
    let svc = Svc::start(21200, &[], &[]);
    let created = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "t" })));
    let uid = created["workspace"]["uid"].as_u64().unwrap() as u32;

    let r = svc.exec("t", "echo out; echo err >&2; exit 3");
    assert_eq!(
        (
            r["exit_code"].as_i64(),
            r["stdout"].as_str(),
            r["stderr"].as_str()
        ),
        (Some(3), Some("out\n"), Some("err\n"))
    );

    let started = Instant::now();
    let body = json!({ "cmd": "echo before; sleep 30 & sleep 30; echo after", "timeout_ms": 500 });
    let r = svc.ok("POST", "/v1/workspaces/t/exec", Some(body));
    assert_eq!(r["exit_code"], 124);
    assert_eq!(r["timed_out"], true);
    assert_eq!(r["stdout"], "before\n", "output so far is returned");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The background `sleep 30` was in the same process group and is gone too.
    wait_until(Duration::from_secs(5), "group killed", || {
        pids_of(uid).is_empty()
    });

    // The CLI streams output and exits with the command's code.
    let out = svc.cli(&[
        "exec",
        "t",
        "--timeout",
        "0.5",
        "--",
        "echo streamed; sleep 30",
    ]);
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "streamed\n");
    let out = svc.cli(&["exec", "t", "--", "exit 5"]);
    assert_eq!(out.status.code(), Some(5));
}

#[test]
fn kill_during_a_running_exec_ends_it_and_the_next_command_resumes_the_workspace() {
    let svc = Svc::start(21300, &[], &[]);
    let created = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "busy" })));
    let uid = created["workspace"]["uid"].as_u64().unwrap() as u32;
    let socket = svc.socket.clone();
    let started = Instant::now();
    let running = std::thread::spawn(move || {
        let body = json!({ "cmd": "echo started; sleep 60" }).to_string();
        common::http(&socket, "POST", "/v1/workspaces/busy/exec", body.as_bytes())
    });
    // Until the shell is in `sleep`, `echo started` may not have run yet.
    wait_until(Duration::from_secs(10), "exec in its sleep", || {
        pids_of(uid).iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
    });
    let killed = svc.ok("POST", "/v1/workspaces/busy/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped");
    let (status, body) = running.join().unwrap().unwrap();
    let result: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, result["exit_code"].as_i64()),
        (200, Some(137)),
        "{result}"
    );
    assert_eq!(result["stdout"], "started\n");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(pids_of(uid).is_empty());
    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces/busy/exec",
        Some(json!({ "cmd": "true" })),
    );
    assert_eq!((status, v["resumed"].as_bool()), (200, Some(true)), "{v}");
}

/// `max_runtime_secs` (create request): a workspace kept busy, so never idle, is stopped with
/// a snapshot and the reason `max_runtime` once it has been live that long.
#[test]
fn a_busy_workspace_is_stopped_at_its_maximum_runtime() {
    let svc = Svc::start(30300, &["--tick-ms", "100"], &[]);
    let t0 = std::time::Instant::now();
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(serde_json::json!({ "id": "m", "max_runtime_secs": 3 })),
    );
    svc.exec("m", "echo busy > f.txt");
    let mut status = String::new();
    while t0.elapsed() < Duration::from_secs(30) {
        let (_, ws) = svc.api("GET", "/v1/workspaces/m", None);
        status = ws["status"].as_str().unwrap_or_default().to_owned();
        if status == "stopped" {
            break;
        }
        // Busy: activity all along, so the idle timeout never fires.
        let _ = svc.api(
            "POST",
            "/v1/workspaces/m/files/mkdir?path=d&parents=1",
            None,
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(status, "stopped", "never stopped at its maximum runtime");
    assert!(
        t0.elapsed() >= Duration::from_secs(3),
        "stopped before its maximum runtime"
    );
    let ws = svc.ok("GET", "/v1/workspaces/m", None);
    assert_eq!(ws["last_stop"]["reason"], "max_runtime", "{ws}");
    let snap = ws["last_stop"]["snapshot_id"].as_str().unwrap().to_owned();
    let snaps = svc.ok("GET", "/v1/workspaces/m/snapshots", None);
    assert!(
        snaps
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == snap.as_str() && s["reason"] == "max_runtime"),
        "{snaps}"
    );
    // Connect starts the clock again.
    svc.ok("POST", "/v1/workspaces/m/connect", None);
    let ws = svc.ok("GET", "/v1/workspaces/m", None);
    assert_eq!(ws["status"], "running");
    assert!(ws["live_since_ms"].as_u64().is_some(), "{ws}");
    svc.ok("DELETE", "/v1/workspaces/m", None);
}

/// A standard workspace has no Docker daemon: a setup script and a command that need one
/// fail with a note naming the fix, `ws reprovision <id> --runtime docker-compose`, in the
/// answer and in the CLI's output.
#[test]
fn a_docker_command_in_a_standard_workspace_names_the_reprovision() {
    let svc = Svc::start(30350, &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let repo = repo::repo_with(
        dir.path(),
        "needs-docker",
        &json!({ "runtime": "standard", "scripts": { "setup": "docker info" } }),
    );
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "nd", "repo": repo.to_str().unwrap() })),
    );
    let setup = &created["workspace"]["setup"];
    assert_ne!(setup["exit_code"], 0, "{created}");
    let fix = "dockwarden ws reprovision nd --runtime docker-compose";
    assert!(
        setup["notes"][0].as_str().unwrap_or_default().contains(fix),
        "{created}"
    );

    let r = svc.exec("nd", "docker ps");
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(
        r["notes"][0].as_str().unwrap_or_default().contains(fix),
        "{r}"
    );
    let o = svc.cli(&["exec", "nd", "--", "docker ps"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("dockwarden: nd: note: ") && stderr.contains(fix),
        "{stderr}"
    );
    // A failure that is not about Docker gets no note.
    let r = svc.exec("nd", "exit 3");
    assert!(r["notes"].is_null(), "{r}");
    svc.ok("DELETE", "/v1/workspaces/nd", None);
}

/// The run script is a runtime part: killed, it is started again by upkeep within 5 s and
/// the workspace's `last_recovery` says so; stopped by `kill`, it stays stopped.
#[test]
fn a_killed_run_script_is_started_again_and_recorded() {
    let svc = Svc::start(30750, &["--tick-ms", "100"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let repo = repo::repo_with(
        dir.path(),
        "runs",
        &json!({ "runtime": "standard", "scripts": { "run": "exec sleep 1001" } }),
    );
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "rs", "repo": repo.to_str().unwrap() })),
    );
    let uid = created["workspace"]["uid"].as_u64().unwrap() as u32;
    let sleeper = || {
        pids_of(uid).into_iter().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"1001"))
        })
    };
    wait_until(Duration::from_secs(10), "the run script runs", || {
        sleeper().is_some()
    });
    let first = sleeper().unwrap();
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until(
        Duration::from_secs(5),
        "the run script started again",
        || sleeper().is_some_and(|p| p != first),
    );
    eprintln!("run script restarted in {} ms", t0.elapsed().as_millis());
    let ws = svc.ok("GET", "/v1/workspaces/rs", None);
    let reason = ws["last_recovery"]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("run script restarted after it died: killed by signal 9"),
        "{ws}"
    );
    // A deliberate stop is not a death: after kill nothing is started again.
    svc.ok("POST", "/v1/workspaces/rs/kill", None);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(sleeper(), None, "the run script came back after kill");
    svc.ok("DELETE", "/v1/workspaces/rs", None);
}
