//! Issue 23, attack 6: a deleted workspace's uid goes to the next workspace, so whatever the
//! old holder left outside `workspaces/<id>` under that uid (0600 files in `/tmp`, `/var/tmp`
//! and `/dev/shm`, SysV shared memory, message queues, semaphores, a process left behind)
//! would be the next holder's. Delete sweeps the uid first.
//!
//! Since workspace commands run in sandboxes of their own (private `/tmp`, `/dev/shm` and IPC
//! namespace, all gone with the sandbox), what a holder can leave on the host is what ran
//! outside one: the tests leave it as the uid from the host side (as a crash of an older
//! service, or a process outside the sandbox, would), and also check that what the first
//! holder wrote inside its sandbox never reaches the next one.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::process::Command;

use serde_json::{Value, json};
use workspace_support::{Svc, pids_of};

const PY: &str = "/usr/bin/python3";

fn root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}

fn create(svc: &Svc, id: &str) -> u32 {
    let (status, v) = svc.api("POST", "/v1/workspaces", Some(json!({ "id": id })));
    assert_eq!(status, 201, "{v}");
    v["workspace"]["uid"].as_u64().unwrap() as u32
}

fn exec_ok(svc: &Svc, id: &str, cmd: &str) -> String {
    let r: Value = svc.exec(id, cmd);
    assert_eq!(r["exit_code"], 0, "{cmd}: {r}");
    r["stdout"].as_str().unwrap().to_string()
}

/// SysV keys of the objects the first holder makes (distinct per test by `tag`).
fn keys(tag: u32) -> [u32; 3] {
    [
        0x0d70_0000 + tag * 4,
        0x0d70_0001 + tag * 4,
        0x0d70_0002 + tag * 4,
    ]
}

/// The secrets a holder leaves outside its directory, as the workspace uid on the host: 0600
/// files in the three temporary directories (one in a directory of its own), a shm segment,
/// a message queue with a message in it, a semaphore set, and a process that keeps writing.
fn leave_secrets(uid: u32, tag: u32) {
    let [shm, msg, sem] = keys(tag);
    let script = format!(
        "set -e; umask 077
         echo secret > /tmp/dw-secret-{tag}
         echo secret > /var/tmp/dw-secret-{tag}
         echo secret > /dev/shm/dw-secret-{tag}
         mkdir /tmp/dw-dir-{tag}; echo secret > /tmp/dw-dir-{tag}/inner
         ln -s /etc/passwd /tmp/dw-link-{tag}
         {PY} -c 'import ctypes; libc = ctypes.CDLL(None)
s = libc.shmget({shm}, 4096, 0o1600); m = libc.msgget({msg}, 0o1600); e = libc.semget({sem}, 1, 0o1600)
assert min(s, m, e) >= 0, (s, m, e)
buf = ctypes.create_string_buffer(b\"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00secret\")
assert libc.msgsnd(m, buf, 6, 0) == 0'
         nohup sh -c 'while :; do echo secret > /tmp/dw-respawn-{tag}; sleep 0.1; done' >/dev/null 2>&1 &
         sleep 0.3; ls /tmp/dw-respawn-{tag}"
    );
    use std::os::unix::process::CommandExt;
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .uid(uid)
        .gid(uid)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Paths under the three directories (same filesystem only) owned by `uid`.
fn files_of(uid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for root in ["/tmp", "/var/tmp", "/dev/shm"] {
        let o = Command::new("find")
            .args([root, "-xdev", "-uid", &uid.to_string()])
            .output()
            .unwrap();
        out.extend(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string),
        );
    }
    out
}

/// `/proc/sysvipc` lines whose uid or cuid is `uid`.
fn ipc_of(uid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for t in ["shm", "msg", "sem"] {
        let text = std::fs::read_to_string(format!("/proc/sysvipc/{t}")).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let col = |n: &str| header.iter().position(|c| *c == n).unwrap();
        let (u, c) = (col("uid"), col("cuid"));
        for l in lines {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f[u] == uid.to_string() || f[c] == uid.to_string() {
                out.push(format!("{t}: {l}"));
            }
        }
    }
    out
}

fn delete(svc: &Svc, id: &str) {
    let (status, v) = svc.api("DELETE", &format!("/v1/workspaces/{id}"), None);
    assert_eq!(status, 200, "{v}");
}

#[test]
fn delete_leaves_no_file_or_ipc_object_owned_by_the_uid() {
    if !root() || !std::path::Path::new(PY).exists() {
        println!("skipped: needs root and {PY}");
        return;
    }
    let svc = Svc::start(27400, &[], &[]);
    let uid = create(&svc, "old");
    leave_secrets(uid, 1);
    assert!(files_of(uid).len() >= 5, "{:?}", files_of(uid));
    assert_eq!(ipc_of(uid).len(), 3, "{:?}", ipc_of(uid));
    delete(&svc, "old");
    assert_eq!(
        pids_of(uid),
        Vec::<i32>::new(),
        "a process of the uid outlived the delete"
    );
    assert_eq!(
        files_of(uid),
        Vec::<String>::new(),
        "files of the uid left by delete"
    );
    assert_eq!(
        ipc_of(uid),
        Vec::<String>::new(),
        "SysV IPC objects of the uid left by delete"
    );
    // What the sweep did not own stays.
    assert!(std::fs::metadata("/etc/passwd").is_ok());
    // Clean, so not quarantined: the next workspace gets the same uid.
    assert_eq!(create(&svc, "next"), uid);
}

#[test]
fn a_new_workspace_on_a_reused_uid_reads_nothing_its_previous_holder_left() {
    if !root() || !std::path::Path::new(PY).exists() {
        println!("skipped: needs root and {PY}");
        return;
    }
    let svc = Svc::start(27450, &[], &[]);
    let uid = create(&svc, "first");
    leave_secrets(uid, 2);
    // And inside its sandbox: a private /tmp, /dev/shm and IPC namespace, gone with it.
    exec_ok(
        &svc,
        "first",
        "umask 077; echo inside > /tmp/dw-inside-2; echo inside > /dev/shm/dw-inside-2",
    );
    delete(&svc, "first");
    let next = create(&svc, "second");
    assert_eq!(next, uid, "the test needs the uid handed on");
    let [shm, msg, sem] = keys(2);
    let probe = format!(
        "for f in /tmp/dw-secret-2 /var/tmp/dw-secret-2 /dev/shm/dw-secret-2 /tmp/dw-dir-2/inner /tmp/dw-respawn-2 /tmp/dw-inside-2 /dev/shm/dw-inside-2; do
           if cat $f 2>/dev/null; then echo \"read $f\"; fi
         done
         {PY} -c 'import ctypes; libc = ctypes.CDLL(None)
print(libc.shmget({shm}, 0, 0), libc.msgget({msg}, 0), libc.semget({sem}, 0, 0))'"
    );
    let out = exec_ok(&svc, "second", &probe);
    assert_eq!(
        out, "-1 -1 -1\n",
        "the new holder reached what the old one left: {out}"
    );
    // Nor did anything of the old holder's come back while the new one lives.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!std::path::Path::new("/tmp/dw-respawn-2").exists());
    delete(&svc, "second");
}
