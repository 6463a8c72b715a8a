//! The lifecycle service under faults (issue 15), each test named after its fault and run
//! against the real `dockwarden serve`, real processes and real disks: a second service on
//! one state directory, a worktree deleted while live, a full disk (a small tmpfs), SIGTERM
//! and `kill -9` with a running exec and a run script. Calls that issue 15 changed are in
//! `workspace_calls.rs`.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{http, wait_until};
use repo::repo_with;
use serde_json::{Value, json};
use workspace_support::{BIN, Svc, pids_of};

/// The pid of the `serve` process answering on `svc`'s socket.
fn serve_pid(svc: &Svc) -> i32 {
    let sock = svc.socket.display().to_string();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(ent.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.iter().any(|a| a == "serve") && args.iter().any(|a| a == &sock) {
            return pid;
        }
    }
    panic!("no serve process for {sock}");
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
        .unwrap_or(false)
}

fn uid_of(v: &Value) -> u32 {
    v["workspace"]["uid"].as_u64().unwrap() as u32
}

#[test]
fn second_serve_on_the_same_state_dir_refuses_to_start_and_the_first_ones_create_is_kept() {
    let svc = Svc::start(28000, &[], &[]);
    let repo = repo_with(
        svc.dir.path(),
        "slow-setup",
        &json!({ "scripts": { "setup": "sleep 4; echo set-up" } }),
    );
    let socket = svc.socket.clone();
    let body = json!({ "id": "slow", "repo": repo.display().to_string() }).to_string();
    let pending = std::thread::spawn(move || {
        http(&socket, "POST", "/v1/workspaces", body.as_bytes()).unwrap()
    });
    wait_until(Duration::from_secs(20), "setup running", || {
        !pids_of(28000).is_empty()
    });

    // The same state directory on another socket: refused, nothing touched.
    let other_socket = svc.dir.path().join("second.sock");
    let second = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(&other_socket)
        .arg("--state-dir")
        .arg(&svc.state)
        .args(["--uid-base", "28000", "--uid-count", "50", "--no-docker"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "second serve started: {err}");
    assert!(
        err.contains("is in use by another `dockwarden serve`"),
        "clear message: {err}"
    );
    assert!(!other_socket.exists(), "the refused service bound nothing");

    // The live socket with another state directory: refused, the socket still answers.
    let second = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(&svc.socket)
        .arg("--state-dir")
        .arg(svc.dir.path().join("other-state"))
        .args(["--uid-base", "28040", "--uid-count", "5", "--no-docker"])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "second serve started: {err}");
    assert!(err.contains("is in use by a running service"), "{err}");
    assert_eq!(svc.ok("GET", "/v1/health", None)["status"], "ok");

    let (status, created) = pending.join().unwrap();
    let created: Value = serde_json::from_slice(&created).unwrap();
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["workspace"]["status"], "ready");
    assert_eq!(
        created["workspace"]["setup"]["exit_code"], 0,
        "setup not killed"
    );
    let listed = svc.ok("GET", "/v1/workspaces", None);
    assert!(
        listed.as_array().unwrap().iter().any(|w| w["id"] == "slow"),
        "the acknowledged create is kept: {listed}"
    );
}

#[test]
fn worktree_deleted_while_live_is_restored_on_the_next_call_and_reports_the_loss() {
    let svc = Svc::start(28100, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "w" })));
    svc.raw("PUT", "/v1/workspaces/w/files/content?path=a.txt", b"kept");
    let snap = svc.ok("POST", "/v1/workspaces/w/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_dir_all(svc.worktree("w")).unwrap();

    let out = svc.exec("w", "cat a.txt");
    assert_eq!(out["exit_code"], 0, "{out}");
    assert_eq!(out["stdout"], "kept");
    assert_eq!(out["resumed"], false);
    assert_eq!(out["recovery"]["restored_from"], snap.as_str(), "{out}");
    let unrecovered = out["recovery"]["unrecovered"].as_array().unwrap();
    assert!(
        !unrecovered.is_empty() && unrecovered[0].as_str().unwrap().contains("unknown"),
        "a full deletion is never reported as nothing lost: {out}"
    );
    let info = svc.ok("GET", "/v1/workspaces/w", None);
    assert_eq!(info["status"], "running");
    assert_eq!(info["last_recovery"]["restored_from"], snap.as_str());

    // A file call heals too.
    std::fs::remove_dir_all(svc.worktree("w")).unwrap();
    assert_eq!(svc.read("w", "a.txt"), (200, b"kept".to_vec()));
}

#[test]
fn worktree_deleted_while_live_is_restored_by_upkeep_without_a_call() {
    let svc = Svc::start(28200, &["--tick-ms", "200"], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "u" })));
    svc.raw("PUT", "/v1/workspaces/u/files/content?path=b.txt", b"back");
    svc.ok("POST", "/v1/workspaces/u/snapshot", None);
    let before = svc.ok("GET", "/v1/workspaces/u", None)["last_recovery"].clone();
    assert!(before.is_null());
    std::fs::remove_dir_all(svc.worktree("u")).unwrap();
    wait_until(
        Duration::from_secs(20),
        "upkeep restores the worktree",
        || svc.worktree("u").join("b.txt").exists(),
    );
    let info = svc.ok("GET", "/v1/workspaces/u", None);
    assert!(
        info["last_recovery"]["reason"]
            .as_str()
            .unwrap()
            .contains("upkeep"),
        "{info}"
    );
    assert_eq!(
        std::fs::read(svc.worktree("u").join("b.txt")).unwrap(),
        b"back"
    );
}

/// A tmpfs of `size` mounted over `dir`, unmounted (lazily) on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .ok()?;
        st.success().then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A service whose state directory is a fresh 64 MiB tmpfs.
fn svc_on_small_disk(uid_base: u32) -> Option<(Svc, Tmpfs)> {
    let mut svc = Svc::start(uid_base, &[], &[]);
    svc.kill9();
    let disk = Tmpfs::mount(&svc.state, "64m")?;
    svc.restart(&[]);
    Some((svc, disk))
}

#[test]
fn disk_full_state_dir_answers_no_space_and_kill_still_stops_the_processes() {
    let Some((mut svc, disk)) = svc_on_small_disk(28300) else {
        println!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let created = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "full" })));
    let uid = uid_of(&created);
    svc.exec("full", "seq 1 1000 > small.txt");
    let filled = svc.exec(
        "full",
        "dd if=/dev/urandom of=big bs=1M count=100 2>&1; sync",
    );
    assert!(
        filled["stdout"].as_str().unwrap().contains("No space left"),
        "the disk is full: {filled}"
    );
    let socket = svc.socket.clone();
    let _sleeper = std::thread::spawn(move || {
        http(
            &socket,
            "POST",
            "/v1/workspaces/full/exec",
            json!({ "cmd": "sleep 600" }).to_string().as_bytes(),
        )
    });
    wait_until(Duration::from_secs(10), "the sleeper runs", || {
        pids_of(uid).len() >= 2
    });

    let (status, v) = svc.api("POST", "/v1/workspaces/full/snapshot", None);
    assert_eq!(status, 507, "{v}");
    assert_eq!(v["code"], "no_space");
    let msg = v["message"].as_str().unwrap();
    assert!(msg.contains("bytes free"), "{msg}");
    assert!(
        msg.contains(&svc.state.display().to_string()),
        "names the path: {msg}"
    );

    let (status, v) = svc.raw(
        "PUT",
        "/v1/workspaces/full/files/content?path=new.txt",
        &vec![b'x'; 1024 * 1024],
    );
    let v: Value = serde_json::from_slice(&v).unwrap();
    assert_eq!(status, 507, "{v}");
    assert_eq!(v["code"], "no_space");
    assert!(v["message"].as_str().unwrap().contains("new.txt"), "{v}");

    let killed = svc.ok("POST", "/v1/workspaces/full/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped", "{killed}");
    assert!(killed["snapshot_id"].is_null(), "{killed}");
    assert!(
        killed["snapshot_error"]
            .as_str()
            .unwrap()
            .contains("no space left"),
        "{killed}"
    );
    wait_until(Duration::from_secs(10), "every process stopped", || {
        pids_of(uid).is_empty()
    });
    let info = svc.ok("GET", "/v1/workspaces/full", None);
    assert_eq!(info["status"], "stopped");
    assert!(info["last_stop"]["snapshot_error"].is_string(), "{info}");

    // No journal row is left behind: after a restart the workspace is still stopped (a
    // left-over `kill` row would be finished again) and it can be used once space is back.
    svc.restart(&[]);
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/full", None)["status"],
        "stopped"
    );
    let (_, stopped_read) = svc.read("full", "small.txt");
    assert!(stopped_read.starts_with(b"1\n"));
    let out = svc.exec("full", "rm -f big && echo freed");
    assert_eq!(out["resumed"], true, "{out}");
    assert_eq!(out["stdout"], "freed\n");
    let snap = svc.ok("POST", "/v1/workspaces/full/snapshot", None);
    assert!(snap["snapshot_id"].is_string(), "{snap}");
    svc.kill9();
    drop(disk);
}

#[test]
fn setup_that_fills_the_disk_is_reported_not_fatal() {
    let Some((svc, disk)) = svc_on_small_disk(28400) else {
        println!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let repo = repo_with(
        svc.dir.path(),
        "filler",
        &json!({ "scripts": { "setup": "dd if=/dev/zero of=fill bs=1M count=200" } }),
    );
    let (status, v) = svc.api(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "filler", "repo": repo.display().to_string() })),
    );
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["workspace"]["status"], "ready", "{v}");
    assert_ne!(v["workspace"]["setup"]["exit_code"], 0, "{v}");
    assert!(
        v["workspace"]["setup"]["stderr"]
            .as_str()
            .unwrap()
            .contains("No space left"),
        "{v}"
    );
    let listed = svc.ok("GET", "/v1/workspaces", None);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["id"] == "filler")
    );
    // Once space is back, it works.
    let out = svc.exec("filler", "rm fill && echo ok");
    assert_eq!(out["stdout"], "ok\n");
    let mut svc = svc;
    svc.kill9();
    drop(disk);
}

fn run_script_workspace(svc: &Svc, id: &str) -> u32 {
    let repo = repo_with(
        svc.dir.path(),
        &format!("run-{id}"),
        &json!({ "scripts": { "run": "exec sleep 600" } }),
    );
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": id, "repo": repo.display().to_string() })),
    );
    let uid = uid_of(&created);
    wait_until(Duration::from_secs(10), "run script started", || {
        !pids_of(uid).is_empty()
    });
    uid
}

#[test]
fn sigterm_with_a_running_exec_and_a_run_script_stops_them_and_records_it() {
    let mut svc = Svc::start(28500, &[], &[]);
    let uid = run_script_workspace(&svc, "t");
    let socket = svc.socket.clone();
    let exec = std::thread::spawn(move || {
        http(
            &socket,
            "POST",
            "/v1/workspaces/t/exec",
            json!({ "cmd": "sleep 600; echo never" })
                .to_string()
                .as_bytes(),
        )
    });
    wait_until(Duration::from_secs(10), "exec running", || {
        pids_of(uid).len() >= 2
    });
    let pid = serve_pid(&svc);
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until(Duration::from_secs(30), "the service exits", || !alive(pid));
    assert!(
        pids_of(uid).is_empty(),
        "no workspace process outlives the service"
    );
    if let Ok((status, body)) = exec.join().unwrap() {
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert!(
            status != 200 || v["exit_code"] != 0,
            "the exec did not finish: {v}"
        );
    }

    svc.restart(&[]);
    let info = svc.ok("GET", "/v1/workspaces/t", None);
    assert!(
        info["interrupted"]["reason"]
            .as_str()
            .unwrap()
            .contains("SIGTERM"),
        "{info}"
    );
    assert!(
        info["interrupted"]["processes"].as_u64().unwrap() >= 2,
        "{info}"
    );
    wait_until(Duration::from_secs(10), "the run script is back", || {
        !pids_of(uid).is_empty()
    });
}

#[test]
fn kill_9_with_a_running_exec_and_a_run_script_finds_and_stops_them_on_restart() {
    let mut svc = Svc::start(28600, &[], &[]);
    let uid = run_script_workspace(&svc, "k");
    let socket = svc.socket.clone();
    let _exec = std::thread::spawn(move || {
        http(
            &socket,
            "POST",
            "/v1/workspaces/k/exec",
            json!({ "cmd": "sleep 600" }).to_string().as_bytes(),
        )
    });
    wait_until(Duration::from_secs(10), "exec running", || {
        pids_of(uid).len() >= 2
    });
    svc.kill9();
    let orphans = pids_of(uid);
    assert!(
        orphans.len() >= 2,
        "the crash left them running: {orphans:?}"
    );

    svc.restart(&[]);
    for pid in &orphans {
        assert!(!alive(*pid), "orphan {pid} was stopped");
    }
    let info = svc.ok("GET", "/v1/workspaces/k", None);
    assert!(
        info["interrupted"]["reason"]
            .as_str()
            .unwrap()
            .contains("kill -9"),
        "{info}"
    );
    assert!(
        info["interrupted"]["processes"].as_u64().unwrap() >= 2,
        "{info}"
    );
    assert_eq!(info["status"], "running");
    wait_until(
        Duration::from_secs(10),
        "the run script is started again",
        || pids_of(uid).iter().any(|p| !orphans.contains(p)),
    );
}
