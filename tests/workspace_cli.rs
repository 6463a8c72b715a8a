//! The human output of `dockwarden ws` against the real service: every verb prints what it
//! did (golden lines), never an empty workspace block; a resize waiting for approval names its
//! request and the command that approves it; an exec that had to resume and restore the
//! workspace says so on stderr, and `info` keeps the recovery.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::path::Path;
use std::process::Output;

use serde_json::json;
use workspace_support::Svc;

fn out(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// No human output may print the block of a workspace it does not have.
fn no_empty_block(text: &str) {
    assert!(
        !text.contains("uid null") && !text.contains("nulls"),
        "an empty workspace block: {text}"
    );
}

#[test]
fn file_operations_print_the_path_and_what_was_done() {
    let svc = Svc::start(30100, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    let golden: &[(&[&str], &str)] = &[
        (
            &["files", "f", "mkdir", "-p", "a/b"],
            "created directory a/b (with its parents)\n",
        ),
        (
            &["files", "f", "write", "a/b/x.txt", "--content", "hi"],
            "wrote a/b/x.txt (2 bytes)\n",
        ),
        (
            &["files", "f", "copy", "a/b/x.txt", "a/y.txt"],
            "copied a/b/x.txt to a/y.txt\n",
        ),
        (
            &["files", "f", "rename", "a/y.txt", "a/z.txt"],
            "renamed a/y.txt to a/z.txt\n",
        ),
        (&["files", "f", "exists", "a/z.txt"], "a/z.txt: exists\n"),
        (&["files", "f", "rm", "a/z.txt"], "removed a/z.txt\n"),
        (
            &["files", "f", "rm", "-r", "a"],
            "removed a and everything in it\n",
        ),
        (&["files", "f", "exists", "a"], "a: does not exist\n"),
        (&["files", "f", "mkdir", "d"], "created directory d\n"),
    ];
    for (args, want) in golden {
        let got = out(&svc.cli(args));
        assert_eq!(&got, want, "ws {args:?}");
        no_empty_block(&got);
    }
    // What was printed happened.
    assert!(svc.worktree("f").join("d").is_dir());
    assert!(!svc.worktree("f").join("a").exists());
    svc.ok("DELETE", "/v1/workspaces/f", None);
}

/// The plan layer of `tests/workspace_resources.rs`: memory over 256 MiB needs approval.
const PLAN: &str = r#"
[platform.ceiling]
cpu = 4
memory = "1GiB"
[plan.ceiling]
memory = "512MiB"
disk = "128MiB"
[plan.approval]
memory = "256MiB"
cpu = 2
[defaults.reservation]
cpu = 0.25
memory = "32MiB"
[defaults.burst]
cpu = 1
memory = "64MiB"
pids = 256
"#;

#[test]
fn resize_waiting_for_approval_shows_its_request_and_approve_what_it_applied() {
    if !nix::unistd::geteuid().is_root()
        || !(Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
            || Path::new("/sys/fs/cgroup/cgroup.controllers").exists())
    {
        // CI runs as root with cgroups; a developer without them sees why.
        println!("skipped: resizes need root and a cgroup hierarchy");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("resources.toml");
    std::fs::write(&file, PLAN).unwrap();
    let svc = Svc::start(30150, &["--resources", file.to_str().unwrap()], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "rs" })));

    let got = out(&svc.cli(&["resize", "rs", "--burst-memory", "300MiB"]));
    no_empty_block(&got);
    let lines: Vec<&str> = got.lines().collect();
    let id = lines[0]
        .strip_prefix("resize request ")
        .and_then(|l| l.strip_suffix(" for rs: pending approval"))
        .unwrap_or_else(|| panic!("first line: {got}"));
    assert_eq!(
        lines[1], "  memory burst limit: 64 MiB -> 300 MiB: waiting for approval",
        "{got}"
    );
    assert!(
        lines[2].starts_with("approval needed: ") && lines[2].contains("layer `plan`"),
        "{got}"
    );
    assert_eq!(
        lines[3],
        format!(
            "approve with `dockwarden ws approve {id}` or reject with `dockwarden ws reject {id}`"
        ),
        "{got}"
    );
    assert_eq!(lines.len(), 4, "{got}");
    // The id printed is the one `resize-requests` lists as pending.
    let listed = svc.ok("GET", "/v1/workspaces/rs/resize-requests", None);
    assert!(listed.to_string().contains(id), "{listed}");

    let got = out(&svc.cli(&["approve", id]));
    assert_eq!(
        got,
        format!(
            "resize request {id} for rs: approved and applied\n  memory burst limit: 64 MiB -> 300 MiB: applied\n"
        )
    );
    svc.ok("DELETE", "/v1/workspaces/rs", None);
}

#[test]
fn exec_after_a_recovery_says_it_resumed_and_what_was_restored() {
    let svc = Svc::start(30200, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "k" })));
    svc.exec("k", "echo kept > saved.txt");
    let killed = svc.ok("POST", "/v1/workspaces/k/kill", None);
    let snap = killed["snapshot"]["id"].as_str().unwrap().to_owned();
    // The worktree is lost while the workspace is stopped.
    std::fs::remove_dir_all(svc.worktree("k")).unwrap();

    let o = svc.cli(&["exec", "k", "--", "cat saved.txt"]);
    let stdout = out(&o);
    assert_eq!(stdout, "kept\n", "the command's own output stays on stdout");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0], "dockwarden: k: resumed: the workspace was stopped and was started first",
        "{stderr}"
    );
    assert!(
        lines[1].starts_with(&format!("dockwarden: k: restored from {snap} (")),
        "{stderr}"
    );
    assert!(
        lines.last().unwrap().starts_with("dockwarden: k: note: "),
        "{stderr}"
    );

    // `info` keeps it.
    let info = out(&svc.cli(&["info", "k"]));
    assert!(
        info.contains(&format!("last recovery: restored from {snap} (")),
        "{info}"
    );
    // A second exec on the live workspace reports nothing.
    let o = svc.cli(&["exec", "k", "--", "true"]);
    out(&o);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    svc.ok("DELETE", "/v1/workspaces/k", None);
}

#[test]
fn the_runtime_flag_lists_its_values_in_help() {
    for sub in ["create", "reprovision"] {
        let o = std::process::Command::new(workspace_support::BIN)
            .args(["ws", sub, "--help"])
            .output()
            .unwrap();
        let text = out(&o);
        assert!(
            text.contains("[possible values: standard, docker-compose]"),
            "ws {sub}: {text}"
        );
    }
}
