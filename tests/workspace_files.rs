//! The files API: escapes fail with `invalid_path`, big reads with `too_large`, big writes
//! with `invalid`; writes are atomic and owned by the workspace user; stopped workspaces
//! can be read without starting them.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::os::unix::fs::MetadataExt;

use serde_json::{Value, json};
use workspace_support::Svc;

fn code(svc: &Svc, method: &str, path: &str) -> (u16, String) {
    let (status, v) = svc.api(method, path, None);
    (status, v["code"].as_str().unwrap_or_default().to_string())
}

#[test]
fn rejects_paths_that_escape_the_worktree_with_invalid_path() {
    let svc = Svc::start(22000, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    svc.exec(
        "f",
        "ln -s /etc etc-link; ln -s /etc/hostname host-link; mkdir d; ln -s .. d/up",
    );
    for p in [
        "../outside",
        "a/../../outside",
        "%2Fetc%2Fhostname",
        "etc-link/hostname",
        "host-link",
        "d/up/d",
    ] {
        assert_eq!(
            code(
                &svc,
                "GET",
                &format!("/v1/workspaces/f/files/content?path={p}")
            ),
            (400, "invalid_path".into()),
            "read {p}"
        );
    }
    let (status, v) = svc.api(
        "PUT",
        "/v1/workspaces/f/files/content?path=etc-link/pwned",
        None,
    );
    assert_eq!(
        (status, v["code"].as_str()),
        (400, Some("invalid_path")),
        "write through a symlink"
    );
    assert!(!std::path::Path::new("/etc/pwned").exists());
    assert_eq!(
        code(
            &svc,
            "POST",
            "/v1/workspaces/f/files/rename?from=host-link&to=../x"
        ),
        (400, "invalid_path".into())
    );
    assert_eq!(
        code(
            &svc,
            "DELETE",
            "/v1/workspaces/f/files?path=etc-link/hostname"
        ),
        (400, "invalid_path".into())
    );
    assert_eq!(
        code(&svc, "GET", "/v1/workspaces/f/files/list?path=etc-link"),
        (400, "invalid_path".into())
    );
    assert!(std::path::Path::new("/etc/hostname").exists());
    // The CLI reports the code.
    let out = svc.cli(&["files", "f", "read", "../x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("(invalid_path)"));
}

#[test]
fn workspace_user_cannot_read_another_workspace_the_snapshot_store_or_the_database() {
    let svc = Svc::start(22400, &[], &[]);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "victim", "secrets": { "TOKEN": "hunter2" } })),
    );
    svc.raw(
        "PUT",
        "/v1/workspaces/victim/files/content?path=private.txt",
        b"private",
    );
    svc.ok("POST", "/v1/workspaces/victim/snapshot", None);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "attacker" })));
    let victim = svc.worktree("victim");
    for cmd in [
        format!("cat {}/private.txt", victim.display()),
        format!("ls {}", victim.parent().unwrap().display()),
        format!("ls {}/snapshots", svc.state.display()),
        format!("cat {}/state.db", svc.state.display()),
        format!("ls {}/workspaces", svc.state.display()),
    ] {
        let r = svc.exec("attacker", &cmd);
        assert_ne!(r["exit_code"], 0, "`{cmd}` must fail: {r}");
        assert!(!r["stdout"].as_str().unwrap().contains("private"), "{r}");
    }
    // The victim itself still reaches its own worktree.
    assert_eq!(svc.exec("victim", "cat private.txt")["stdout"], "private");
}

#[test]
fn reads_over_2_mib_are_too_large_and_writes_over_2_mib_are_invalid() {
    let svc = Svc::start(22100, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    svc.exec(
        "f",
        "head -c 2097152 /dev/zero > exact; head -c 2097153 /dev/zero > big",
    );
    let (status, data) = svc.read("f", "exact");
    assert_eq!((status, data.len()), (200, 2 * 1024 * 1024));
    assert_eq!(
        code(&svc, "GET", "/v1/workspaces/f/files/content?path=big"),
        (413, "too_large".into())
    );

    let (status, _) = svc.raw(
        "PUT",
        "/v1/workspaces/f/files/content?path=w",
        &vec![b'x'; 2 * 1024 * 1024],
    );
    assert_eq!(status, 200);
    let (status, body) = svc.raw(
        "PUT",
        "/v1/workspaces/f/files/content?path=w2",
        &vec![b'x'; 2 * 1024 * 1024 + 1],
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, v["code"].as_str()), (400, Some("invalid")));
    assert!(
        !svc.worktree("f").join("w2").exists(),
        "nothing half-written"
    );
}

#[test]
fn file_operations_work_and_belong_to_the_workspace_user() {
    let svc = Svc::start(22200, &[], &[]);
    let created = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    let uid = created["workspace"]["uid"].as_u64().unwrap() as u32;
    let (status, _) = svc.raw(
        "PUT",
        "/v1/workspaces/f/files/content?path=src/app/main.py",
        b"print(1)\n",
    );
    assert_eq!(status, 200);
    let meta = std::fs::metadata(svc.worktree("f").join("src/app/main.py")).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (uid, 0o644));
    assert_eq!(
        std::fs::metadata(svc.worktree("f").join("src/app"))
            .unwrap()
            .uid(),
        uid
    );
    // The workspace user can change what the service wrote.
    assert_eq!(
        svc.exec("f", "echo more >> src/app/main.py")["exit_code"],
        0
    );

    let list = svc.ok("GET", "/v1/workspaces/f/files/list?path=src/app", None);
    assert_eq!(list[0]["name"], "main.py");
    assert_eq!(list[0]["kind"], "file");
    assert_eq!(
        svc.ok(
            "GET",
            "/v1/workspaces/f/files/exists?path=src/app/main.py",
            None
        )["exists"],
        true
    );
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/f/files/exists?path=nope", None)["exists"],
        false
    );
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/f/files/info?path=src", None)["kind"],
        "dir"
    );
    svc.ok(
        "POST",
        "/v1/workspaces/f/files/mkdir?path=a/b/c&parents=1",
        None,
    );
    assert_eq!(
        code(&svc, "POST", "/v1/workspaces/f/files/mkdir?path=a/b/c"),
        (400, "invalid".into())
    );
    svc.ok(
        "POST",
        "/v1/workspaces/f/files/copy?from=src/app/main.py&to=a/copy.py",
        None,
    );
    svc.ok(
        "POST",
        "/v1/workspaces/f/files/rename?from=a/copy.py&to=a/b/moved.py",
        None,
    );
    assert_eq!(svc.read("f", "a/b/moved.py").1, b"print(1)\nmore\n");
    assert_eq!(
        code(&svc, "DELETE", "/v1/workspaces/f/files?path=a"),
        (400, "invalid".into())
    );
    svc.ok("DELETE", "/v1/workspaces/f/files?path=a&recursive=1", None);
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/f/files/exists?path=a", None)["exists"],
        false
    );
    assert_eq!(
        code(&svc, "GET", "/v1/workspaces/f/files/content?path=missing"),
        (404, "not_found".into())
    );
    // No temp files left behind by atomic writes.
    let names: Vec<String> = std::fs::read_dir(svc.worktree("f").join("src/app"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["main.py".to_string()]);

    // CLI round trip.
    let out = svc.cli(&["files", "f", "write", "notes.txt", "--content", "hi"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(svc.cli(&["files", "f", "read", "notes.txt"]).stdout, b"hi");
}

#[test]
fn stopped_workspaces_can_be_read_without_starting_them() {
    let svc = Svc::start(22300, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "f" })));
    svc.raw(
        "PUT",
        "/v1/workspaces/f/files/content?path=keep.txt",
        b"kept",
    );
    svc.ok("POST", "/v1/workspaces/f/kill", None);
    assert_eq!(svc.read("f", "keep.txt"), (200, b"kept".to_vec()));
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/f/files/list?path=", None)[0]["name"],
        "keep.txt"
    );
    assert_eq!(
        svc.ok("GET", "/v1/workspaces/f", None)["status"],
        "stopped",
        "reading did not start it"
    );
    // A change resumes it (transparent resume).
    let (status, v) = svc.api("PUT", "/v1/workspaces/f/files/content?path=x", None);
    assert_eq!((status, v["resumed"].as_bool()), (200, Some(true)), "{v}");
}
