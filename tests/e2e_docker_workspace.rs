//! Docker Compose workspaces end to end: the real `dockwarden serve`, a real private dockerd
//! per workspace behind the real `dockwarden proxy`, and the real docker / Compose CLIs run
//! through `ws exec` as the workspace uid (issue 10, "How it is shown" 1-9 and isolation).
//!
//! Engine: `/usr/sbin/dockerd` (20.10), or `DOCKWARDEN_TEST_DOCKERD` (for example
//! `/opt/docker26/usr/sbin/dockerd`). Needs root; skips with `skipped: <reason>` otherwise,
//! except under CI (`DW_ENGINES_REQUIRED` or `DW_WORKSPACE_ENGINE` set, as scripts/test.sh
//! does), where a skip is a failure. `DW_WORKSPACE_ENGINE` (`20.10`, `26.1`) also names the
//! engine the private daemons must report.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::wait_until;
use dockwarden::sys::mountinfo;
use serde_json::{Value, json};
use workspace_support::Svc;

fn dockerd() -> String {
    std::env::var("DOCKWARDEN_TEST_DOCKERD").unwrap_or_else(|_| "/usr/sbin/dockerd".into())
}

/// Why this machine cannot run the tests, if it cannot.
fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (private dockerd, network namespaces)".into());
    }
    if !Path::new(&dockerd()).is_file() {
        return Some(format!("no dockerd at {}", dockerd()));
    }
    let img = Command::new("docker")
        .args(["image", "inspect", "dockwarden-test:latest"])
        .output();
    if !img.is_ok_and(|o| o.status.success()) {
        return Some("the host daemon has no dockwarden-test:latest image to save".into());
    }
    None
}

/// Whether CI requires this suite to run: then a skip fails loudly instead.
fn required() -> Option<String> {
    ["DW_WORKSPACE_ENGINE", "DW_ENGINES_REQUIRED"]
        .iter()
        .find_map(|k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| format!("{k}={v}"))
        })
}

macro_rules! skip_unless_ready {
    () => {
        if let Some(why) = skip_reason() {
            if let Some(req) = required() {
                panic!("this suite must run here ({req}) but cannot: {why}");
            }
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The version `<dockerd> --version` reports (`Docker version 26.1.5+dfsg1, build 411e817`).
fn engine_version() -> String {
    let out = Command::new(dockerd()).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.strip_prefix("Docker version ")
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("unexpected `{} --version`: {text}", dockerd()))
        .to_string()
}

/// A service with the docker-compose runtime, torn down hard even when a test fails.
struct Env {
    svc: Svc,
    _images: tempfile::TempDir,
    /// `docker save` of the test image, readable by every workspace uid.
    image_tar: PathBuf,
}

impl Env {
    fn start(uid_base: u32) -> Env {
        Env::start_with(uid_base, false)
    }

    /// With `preload`, the service loads the test image into every new daemon itself.
    fn start_with(uid_base: u32, preload: bool) -> Env {
        let images = tempfile::tempdir().unwrap();
        std::fs::set_permissions(images.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let image_tar = images.path().join("dockwarden-test.tar");
        let st = Command::new("docker")
            .args(["save", "-o"])
            .arg(&image_tar)
            .arg("dockwarden-test:latest")
            .status()
            .unwrap();
        assert!(st.success(), "docker save of the test image");
        std::fs::set_permissions(&image_tar, std::fs::Permissions::from_mode(0o644)).unwrap();
        let tar = image_tar.display().to_string();
        let mut args = vec!["--dockerd".to_string(), dockerd()];
        if preload {
            args.extend(["--preload-image-tar".to_string(), tar]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let svc = Svc::start(uid_base, &args, &[]);
        std::fs::set_permissions(svc.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        Env {
            svc,
            _images: images,
            image_tar,
        }
    }

    fn compose_repo(&self, name: &str) -> PathBuf {
        let repo = self.svc.dir.path().join(name);
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/workspace/make-compose-repo.sh");
        let st = Command::new("sh").arg(script).arg(&repo).status().unwrap();
        assert!(st.success(), "compose fixture script failed");
        repo
    }

    /// The Compose fixture with `settings` committed as `.dockwarden/settings.json`.
    fn compose_repo_with(&self, name: &str, settings: &Value) -> PathBuf {
        let repo = self.compose_repo(name);
        std::fs::create_dir(repo.join(".dockwarden")).unwrap();
        std::fs::write(repo.join(".dockwarden/settings.json"), settings.to_string()).unwrap();
        for args in [&["add", "-A"][..], &["commit", "--quiet", "-m", "settings"]] {
            let st = Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .status()
                .unwrap();
            assert!(st.success(), "git {args:?}");
        }
        repo
    }

    fn create(&self, body: Value) -> Value {
        let (status, v) = self.svc.api("POST", "/v1/workspaces", Some(body));
        assert_eq!(status, 201, "create: {v}");
        v
    }

    /// Runs `cmd` in the workspace; returns (exit code, stdout, stderr).
    fn sh(&self, id: &str, cmd: &str) -> (i64, String, String) {
        let r = self.svc.ok(
            "POST",
            &format!("/v1/workspaces/{id}/exec"),
            Some(json!({ "cmd": cmd, "timeout_ms": 180_000 })),
        );
        (
            r["exit_code"].as_i64().unwrap(),
            r["stdout"].as_str().unwrap().to_string(),
            r["stderr"].as_str().unwrap().to_string(),
        )
    }

    /// `sh` that must exit 0; returns stdout.
    fn ok(&self, id: &str, cmd: &str) -> String {
        let (code, out, err) = self.sh(id, cmd);
        assert_eq!(code, 0, "`{cmd}` in {id}: stdout={out} stderr={err}");
        out
    }

    fn load_image(&self, id: &str) {
        // Inside its sandbox a workspace sees only its own files: the archive goes in first.
        let inside = self.ws_dir(id).join("worktree/.image.tar");
        std::fs::copy(&self.image_tar, &inside).unwrap();
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = self.ok(id, "docker load -i .image.tar && rm -f .image.tar");
        assert!(out.contains("dockwarden-test"), "{out}");
    }

    fn ws_dir(&self, id: &str) -> PathBuf {
        self.svc.state.join("workspaces").join(id)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Graceful first (the service removes daemons, mounts, cgroups), then by force.
        if let Ok((_, list)) =
            std::panic::catch_unwind(|| self.svc.api("GET", "/v1/workspaces", None))
        {
            for w in list.as_array().cloned().unwrap_or_default() {
                let id = w["id"].as_str().unwrap_or_default().to_string();
                let _ = common::http(
                    &self.svc.socket,
                    "DELETE",
                    &format!("/v1/workspaces/{id}"),
                    b"",
                );
            }
        }
        self.svc.kill9();
        let state = self.svc.state.display().to_string();
        for pid in pids_mentioning(&state) {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        for m in mountinfo::at_or_beneath(&mountinfo::own(), &self.svc.state) {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

fn pids_mentioning(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// Pids of `dockwarden proxy` processes listening on workspace `id`'s socket.
fn proxies_of(env: &Env, id: &str) -> Vec<i32> {
    // The service starts its proxy with typed arguments in `<ws>/docker/proxy.json`.
    pids_mentioning(&format!(
        "proxy-args\0{}\0",
        env.ws_dir(id).join("docker").join("proxy.json").display()
    ))
}

/// Running, not a zombie (orphans are reparented to a pid 1 that may never reap them).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        !st.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

fn cgroups_named(name: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path().join(name))
        .collect();
    out.push(root.join(name));
    out.into_iter().filter(|p| p.exists()).collect()
}

/// The child cgroups and processes (with their command lines) under `cg`, for a message.
fn cgroup_contents(cg: &Path) -> String {
    let mut out = Vec::new();
    let mut stack = vec![cg.to_path_buf()];
    while let Some(d) = stack.pop() {
        let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
        let cmds: Vec<String> = procs
            .lines()
            .map(|p| {
                let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                format!("{p}={}", String::from_utf8_lossy(&c).replace('\0', " "))
            })
            .collect();
        out.push(format!("{} [{}]", d.display(), cmds.join(", ")));
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out.join(" ")
}

/// Asserts that nothing of workspace `id` (uid `uid`) is left on the machine.
fn assert_nothing_left(env: &Env, id: &str, uid: u64) {
    let dir = env.ws_dir(id);
    // With the separator: `ar` is not `ar-fork`.
    let needle = format!("{}/", dir.display());
    assert!(!dir.exists(), "workspace directory (data root) removed");
    assert_eq!(
        pids_mentioning(&needle),
        Vec::<i32>::new(),
        "no process of {id} left"
    );
    assert_eq!(
        mountinfo::at_or_beneath(&mountinfo::own(), &dir),
        Vec::<PathBuf>::new(),
        "no mount (pins, netns, overlays) left"
    );
    let left = cgroups_named(&format!("dockwarden_ws_{uid}"));
    assert_eq!(
        left,
        Vec::<PathBuf>::new(),
        "no cgroup left; what they hold: {}",
        left.iter()
            .map(|c| cgroup_contents(c))
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert!(
        workspace_support::pids_of(uid as u32).is_empty(),
        "no process of the workspace uid left"
    );
}

#[test]
fn compose_workspace_lifecycle_end_to_end() {
    skip_unless_ready!();
    let env = Env::start(43000);
    let repo = env.compose_repo("compose-repo");

    // 1-2: created from the fixture; info shows the runtime and where the choice came from.
    let created = env.create(json!({ "id": "dc", "repo": repo.display().to_string() }));
    let ws = &created["workspace"];
    assert_eq!(ws["runtime"]["runtime"], "docker-compose", "{created}");
    assert_eq!(ws["runtime"]["source"], "evidence");
    let evidence = ws["runtime"]["evidence"].as_array().unwrap();
    assert!(
        evidence.iter().any(|e| e["file"] == "compose.yaml"),
        "{evidence:?}"
    );
    let uid = ws["uid"].as_u64().unwrap();
    let info = env.svc.cli(&["info", "dc"]);
    let text = String::from_utf8_lossy(&info.stdout).to_string();
    assert!(
        text.contains("runtime: docker-compose (evidence)"),
        "{text}"
    );
    assert!(text.contains("evidence: compose.yaml"), "{text}");
    // The private daemon is the engine under test, not the host's.
    let server = env.ok("dc", "docker version --format '{{.Server.Version}}'");
    assert_eq!(
        server.trim(),
        engine_version(),
        "the workspace's daemon is {}",
        dockerd()
    );
    if let Ok(want) = std::env::var("DW_WORKSPACE_ENGINE") {
        assert!(
            server.trim().starts_with(&format!("{}.", want.trim())),
            "DW_WORKSPACE_ENGINE={want} but the private daemon is {server}"
        );
    }
    let docker_host = ws["docker_host"].as_str().unwrap().to_string();
    assert_eq!(
        env.ok("dc", "echo $DOCKER_HOST").trim(),
        docker_host,
        "DOCKER_HOST is the workspace's proxy"
    );

    // The proxy socket is the workspace user's (0660); the daemon socket is root-only and
    // out of the workspace user's reach.
    let proxy_sock = env.ws_dir("dc").join("docker.sock");
    let meta = std::fs::metadata(&proxy_sock).unwrap();
    assert_eq!((meta.uid() as u64, meta.mode() & 0o777), (uid, 0o660));
    let daemon_sock = env.ws_dir("dc").join("docker/docker.sock");
    let meta = std::fs::metadata(&daemon_sock).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o600));
    let (code, _, err) = env.sh(
        "dc",
        &format!(
            "curl -sS --unix-socket {} http://d/_ping",
            daemon_sock.display()
        ),
    );
    assert_ne!(
        code, 0,
        "the workspace uid reached the daemon socket: {err}"
    );
    assert_eq!(env.ok("dc", "id -u").trim(), uid.to_string());
    assert_eq!(env.ok("dc", "umask").trim(), "0022");
    let (code, _, err) = env.sh("dc", "sudo true");
    assert_ne!(code, 0);
    assert!(
        err.contains("not available") && err.contains("user-writable"),
        "{err}"
    );

    // 3: compose v2 brings both services up (the uid-999 service read the single-file bind).
    env.load_image("dc");
    env.ok("dc", "docker compose up -d --wait");
    let ps = env.ok("dc", "docker compose ps --format '{{.Service}} {{.State}}'");
    assert!(
        ps.contains("db running") && ps.contains("web running"),
        "{ps}"
    );
    assert!(
        env.ok("dc", "docker compose logs db")
            .contains("db-read-init")
    );
    // Containers live in the workspace's own budgeted parent cgroup.
    let parent = env.ok(
        "dc",
        "docker inspect -f '{{.HostConfig.CgroupParent}}' $(docker compose ps -q web)",
    );
    assert_eq!(parent.trim(), format!("/dockwarden_ws_{uid}/containers"));

    // 4: the published port answers on the workspace's loopback.
    let page = env.ok(
        "dc",
        "curl -sS --max-time 10 http://127.0.0.1:8080/index.html",
    );
    assert_eq!(page.trim(), "hello-from-web");

    // host.docker.internal from a container reaches a workspace service on 0.0.0.0.
    env.ok(
        "dc",
        "mkdir -p svc && echo from-the-workspace > svc/index.html && (busybox httpd -f -p 0.0.0.0:8099 -h svc >/dev/null 2>&1 &) ",
    );
    let seen = env.ok(
        "dc",
        "docker run --rm dockwarden-test wget -qO- http://host.docker.internal:8099/index.html",
    );
    assert_eq!(seen.trim(), "from-the-workspace");

    // 5: the policy is in front of the private daemon.
    let (code, _, err) = env.sh("dc", "docker run --rm --privileged dockwarden-test true");
    assert_ne!(code, 0);
    assert!(err.contains("container.privileged"), "{err}");

    // 6: root-written files in the bind are the workspace user's after `compose down`.
    env.ok("dc", "docker compose down");
    // The proxy runs the private-daemon profile: prune is the workspace's own business.
    env.ok("dc", "docker container prune -f && docker image prune -f");
    let wrote = env.svc.worktree("dc").join("out/root-wrote.txt");
    wait_until(
        Duration::from_secs(60),
        "chown-back of root-written bind files",
        || std::fs::metadata(&wrote).is_ok_and(|m| m.uid() as u64 == uid),
    );

    // 7: kill, connect, compose up again: the image and the named volume's data are kept.
    env.ok("dc", "docker compose up -d --wait");
    let marker = "docker compose exec -T web cat /data/marker";
    assert_eq!(env.ok("dc", marker).trim(), "first-run");
    env.ok(
        "dc",
        "docker compose exec -T web sh -c 'echo kept > /data/marker'",
    );
    let killed = env.svc.ok("POST", "/v1/workspaces/dc/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped");
    assert!(
        !env.ws_dir("dc").join("docker/netns").exists() && !proxy_sock.exists(),
        "the namespace and sockets are released at kill"
    );
    assert!(
        env.ws_dir("dc").join("docker/data").is_dir(),
        "the data root stays"
    );
    let connected = env.svc.ok("POST", "/v1/workspaces/dc/connect", None);
    let notes = connected["notes"].to_string();
    assert!(notes.contains("need starting again"), "{connected}");
    assert_eq!(
        env.ok("dc", "docker ps -q").trim(),
        "",
        "containers need restarting"
    );
    env.ok("dc", "docker compose up -d --wait");
    assert_eq!(
        env.ok("dc", marker).trim(),
        "kept",
        "named volume kept across kill/connect"
    );

    // 8: restart is disruptive, says what stopped, and keeps files and volumes.
    env.ok("dc", "echo survives-restart > untracked-note.txt");
    let pidfile = env.ws_dir("dc").join("docker/docker.pid");
    let daemon_before = std::fs::read_to_string(&pidfile).unwrap();
    let r = env.svc.ok("POST", "/v1/workspaces/dc/restart", None);
    let daemon_after = std::fs::read_to_string(&pidfile).unwrap();
    assert_ne!(
        daemon_before.trim(),
        daemon_after.trim(),
        "restart started a new dockerd"
    );
    assert!(!alive(daemon_before.trim()), "the old dockerd is gone");
    assert!(alive(daemon_after.trim()));
    assert_eq!(
        std::fs::read_to_string(env.svc.worktree("dc").join("untracked-note.txt")).unwrap(),
        "survives-restart\n",
        "a worktree file is kept across restart"
    );
    assert_eq!(r["disruptive"], true);
    let stopped = r["stopped"].to_string();
    assert!(
        stopped.contains("container") && stopped.contains("dockerd") && stopped.contains("proxy"),
        "{r}"
    );
    env.ok("dc", "docker compose up -d --wait");
    assert_eq!(env.ok("dc", marker).trim(), "kept");

    // 9: delete leaves no process, mount, namespace, cgroup or data root.
    env.svc.ok("DELETE", "/v1/workspaces/dc", None);
    assert_nothing_left(&env, "dc", uid);
}

#[test]
fn reprovision_standard_to_docker_compose_keeps_the_worktree_byte_for_byte() {
    skip_unless_ready!();
    let env = Env::start(43100);
    // Setup asks the daemon for its version; with no daemon (standard) it does nothing.
    let repo = env.compose_repo_with(
        "compose-repo",
        &json!({ "scripts": { "setup":
            "[ -n \"$DOCKER_HOST\" ] || exit 0; docker info --format '{{.ServerVersion}}' > setup-ran.txt" } }),
    );
    let created = env.create(json!({
        "id": "rp", "repo": repo.display().to_string(), "runtime": "standard"
    }));
    assert_eq!(created["workspace"]["runtime"]["runtime"], "standard");
    assert_eq!(created["workspace"]["setup"]["exit_code"], 0, "{created}");
    let setup_file = env.svc.worktree("rp").join("setup-ran.txt");
    assert!(!setup_file.exists(), "no daemon, so setup wrote nothing");
    let (code, _, _) = env.sh("rp", "docker ps");
    assert_ne!(code, 0, "no daemon on the standard runtime");
    env.ok(
        "rp",
        "echo secret-local > .env.local && echo debug > build.log && echo changed >> README.md",
    );
    // setup-ran.txt is setup's own output, new after the reprovision: left out here.
    let tree = "git status --porcelain --ignored | grep -v setup-ran.txt; sha256sum README.md .env.local build.log";
    let before = env.ok("rp", tree);

    let r = env.svc.ok(
        "POST",
        "/v1/workspaces/rp/reprovision",
        Some(json!({ "runtime": "docker-compose" })),
    );
    assert_eq!(r["previous"]["runtime"], "standard");
    assert_eq!(r["workspace"]["runtime"]["runtime"], "docker-compose");
    // Setup ran on the new runtime, against its daemon, before the call returned.
    assert_eq!(r["workspace"]["setup"]["exit_code"], 0, "{r}");
    assert_eq!(r["workspace"]["setup"]["ran"], true, "{r}");
    assert_eq!(
        std::fs::read_to_string(&setup_file).unwrap().trim(),
        engine_version(),
        "setup wrote the private daemon's version before reprovision answered"
    );
    let notes = r["notes"].to_string();
    assert!(notes.contains("do not carry over"), "{r}");
    let after = env.ok("rp", tree);
    assert_eq!(
        before, after,
        "uncommitted and ignored files are kept byte for byte"
    );
    env.load_image("rp");
    env.ok("rp", "docker compose up -d --wait");
    assert!(env.ok("rp", "docker compose ps --services").contains("web"));

    // And back: the daemon and its data go away with the runtime.
    let back = env.svc.ok(
        "POST",
        "/v1/workspaces/rp/reprovision",
        Some(json!({ "runtime": "standard" })),
    );
    assert_eq!(back["workspace"]["runtime"]["runtime"], "standard");
    assert!(
        !env.ws_dir("rp").join("docker").exists(),
        "the old daemon's data is gone"
    );
    assert_eq!(env.ok("rp", "cat .env.local").trim(), "secret-local");

    // An inspect script is read by the evidence rules, never run.
    env.ok(
        "rp",
        "mkdir -p scripts && printf 'touch ran.txt\\ndocker compose up -d\\n' > scripts/dev.sh",
    );
    let by_script = env.svc.ok(
        "POST",
        "/v1/workspaces/rp/reprovision",
        Some(json!({ "inspect_script": "scripts/dev.sh" })),
    );
    let sel = &by_script["workspace"]["runtime"];
    assert_eq!(sel["runtime"], "docker-compose", "{by_script}");
    assert_eq!(sel["source"], "evidence");
    assert!(
        !env.svc.worktree("rp").join("ran.txt").exists(),
        "the inspect script was not run"
    );
    assert_eq!(
        by_script["workspace"]["setup"]["exit_code"], 0,
        "{by_script}"
    );
    // The evidence chose the runtime; the policy still holds in front of the new daemon.
    env.load_image("rp");
    let (code, _, err) = env.sh("rp", "docker run --rm --privileged dockwarden-test true");
    assert_ne!(
        code, 0,
        "a privileged container after the inspect-script reprovision"
    );
    assert!(err.contains("container.privileged"), "{err}");
    env.ok("rp", "docker run --rm dockwarden-test true");
}

#[test]
fn two_compose_workspaces_are_isolated_and_compose_v1_works() {
    skip_unless_ready!();
    let env = Env::start(43200);
    let repo = env.compose_repo("compose-repo");
    let a = env.create(
        json!({ "id": "ia", "repo": repo.display().to_string(), "runtime": "docker-compose" }),
    );
    let b = env.create(
        json!({ "id": "ib", "repo": repo.display().to_string(), "runtime": "docker-compose" }),
    );
    let (uid_a, uid_b) = (
        a["workspace"]["uid"].as_u64().unwrap(),
        b["workspace"]["uid"].as_u64().unwrap(),
    );
    env.load_image("ia");
    env.load_image("ib");
    // Same project name and the same published port in both: no clash, each has its own.
    env.ok("ia", "docker compose up -d --wait");
    // Compose v1 has no --wait: start, then poll until both services run.
    env.ok("ib", "docker-compose up -d");
    env.ok(
        "ib",
        "for i in $(seq 1 300); do [ \"$(docker ps -q | wc -l)\" = 2 ] && exit 0; sleep 0.2; done; docker-compose ps; exit 1",
    );
    let page = env.ok(
        "ib",
        "curl -sS --max-time 10 http://127.0.0.1:8080/index.html",
    );
    assert_eq!(page.trim(), "hello-from-web", "compose v1 project serves");

    let ids = |id: &str| env.ok(id, "docker ps -aq --no-trunc | sort");
    let (ca, cb) = (ids("ia"), ids("ib"));
    assert_eq!(ca.lines().count(), 2);
    assert_eq!(cb.lines().count(), 2);
    assert!(
        ca.lines().all(|c| !cb.contains(c)),
        "no container is seen by both"
    );
    for c in cb.lines() {
        let (code, _, _) = env.sh("ia", &format!("docker inspect {c}"));
        assert_ne!(code, 0, "workspace ia sees ib's container {c}");
    }
    let nets = |id: &str| env.ok(id, "docker network ls -q --no-trunc --filter type=custom");
    assert!(
        nets("ia").lines().all(|n| !nets("ib").contains(n)),
        "networks are per daemon"
    );
    let vols = |id: &str| env.ok(id, "docker volume ls -q");
    assert!(vols("ia").contains("dbdata") && vols("ib").contains("dbdata"));
    env.ok(
        "ia",
        "docker run --rm -v worktree_dbdata:/d dockwarden-test sh -c 'echo only-a > /d/who'",
    );
    let (code, out, _) = env.sh(
        "ib",
        "docker run --rm -v worktree_dbdata:/d dockwarden-test cat /d/who",
    );
    assert!(
        code != 0 || !out.contains("only-a"),
        "volumes are per daemon"
    );

    // Neither uid reaches either daemon socket, nor the other's proxy socket.
    for (from, to) in [("ia", "ia"), ("ia", "ib"), ("ib", "ia"), ("ib", "ib")] {
        let sock = env.ws_dir(to).join("docker/docker.sock");
        let (code, _, _) = env.sh(
            from,
            &format!(
                "curl -sS --max-time 5 --unix-socket {} http://d/_ping",
                sock.display()
            ),
        );
        assert_ne!(code, 0, "{from} reached {to}'s daemon socket");
    }
    let other_proxy = env.ws_dir("ia").join("docker.sock");
    let (code, _, _) = env.sh(
        "ib",
        &format!(
            "curl -sS --max-time 5 --unix-socket {} http://d/_ping",
            other_proxy.display()
        ),
    );
    assert_ne!(code, 0, "ib reached ia's proxy socket");

    env.svc.ok("DELETE", "/v1/workspaces/ia", None);
    env.svc.ok("DELETE", "/v1/workspaces/ib", None);
    assert_nothing_left(&env, "ia", uid_a);
    assert_nothing_left(&env, "ib", uid_b);
}

#[test]
fn after_kill_9_of_the_service_no_daemon_proxy_or_namespace_leaks() {
    skip_unless_ready!();
    let mut env = Env::start(43300);
    env.create(json!({ "id": "live", "runtime": "docker-compose" }));
    let stopped = env.create(json!({ "id": "stopped", "runtime": "docker-compose" }));
    let gone = env.create(json!({ "id": "gone", "runtime": "docker-compose" }));
    let gone_uid = gone["workspace"]["uid"].as_u64().unwrap();
    let stopped_uid = stopped["workspace"]["uid"].as_u64().unwrap();
    env.svc.ok("POST", "/v1/workspaces/stopped/kill", None);
    env.load_image("live");
    env.load_image("gone");
    env.ok("live", "docker volume create keepme >/dev/null");
    // A long-running container in the workspace to be deleted and in the live one: its
    // process (a child of a containerd shim) and the shim are recorded to be checked.
    let start_sleeper = |id: &str| {
        let ctr = env
            .ok(id, "docker run -d dockwarden-test sleep 1d")
            .trim()
            .to_string();
        let pid = env.ok(id, &format!("docker inspect -f '{{{{.State.Pid}}}}' {ctr}"));
        let pid = pid.trim().to_string();
        assert!(alive(&pid), "the container's process {pid} runs");
        let shims = pids_mentioning(&format!("-id\0{ctr}"));
        assert!(!shims.is_empty(), "a containerd shim runs {ctr}");
        (ctr, pid, shims)
    };
    let (live_ctr, live_pid, live_shims) = start_sleeper("live");
    let (_, gone_pid, gone_shims) = start_sleeper("gone");
    let old_daemon = std::fs::read_to_string(env.ws_dir("live").join("docker/docker.pid")).unwrap();
    let old_proxy = proxies_of(&env, "live");
    assert_eq!(old_proxy.len(), 1, "one proxy for the live workspace");

    // The service dies; its daemons, proxies and containers keep running, orphaned.
    env.svc.kill9();
    assert!(!pids_mentioning(&env.ws_dir("live").display().to_string()).is_empty());
    assert!(
        alive(&live_pid) && alive(&gone_pid),
        "containers outlive the service"
    );
    // The deleted workspace's dockerd dies too, before it could stop its container: the
    // container keeps running under its shim, and only the workspace cgroup still lists it.
    let gone_daemon =
        std::fs::read_to_string(env.ws_dir("gone").join("docker/docker.pid")).unwrap();
    let st = Command::new("kill")
        .args(["-9", gone_daemon.trim()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_until(
        Duration::from_secs(10),
        "the deleted workspace's dockerd to die",
        || !alive(gone_daemon.trim()),
    );
    assert!(alive(&gone_pid), "its container runs on without the daemon");
    // A workspace whose record is gone (as if deleted while the service was down) keeps
    // only its directory: the restarted service must remove its daemon and namespace.
    {
        let db = rusqlite::Connection::open(env.svc.state.join("state.db")).unwrap();
        db.execute("DELETE FROM workspaces WHERE id = 'gone'", [])
            .unwrap();
    }
    env.svc.restart(&[]);

    // Deleted: everything removed, its container and shim included (the container's
    // cgroup, under the workspace's, is gone with it).
    assert_nothing_left(&env, "gone", gone_uid);
    assert!(
        !alive(&gone_pid),
        "the deleted workspace's container process is gone"
    );
    for shim in &gone_shims {
        assert!(
            !alive(&shim.to_string()),
            "the deleted workspace's shim {shim} is gone"
        );
    }
    // Stopped: nothing running, data kept.
    let stopped_dir = env.ws_dir("stopped").display().to_string();
    assert_eq!(pids_mentioning(&stopped_dir), Vec::<i32>::new());
    assert!(env.ws_dir("stopped").join("docker/data").is_dir());
    assert!(workspace_support::pids_of(stopped_uid as u32).is_empty());
    // Live: a daemon again (exactly one, not the orphan) with its data.
    let new_daemon = std::fs::read_to_string(env.ws_dir("live").join("docker/docker.pid")).unwrap();
    assert_ne!(
        old_daemon.trim(),
        new_daemon.trim(),
        "the orphan daemon was replaced"
    );
    assert!(!alive(old_daemon.trim()), "the orphan is gone");
    let daemons: Vec<i32> = pids_mentioning(&format!(
        "dockerd\0--config-file\0{}",
        env.ws_dir("live").join("docker/daemon.json").display()
    ));
    assert_eq!(
        daemons.len(),
        1,
        "one dockerd for the live workspace: {:?}",
        daemons
            .iter()
            .map(|p| String::from_utf8_lossy(
                &std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default()
            )
            .to_string())
            .collect::<Vec<_>>()
    );
    // Exactly one proxy for its socket, a new one (the orphan was stopped, not adopted).
    let new_proxy = proxies_of(&env, "live");
    assert_eq!(
        new_proxy.len(),
        1,
        "one proxy for the live workspace: {new_proxy:?}"
    );
    assert_ne!(new_proxy, old_proxy, "the orphan proxy was replaced");
    assert!(
        !alive(&old_proxy[0].to_string()),
        "the orphan proxy is gone"
    );
    // The daemon was restarted, not adopted: its containers were stopped (they need
    // starting again, as after connect), not left running without a daemon.
    assert!(
        !alive(&live_pid),
        "the live workspace's container process was stopped"
    );
    for shim in &live_shims {
        assert!(
            !alive(&shim.to_string()),
            "the live workspace's old shim {shim} is gone"
        );
    }
    assert_eq!(
        env.ok("live", "docker ps -q").trim(),
        "",
        "no container runs"
    );
    let all = env.ok("live", "docker ps -aq --no-trunc");
    assert!(
        all.contains(&live_ctr),
        "the stopped container is kept: {all}"
    );
    assert!(env.ok("live", "docker volume ls -q").contains("keepme"));
    assert!(env.ok("live", "docker images").contains("dockwarden-test"));
    env.ok("live", &format!("docker start {live_ctr}"));
    assert_eq!(
        env.ok("live", "docker ps -q --no-trunc").trim(),
        live_ctr,
        "it starts again"
    );
}

#[test]
fn a_fork_gets_a_fresh_empty_daemon() {
    skip_unless_ready!();
    let env = Env::start(43400);
    env.create(json!({ "id": "parent", "runtime": "docker-compose" }));
    env.load_image("parent");
    env.ok("parent", "echo hi > file.txt");
    let snap = env.svc.ok("POST", "/v1/workspaces/parent/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    let fork = env.create(json!({ "id": "child", "from": snap }));
    assert_eq!(
        fork["workspace"]["runtime"]["runtime"], "docker-compose",
        "{fork}"
    );
    assert!(
        fork["notes"].to_string().contains("were not carried over"),
        "{fork}"
    );
    assert_eq!(env.ok("child", "cat file.txt").trim(), "hi");
    assert_eq!(
        env.ok("child", "docker images -q").trim(),
        "",
        "the fork's daemon is empty"
    );
    assert!(!env.ok("parent", "docker images -q").trim().is_empty());
}

#[test]
fn preload_image_tar_fills_every_new_daemon_before_setup() {
    skip_unless_ready!();
    let env = Env::start_with(43500, true);
    // The settings file chooses the runtime, and setup uses the daemon at once.
    let repo = env.compose_repo_with(
        "compose-repo",
        &json!({"runtime": "docker-compose", "scripts": {"setup": [
            "docker compose up -d --wait",
            "docker compose ps --services > setup-services.log"
        ]}}),
    );
    let created = env.create(json!({ "id": "pre", "repo": repo.display().to_string() }));
    let ws = &created["workspace"];
    assert_eq!(ws["runtime"]["runtime"], "docker-compose", "{created}");
    assert_eq!(ws["runtime"]["source"], "explicit");
    assert_eq!(
        ws["setup"]["exit_code"], 0,
        "setup ran against a ready daemon: {created}"
    );
    let services = env.ok("pre", "cat setup-services.log");
    assert!(
        services.contains("web") && services.contains("db"),
        "{services}"
    );
    let images = env.ok("pre", "docker images --format '{{.Repository}}:{{.Tag}}'");
    assert!(images.contains("dockwarden-test:latest"), "{images}");
    // A kill/connect reuses the data root: nothing is loaded twice, the image is still there.
    env.svc.ok("POST", "/v1/workspaces/pre/kill", None);
    env.svc.ok("POST", "/v1/workspaces/pre/connect", None);
    assert_eq!(env.ok("pre", "docker images -q").lines().count(), 1);
}

#[test]
fn archive_and_run_scripts_use_the_workspace_daemon_and_archive_precedes_the_snapshot() {
    skip_unless_ready!();
    let env = Env::start(43600);
    // The archive script needs the daemon still up at kill; the run script records the
    // DOCKER_HOST it was given.
    let repo = env.compose_repo_with(
        "compose-repo",
        &json!({ "scripts": {
            "archive": "docker compose ps --services > archived.txt && docker compose down -t 1",
            "run": "printf '%s' \"$DOCKER_HOST\" > run-docker-host.txt"
        } }),
    );
    let created = env.create(json!({ "id": "ar", "repo": repo.display().to_string() }));
    let ws = &created["workspace"];
    assert_eq!(ws["runtime"]["runtime"], "docker-compose", "{created}");
    let uid = ws["uid"].as_u64().unwrap();
    let docker_host = ws["docker_host"].as_str().unwrap().to_string();
    let wt = env.svc.worktree("ar");
    let ran = wt.join("run-docker-host.txt");
    wait_until(Duration::from_secs(60), "the run script's output", || {
        std::fs::read_to_string(&ran).is_ok_and(|t| !t.is_empty())
    });
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        docker_host,
        "the run script saw the proxy's DOCKER_HOST"
    );

    env.load_image("ar");
    env.ok("ar", "docker compose up -d --wait");
    let killed = env.svc.ok("POST", "/v1/workspaces/ar/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped", "{killed}");
    let archived = std::fs::read_to_string(wt.join("archived.txt")).unwrap();
    let mut services: Vec<&str> = archived.lines().collect();
    services.sort_unstable();
    assert_eq!(
        services,
        ["db", "web"],
        "the archive script listed the services: the daemon was still up"
    );
    // The kill's snapshot holds archived.txt: the archive ran before the snapshot.
    let snap = killed["snapshot_id"].as_str().unwrap().to_string();
    let fork = env.create(json!({ "id": "ar-fork", "from": snap, "runtime": "standard" }));
    assert_eq!(fork["workspace"]["runtime"]["runtime"], "standard");
    let forked = std::fs::read_to_string(env.svc.worktree("ar-fork").join("archived.txt")).unwrap();
    assert_eq!(
        forked, archived,
        "the kill's snapshot has the archive's output"
    );

    // `compose down` in the archive removed the containers (a plain kill only stops them).
    env.svc.ok("POST", "/v1/workspaces/ar/connect", None);
    assert_eq!(
        env.ok("ar", "docker ps -aq").trim(),
        "",
        "compose down ran at kill"
    );
    env.svc.ok("DELETE", "/v1/workspaces/ar", None);
    assert_nothing_left(&env, "ar", uid);
}

/// `"auto_reprovision": true` in a repository's settings: a standard workspace whose setup
/// fails for want of a Docker daemon is reprovisioned to `docker-compose` once and its setup
/// runs again there; a command that fails the same way reprovisions it too, and the answer
/// says to run the command again. Without the setting only the note is given
/// (`workspace_lifecycle::a_docker_command_in_a_standard_workspace_names_the_reprovision`).
#[test]
fn auto_reprovision_gives_a_standard_workspace_that_needs_docker_a_daemon_once() {
    skip_unless_ready!();
    let env = Env::start(43700);
    let dir = env.svc.dir.path();
    let repo = repo::repo_with(
        dir,
        "auto-setup",
        &json!({
            "runtime": "standard", "auto_reprovision": true,
            "scripts": { "setup": "docker info >/dev/null && echo HAS-DOCKER" }
        }),
    );
    let created = env.svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "as", "repo": repo.to_str().unwrap() })),
    );
    let ws = &created["workspace"];
    assert_eq!(ws["runtime"]["runtime"], "docker-compose", "{created}");
    assert_eq!(ws["setup"]["exit_code"], 0, "{created}");
    assert!(
        ws["setup"]["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("HAS-DOCKER"),
        "{created}"
    );
    assert!(
        created["notes"].to_string().contains("auto_reprovision"),
        "{created}"
    );
    assert_eq!(env.svc.exec("as", "docker ps -q")["exit_code"], 0);

    let repo = repo::repo_with(
        dir,
        "auto-exec",
        &json!({ "runtime": "standard", "auto_reprovision": true }),
    );
    env.svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "ae", "repo": repo.to_str().unwrap() })),
    );
    let r = env.svc.exec("ae", "docker ps -q");
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(
        r["notes"][0]
            .as_str()
            .unwrap_or_default()
            .contains("reprovisioned to `docker-compose`"),
        "{r}"
    );
    let ws = env.svc.ok("GET", "/v1/workspaces/ae", None);
    assert_eq!(ws["runtime"]["runtime"], "docker-compose", "{ws}");
    assert_eq!(env.svc.exec("ae", "docker ps -q")["exit_code"], 0);
    for id in ["as", "ae"] {
        env.svc.ok("DELETE", &format!("/v1/workspaces/{id}"), None);
    }
}

/// The pid of workspace `id`'s `part` (`dockerd`, `containerd`, `dockwarden`): a process whose
/// program is that and whose command line names the workspace's docker directory.
fn part_pid(env: &Env, id: &str, part: &str) -> Option<i32> {
    let dir = env.ws_dir(id).join("docker").display().to_string();
    pids_mentioning(&dir).into_iter().find(|p| {
        let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        let argv0 = c.split(|b| *b == 0).next().unwrap_or_default();
        Path::new(&*String::from_utf8_lossy(argv0))
            .file_name()
            .is_some_and(|n| n == part)
    })
}

/// Seed: a runtime that died is restarted. `kill -9` of the private dockerd, then of its
/// containerd, then of the dockwarden proxy: each is noticed by upkeep (default tick) and the
/// runtime is restarted on the same data root within 5 s; `docker ps` works again, the image
/// loaded before is still there, and `info` shows the recovery.
#[test]
fn a_killed_dockerd_containerd_or_proxy_is_restarted_within_5_s() {
    skip_unless_ready!();
    // The service preloads the test image: the data root's content shows it was kept.
    let env = Env::start_with(43800, true);
    env.svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "heal", "runtime": "docker-compose" })),
    );
    for part in ["dockerd", "containerd", "dockwarden"] {
        // Up longer than a crash loop's part would stay (`heal::FLAPPING`, 3 s).
        std::thread::sleep(Duration::from_millis(3500));
        let pid = part_pid(&env, "heal", part).unwrap_or_else(|| panic!("no {part} running"));
        let killed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let t0 = std::time::Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let mut rec = Value::Null;
        while t0.elapsed() < Duration::from_secs(20) {
            let ws = env.svc.ok("GET", "/v1/workspaces/heal", None);
            if ws["last_recovery"]["at_ms"]
                .as_u64()
                .is_some_and(|t| t >= killed_at)
            {
                rec = ws["last_recovery"].clone();
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let took = t0.elapsed();
        assert!(rec.is_object(), "{part}: never restarted");
        eprintln!(
            "{part} killed: runtime restarted in {} ms",
            took.as_millis()
        );
        assert!(
            took <= Duration::from_secs(5),
            "{part}: restarted after {took:?}: {rec}"
        );
        let reason = rec["reason"].as_str().unwrap();
        let named = if part == "dockwarden" {
            "dockwarden proxy"
        } else {
            part
        };
        assert!(
            reason.starts_with("runtime restarted after a part died") && reason.contains(named),
            "{part}: {rec}"
        );
        assert_ne!(part_pid(&env, "heal", part), Some(pid));
        let images = env.ok("heal", "docker image ls -q dockwarden-test:latest");
        assert!(
            !images.trim().is_empty(),
            "{part}: the data root was not kept"
        );
        let info = env.svc.cli(&["info", "heal"]);
        let text = String::from_utf8_lossy(&info.stdout);
        assert!(
            text.contains("last recovery: runtime restarted after a part died"),
            "{text}"
        );
    }
    // A call that arrives right after a part died waits for the restart instead of failing,
    // and its answer carries the recovery.
    std::thread::sleep(Duration::from_millis(3500));
    let pid = part_pid(&env, "heal", "dockerd").expect("dockerd");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Dead (a zombie or gone), and the call comes before upkeep's next tick could act.
    wait_until(Duration::from_secs(5), "dockerd gone", || {
        !alive(&pid.to_string())
    });
    let r = env
        .svc
        .exec("heal", "docker ps -q >/dev/null && echo DAEMON-UP");
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"], "DAEMON-UP\n", "{r}");
    assert!(
        r["recovery"]["reason"]
            .as_str()
            .is_some_and(|t| t.starts_with("runtime restarted after a part died")),
        "{r}"
    );
    env.svc.ok("DELETE", "/v1/workspaces/heal", None);
}

/// A dockerd that exits at once on every restart is a crash loop: restarts back off (1 s,
/// 2 s, 4 s, ...), so a dozen seconds see a handful of tries, not one per tick, and a call
/// meanwhile gets `runtime_down` (503) naming what died and its log.
#[test]
fn a_dockerd_that_keeps_dying_backs_off_and_reports_runtime_down() {
    skip_unless_ready!();
    let wrap = tempfile::tempdir().unwrap();
    std::fs::set_permissions(wrap.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let starts = wrap.path().join("starts");
    let fail = wrap.path().join("fail");
    let script = wrap.path().join("dockerd");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho start >> {starts}\nif [ -e {fail} ]; then echo 'dockerd wrapper: exiting at once' >&2; exit 1; fi\nexec {real} \"$@\"\n",
            starts = starts.display(),
            fail = fail.display(),
            real = dockerd()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let svc = Svc::start(43850, &["--dockerd", script.to_str().unwrap()], &[]);
    std::fs::set_permissions(svc.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "loop", "runtime": "docker-compose" })),
    );
    let ws_dir = svc
        .state
        .join("workspaces/loop/docker")
        .display()
        .to_string();
    let pid = pids_mentioning(&ws_dir)
        .into_iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.starts_with(dockerd().as_bytes()))
        })
        .expect("the workspace's dockerd");
    std::fs::write(&fail, "").unwrap();
    let before = std::fs::read_to_string(&starts).unwrap().lines().count();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(12));
    let tries = std::fs::read_to_string(&starts).unwrap().lines().count() - before;
    eprintln!("crash loop: {tries} restarts in 12 s");
    // Without back-off: one per 1 s tick (12). With it: 1 + 2 + 4 + 8 s between tries.
    assert!((2..=6).contains(&tries), "{tries} restarts in 12 s");
    let (code, v) = svc.api(
        "POST",
        "/v1/workspaces/loop/exec",
        Some(json!({ "cmd": "docker ps" })),
    );
    assert_eq!(code, 503, "{v}");
    assert_eq!(v["code"], "runtime_down", "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("dockerd") && msg.contains("dockerd.log"),
        "{v}"
    );
    let _ = std::fs::remove_file(&fail);
    let _ = svc.api("DELETE", "/v1/workspaces/loop", None);
}

/// Suspension of a docker-compose workspace freezes its daemons and its containers with it:
/// after resume the same container (same id, same host pid, never restarted) runs on, and
/// the daemon answers at once, without a heal restart.
#[test]
fn a_suspended_compose_workspace_keeps_its_containers_running_after_resume() {
    skip_unless_ready!();
    let env = Env::start(43900);
    let ws = env.create(json!({ "id": "fz", "runtime": "docker-compose" }));
    let uid = ws["workspace"]["uid"].as_u64().unwrap();
    env.load_image("fz");
    let cid = env
        .ok("fz", "docker run -d dockwarden-test:latest sleep 1000")
        .trim()
        .to_string();
    let pid_of = |env: &Env| {
        env.ok("fz", &format!("docker inspect -f '{{{{.State.Pid}}}} {{{{.RestartCount}}}} {{{{.State.StartedAt}}}}' {cid}"))
            .trim()
            .to_string()
    };
    let before = pid_of(&env);
    let host_pid: i32 = before.split(' ').next().unwrap().parse().unwrap();
    let sus = env.svc.ok("POST", "/v1/workspaces/fz/suspend", None);
    assert_eq!(sus["workspace"]["status"], "suspended", "{sus}");
    let freezer = PathBuf::from(format!(
        "/sys/fs/cgroup/freezer/dockwarden_ws_{uid}/freezer.state"
    ));
    if freezer.exists() {
        assert_eq!(std::fs::read_to_string(&freezer).unwrap().trim(), "FROZEN");
        // The container's process is in a cgroup beneath the frozen one.
        let cg = std::fs::read_to_string(format!("/proc/{host_pid}/cgroup")).unwrap();
        assert!(
            cg.lines().any(|l| l.contains(":freezer:")
                && l.contains(&format!("/dockwarden_ws_{uid}/containers/"))),
            "the container is not under the workspace's freezer cgroup: {cg}"
        );
    }
    let state = std::fs::read_to_string(format!("/proc/{host_pid}/status")).unwrap();
    assert!(state.contains("State:"), "{state}");
    let res = env.svc.ok("POST", "/v1/workspaces/fz/resume", None);
    assert_eq!(res["thawed"], true, "{res}");
    assert_eq!(
        pid_of(&env),
        before,
        "the container was restarted, not resumed"
    );
    assert!(
        env.ok("fz", "docker ps -q --no-trunc").contains(&cid),
        "the container is not running after resume"
    );
    let info = env.svc.ok("GET", "/v1/workspaces/fz", None);
    assert!(
        info["last_recovery"].is_null(),
        "resume restarted the runtime as if it had died: {info}"
    );
}

/// The processes in cgroup `cg` and beneath it, on every hierarchy that has it.
fn procs_beneath(cg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = cgroups_named(cg);
    while let Some(d) = stack.pop() {
        let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
        out.extend(procs.lines().map(str::to_string));
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    out
}

/// Kill stops every container, each the way `docker stop` would: a PID 1 that ignores
/// SIGTERM is killed after the grace (exit 137), one with a stop signal of its own gets that
/// signal and exits by itself (exit 0), nothing of theirs is left running, and as containers
/// stopped by hand neither comes back at connect, `restart: unless-stopped` or not. Container
/// users are not the workspace uid, so the stop of the workspace's processes does not reach
/// them first.
#[test]
fn kill_stops_every_container_with_its_own_signal_and_none_comes_back_at_connect() {
    skip_unless_ready!();
    let env = Env::start_with(43950, true);
    let ws = env.create(json!({ "id": "st", "runtime": "docker-compose" }));
    let uid = ws["workspace"]["uid"].as_u64().unwrap();
    env.ok(
        "st",
        "docker run -d --name deaf -u 999:999 --restart unless-stopped dockwarden-test:latest sleep 1d",
    );
    env.ok(
        "st",
        "docker run -d --name polite -u 999:999 --restart unless-stopped --stop-signal SIGUSR1 \
         dockwarden-test:latest sh -c 'trap \"exit 0\" USR1; while :; do sleep 1 & wait $!; done'",
    );
    let running = env.ok("st", "docker ps --format '{{.Names}}' | sort");
    assert_eq!(running, "deaf\npolite\n");

    let killed = env.svc.ok("POST", "/v1/workspaces/st/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped", "{killed}");
    let left = procs_beneath(&format!("dockwarden_ws_{uid}/containers"));
    assert!(left.is_empty(), "container processes left: {left:?}");

    env.svc.ok("POST", "/v1/workspaces/st/connect", None);
    assert_eq!(
        env.ok("st", "docker ps -q").trim(),
        "",
        "a container stopped at kill came back at connect"
    );
    let exit = |name: &str| {
        env.ok(
            "st",
            &format!("docker inspect -f '{{{{.State.ExitCode}}}}' {name}"),
        )
        .trim()
        .to_string()
    };
    assert_eq!(exit("deaf"), "137", "killed after its grace");
    assert_eq!(exit("polite"), "0", "stopped by its own stop signal");
}
