//! Every workspace is a sandbox (issue 24): tried as a new user would, through `ws exec` as
//! the workspace user, in a standard workspace and in docker-compose workspaces on both
//! engines. Each check fails if the workspace can see or reach what is not its own.
//! The network checks are in `tests/workspace_isolation_net.rs`. Needs root; skips with a
//! printed reason otherwise.

mod common;
mod workspace_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use workspace_support::Svc;

const IMAGE: &str = "dockwarden-test:latest";

/// The runtimes under test: (label, service flags, create body extras).
struct Kind {
    label: String,
    args: Vec<String>,
    runtime: &'static str,
}

fn kinds(tar: &Path) -> Vec<Kind> {
    let mut k = vec![Kind {
        label: "standard".into(),
        args: vec![],
        runtime: "standard",
    }];
    for e in common::installed_engines() {
        let (name, dockerd) = (e.name, e.dockerd_path());
        k.push(Kind {
            label: format!("docker-compose on Engine {name}"),
            args: vec![
                "--dockerd".into(),
                dockerd.display().to_string(),
                "--preload-image-tar".into(),
                tar.display().to_string(),
            ],
            runtime: "docker-compose",
        });
    }
    k
}

macro_rules! skip_unless_root {
    () => {
        if !nix::unistd::geteuid().is_root() {
            println!("skipped: needs root (namespaces, per-workspace uids)");
            return;
        }
    };
}

struct Env {
    svc: Svc,
    label: String,
}

impl Env {
    fn exec(&self, id: &str, cmd: &str) -> (i64, String, String) {
        let v = self.svc.exec(id, cmd);
        (
            v["exit_code"].as_i64().unwrap_or(-1),
            v["stdout"].as_str().unwrap_or_default().to_string(),
            v["stderr"].as_str().unwrap_or_default().to_string(),
        )
    }
    fn ok(&self, id: &str, cmd: &str) -> String {
        let (code, out, err) = self.exec(id, cmd);
        assert_eq!(code, 0, "[{}] `{cmd}` failed: {out}{err}", self.label);
        out
    }
    fn fails(&self, id: &str, cmd: &str) {
        let (code, out, err) = self.exec(id, cmd);
        assert_ne!(code, 0, "[{}] `{cmd}` must fail: {out}{err}", self.label);
    }
}

/// For each runtime: a service with workspaces `a` and `b`.
fn each(uid_base: u32, f: impl Fn(&Env)) {
    let tar_dir = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(tar_dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let tar = tar_dir.path().join("image.tar");
    let st = Command::new("docker")
        .args(["save", "-o"])
        .arg(&tar)
        .arg(IMAGE)
        .status()
        .expect("docker save");
    assert!(st.success());
    std::fs::set_permissions(&tar, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    for k in kinds(&tar) {
        let args: Vec<&str> = k.args.iter().map(String::as_str).collect();
        let svc = Svc::start(uid_base, &args, &[]);
        std::fs::set_permissions(svc.dir.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod");
        for id in ["a", "b"] {
            let (status, v) = svc.api(
                "POST",
                "/v1/workspaces",
                Some(json!({"id": id, "runtime": k.runtime})),
            );
            assert!(
                (200..300).contains(&status),
                "[{}] create {id}: {status} {v}",
                k.label
            );
        }
        println!("case: {}", k.label);
        let env = Env {
            svc,
            label: k.label.clone(),
        };
        f(&env);
        for id in ["a", "b"] {
            let _ = env.svc.api("DELETE", &format!("/v1/workspaces/{id}"), None);
        }
    }
}

#[test]
fn the_host_filesystem_other_workspaces_and_the_state_directory_are_out_of_sight() {
    skip_unless_root!();
    each(45000, |e| {
        for p in [
            "/root",
            "/home",
            "/srv",
            "/opt",
            "/var/lib",
            "/run",
            env!("CARGO_MANIFEST_DIR"),
        ] {
            e.fails("a", &format!("ls {p}"));
        }
        let state = e.svc.state.display().to_string();
        e.fails("a", &format!("ls {state}"));
        e.fails("a", &format!("ls {state}/workspaces"));
        e.fails("a", &format!("cat {state}/state.db"));
        e.fails("a", "ls /var/run/docker.sock /run/docker26/docker.sock");
        e.fails("a", &format!("ls {}", e.svc.socket.display()));
        // Another workspace's worktree, even made world-readable.
        let b = e.svc.worktree("b");
        std::fs::write(b.join("open.txt"), "b's").expect("write");
        std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::set_permissions(b.join("open.txt"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        e.fails("a", &format!("cat {}/open.txt", b.display()));
        // A world-readable file the test put outside the workspace.
        let outside = e.svc.dir.path().join("world-readable.txt");
        std::fs::write(&outside, "host's").expect("write");
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let (_, out, _) = e.exec("a", &format!("cat {}", outside.display()));
        assert!(!out.contains("host's"), "[{}] {out}", e.label);
        // What toolchains need is there, read-only.
        e.ok(
            "a",
            "ls /usr/bin/git /etc/ssl >/dev/null && test -r /etc/passwd",
        );
        e.fails("a", "touch /usr/x");
        e.fails("a", "touch /etc/x");
        let who = e.ok("a", "id -un; cat /etc/hostname");
        assert_eq!(
            who.split_whitespace().collect::<Vec<_>>(),
            ["ws-a", "a"],
            "[{}]",
            e.label
        );
        // Its own worktree and HOME are there, at the paths the API reports.
        e.ok("a", "pwd && touch here && echo x > $HOME/h");
        assert!(e.svc.worktree("a").join("here").exists());
    });
}

#[test]
fn processes_ipc_hostname_and_tmp_are_the_workspace_own() {
    skip_unless_root!();
    each(45100, |e| {
        // PID: only the workspace's own processes; no host process is visible.
        let ps = e.ok("a", "ps -e -o pid=,comm=");
        let pids: Vec<&str> = ps
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(
            pids.len() <= 4,
            "[{}] ps -e lists only the workspace's own: {ps}",
            e.label
        );
        assert_eq!(
            pids.first().copied(),
            Some("1"),
            "[{}] its PID 1 is its init: {ps}",
            e.label
        );
        let me = std::process::id();
        e.fails("a", &format!("cat /proc/{me}/environ"));
        e.fails("a", &format!("cat /proc/{me}/cmdline"));
        // Another workspace's exec command line, while it runs.
        let socket = e.svc.socket.clone();
        let t = std::thread::spawn(move || {
            let body = json!({"cmd": "sleep 3; echo marker-of-b >/dev/null"}).to_string();
            common::http(&socket, "POST", "/v1/workspaces/b/exec", body.as_bytes())
        });
        std::thread::sleep(Duration::from_millis(800));
        let (_, seen, _) = e.exec("a", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '");
        assert!(!seen.contains("marker-of-b"), "[{}] {seen}", e.label);
        let _ = t.join();
        // Orphans are reaped by the workspace's init.
        e.ok("a", "sh -c 'sleep 0.2 &' ; sleep 0.5");
        let (_, z, _) = e.exec("a", "ps -e -o stat= | grep -c Z");
        assert_eq!(z.trim(), "0", "[{}] no zombie is left", e.label);
        // UTS.
        assert_eq!(e.ok("a", "hostname").trim(), "a", "[{}]", e.label);
        // IPC: a SysV segment of a is not b's.
        let (code, out, err) = e.exec(
            "a",
            "python3 -c 'import ctypes; l=ctypes.CDLL(None); print(l.shmget(4242, 4096, 0o1600))'",
        );
        assert_eq!(code, 0, "[{}] {out}{err}", e.label);
        assert!(
            out.trim().parse::<i64>().is_ok_and(|id| id >= 0),
            "[{}] {out}",
            e.label
        );
        let (_, out, _) = e.exec(
            "b",
            "python3 -c 'import ctypes; l=ctypes.CDLL(None); print(l.shmget(4242, 4096, 0o600))'",
        );
        assert_eq!(out.trim(), "-1", "[{}] b cannot find a's segment", e.label);
        let host = std::fs::read_to_string("/proc/sysvipc/shm").unwrap_or_default();
        assert!(
            !host
                .lines()
                .any(|l| l.split_whitespace().next() == Some("4242")),
            "[{}] not in the host's IPC namespace",
            e.label
        );
        // /tmp and /dev/shm: private, bounded tmpfs.
        let marker = format!("dw-iso-{}", std::process::id());
        e.ok(
            "a",
            &format!("echo a > /tmp/{marker} && echo a > /dev/shm/{marker}"),
        );
        e.fails("b", &format!("cat /tmp/{marker}"));
        e.fails("b", &format!("cat /dev/shm/{marker}"));
        assert!(
            !Path::new("/tmp").join(&marker).exists(),
            "[{}] not in the host's /tmp",
            e.label
        );
        let df = e.ok("a", "df -P /tmp | tail -1");
        assert!(df.starts_with("tmpfs"), "[{}] {df}", e.label);
        // A host service on a 0666 Unix socket outside the workspace is unreachable.
        let sock = e.svc.dir.path().join("host.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).expect("bind");
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let (code, out, err) = e.exec(
            "a",
            &format!(
                "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\")'",
                sock.display()
            ),
        );
        assert_ne!(code, 0, "[{}] {out}{err}", e.label);
        let unix = e.ok("a", "cat /proc/net/unix");
        assert!(
            !unix.contains(&sock.display().to_string()),
            "[{}] {unix}",
            e.label
        );
        // A TCP listener on the host's loopback is not among PID 1's sockets (its network
        // namespace is the workspace's), while one the workspace opens is.
        let host = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let hex = format!(":{:04X}", host.local_addr().expect("addr").port());
        let own = e.ok("a", "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); print(s.getsockname()[1]); open(\"/proc/1/net/tcp\").read() and print(open(\"/proc/1/net/tcp\").read())'");
        let mut lines = own.lines();
        let port: u16 = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("own port");
        let tcp: String = lines.collect::<Vec<_>>().join("\n");
        assert!(
            !tcp.contains(&hex),
            "[{}] the host's listener {hex} is visible: {tcp}",
            e.label
        );
        assert!(
            tcp.contains(&format!(":{port:04X}")),
            "[{}] its own listener is listed: {tcp}",
            e.label
        );
    });
}

#[test]
fn setup_installs_into_the_worktree_and_home_and_git_commits_in_both_runtimes() {
    skip_unless_root!();
    each(45200, |e| {
        let wt = e.svc.worktree("a");
        // A local npm package tarball and a minimal wheel, inside the worktree.
        let pkg = wt.join("pkg");
        std::fs::create_dir_all(&pkg).expect("mkdir");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"dw-local","version":"1.0.0","main":"index.js"}"#,
        )
        .expect("pkg");
        std::fs::write(pkg.join("index.js"), "module.exports = 'dw-local-ok';\n").expect("js");
        let uid = e.svc.api("GET", "/v1/workspaces/a", None).1["uid"]
            .as_u64()
            .expect("uid") as u32;
        let chown = |p: &Path| {
            let st = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{uid}"))
                .arg(p)
                .status()
                .expect("chown");
            assert!(st.success());
        };
        chown(&wt);
        let script = r#"
import zipfile, base64, hashlib
name, ver = 'dwwheel', '1.0'
files = {'dwwheel/__init__.py': b"OK = 'dw-wheel-ok'\n",
         f'{name}-{ver}.dist-info/METADATA': f'Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n'.encode(),
         f'{name}-{ver}.dist-info/WHEEL': b'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
rec = ''.join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n" for p, d in files.items())
rec += f'{name}-{ver}.dist-info/RECORD,,\n'
with zipfile.ZipFile(f'{name}-{ver}-py3-none-any.whl', 'w') as z:
    for p, d in files.items(): z.writestr(p, d)
    z.writestr(f'{name}-{ver}.dist-info/RECORD', rec)
"#;
        std::fs::write(wt.join("mkwheel.py"), script).expect("script");
        chown(&wt);
        e.ok("a", "npm pack ./pkg >/dev/null 2>&1 && npm install --no-audit --no-fund --offline ./dw-local-1.0.0.tgz >/dev/null 2>&1 && node -e \"console.log(require('dw-local'))\" | grep -q dw-local-ok");
        // Debian marks its Python externally managed (PEP 668): `--user` installs need its
        // documented override, with or without a sandbox.
        e.ok("a", "python3 mkwheel.py && python3 -m pip install --user --break-system-packages --no-index --no-deps dwwheel-1.0-py3-none-any.whl >/dev/null 2>&1 && python3 -c 'import dwwheel; print(dwwheel.OK)' | grep -q dw-wheel-ok");
        e.ok("a", "git init -q . && git -c user.email=a@b -c user.name=a add -A && git -c user.email=a@b -c user.name=a commit -qm x && git log --oneline | wc -l");
        let v: Value = e.svc.api("GET", "/v1/workspaces/a", None).1;
        assert!(v["uid"].is_u64());
    });
}
