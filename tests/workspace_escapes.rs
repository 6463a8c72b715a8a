//! The root escapes of issue 23, tried from inside docker-compose workspaces as the workspace
//! user only (`ws exec`, containers through the workspace's proxy, the files API), on both
//! engines (20.10 `/usr/sbin/dockerd`, 26.1 under `DW_ENGINE26_PREFIX`) and with disk images
//! off and on. Each test is named after its attack and fails if the attack works.
//!
//! The defences are layered (docs/isolation.md), and the tests reach each layer:
//! - container root is the workspace uid (`userns-remap`): what a container makes is never
//!   host root's;
//! - workspace processes run with `no_new_privs`, in a mount namespace where the worktree,
//!   HOME and the temporary directories are `nosuid,nodev`: files the test plants as host
//!   root (what a failure of the first layer would leave) still give nothing;
//! - containers lose `CAP_MKNOD`; chown-back removes device nodes and clears set-id bits
//!   whatever the link count; the files API never opens a FIFO or device for reading.
//!
//! The uid-reuse attack has its own file (`tests/workspace_uid_reuse.rs`), and the hostile git
//! repository too (`tests/git_hostile_repo.rs` for the selector; `hostile_repository...` here
//! for the verbs). Needs root; skips with a printed reason otherwise.

mod common;
mod workspace_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Engine, wait_until};
use dockwarden::sys::mountinfo;
use serde_json::{Value, json};
use workspace_support::Svc;

const IMAGE: &str = "dockwarden-test:latest";

fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (private dockerd, user namespaces, mounts)".into());
    }
    None
}

macro_rules! skip_unless_root {
    () => {
        if let Some(r) = skip_reason() {
            println!("skipped: {r}");
            return;
        }
    };
}

/// A service with one docker-compose workspace `w`, its daemon holding the test image.
struct Case {
    svc: Svc,
    uid: u32,
    engine: &'static str,
    images: bool,
    _tar: tempfile::TempDir,
}

impl Case {
    fn start(uid_base: u32, engine: &Engine, images: bool) -> Case {
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
        assert!(st.success(), "docker save of the test image");
        std::fs::set_permissions(&tar, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let resources = tar_dir.path().join("resources.toml");
        let images_toml = if images { "on" } else { "off" };
        std::fs::write(
            &resources,
            format!("[defaults]\ndisk = \"160MiB\"\n[disk]\nimages = \"{images_toml}\"\n"),
        )
        .expect("resources");
        let args = [
            "--dockerd".to_string(),
            engine.dockerd_path().display().to_string(),
            "--preload-image-tar".to_string(),
            tar.display().to_string(),
            "--resources".to_string(),
            resources.display().to_string(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let svc = Svc::start(uid_base, &args, &[]);
        std::fs::set_permissions(svc.dir.path(), std::fs::Permissions::from_mode(0o711))
            .expect("chmod");
        let (status, v) = svc.api(
            "POST",
            "/v1/workspaces",
            Some(json!({"id": "w", "runtime": "docker-compose"})),
        );
        assert!(
            (200..300).contains(&status),
            "create on {}: {status} {v}",
            engine.name
        );
        let uid = v["workspace"]["uid"].as_u64().expect("uid") as u32;
        println!(
            "case: Engine {}, disk images {images_toml}, workspace uid {uid}",
            engine.name
        );
        Case {
            svc,
            uid,
            engine: engine.name,
            images,
            _tar: tar_dir,
        }
    }

    /// Runs `cmd` in the workspace as its user; (exit code, stdout, stderr).
    fn exec(&self, cmd: &str) -> (i64, String, String) {
        let v = self.svc.exec("w", cmd);
        (
            v["exit_code"].as_i64().unwrap_or(-1),
            v["stdout"].as_str().unwrap_or_default().to_string(),
            v["stderr"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// `exec` that must exit 0; its stdout.
    fn ok(&self, cmd: &str) -> String {
        let (code, out, err) = self.exec(cmd);
        assert_eq!(code, 0, "[{}] `{cmd}` failed: {out}{err}", self.label());
        out
    }

    fn label(&self) -> String {
        format!(
            "Engine {}, images {}",
            self.engine,
            if self.images { "on" } else { "off" }
        )
    }

    fn wt(&self) -> PathBuf {
        self.svc.worktree("w")
    }

    fn finish(self) {
        let (status, v) = self.svc.api("DELETE", "/v1/workspaces/w", None);
        assert!((200..300).contains(&status), "delete: {status} {v}");
        let name = format!("dw{}:", self.uid);
        for f in ["/etc/passwd", "/etc/group", "/etc/subuid", "/etc/subgid"] {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            assert!(
                !text.lines().any(|l| l.starts_with(&name)),
                "delete left `{name}` in {f}"
            );
        }
    }
}

/// Runs `f` on a fresh workspace for each engine, with disk images off and on.
fn each(uid_base: u32, f: impl Fn(&Case)) {
    for e in common::installed_engines() {
        for images in [false, true] {
            let c = Case::start(uid_base, &e, images);
            f(&c);
            c.finish();
        }
    }
}

fn stat(p: &Path) -> std::fs::Metadata {
    std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The host's mounts beneath the workspace proxy's pin directory: what a flood of pins adds.
fn pin_mounts(pins: &Path) -> usize {
    mountinfo::at_or_beneath(&mountinfo::own(), pins)
        .iter()
        .filter(|m| *m != pins)
        .count()
}

#[test]
fn a_setuid_root_file_made_by_a_container_in_a_bind_gives_no_privilege_during_or_after_its_life() {
    skip_unless_root!();
    each(44000, |c| {
        let uid = c.uid.to_string();
        // The container is root in its own namespace: it chowns to its 0:0 and sets 4755/2755.
        c.ok(&format!(
            "mkdir -p d && docker run -d --name keep -v $PWD/d:/d {IMAGE} sh -c \
             'mkdir /d/u /d/g && cp /bin/busybox /d/u/busybox && chown 0:0 /d/u/busybox && chmod 4755 /d/u/busybox && \
              cp /bin/busybox /d/g/busybox && chgrp 0 /d/g/busybox && chmod 2755 /d/g/busybox && touch /d/ready && sleep 600'"
        ));
        let wt = c.wt();
        wait_until(
            Duration::from_secs(30),
            "the container made its files",
            || wt.join("d/ready").exists(),
        );
        for name in ["u/busybox", "g/busybox"] {
            let m = stat(&wt.join("d").join(name));
            assert_ne!(
                m.mode() & 0o6000,
                0,
                "[{}] the container did set the bits of {name}",
                c.label()
            );
            assert_eq!(
                m.uid(),
                c.uid,
                "[{}] container root's file is the workspace user's ({name})",
                c.label()
            );
            assert_ne!(m.gid(), 0, "[{}] and never host root's group", c.label());
        }
        // While the container runs: running it outside gives the workspace user's ids only.
        let ids = c.ok("./d/u/busybox id -u && ./d/u/busybox id -g && ./d/g/busybox id -u && ./d/g/busybox id -g");
        assert_eq!(
            ids.split_whitespace().collect::<Vec<_>>(),
            [uid.as_str(); 4],
            "[{}]",
            c.label()
        );
        let (code, _, _) = c.exec("./d/u/busybox cat /proc/1/environ");
        assert_ne!(code, 0, "[{}] no root read", c.label());
        c.ok("docker rm -f keep >/dev/null");
        // After its life (chown-back has run): still nothing.
        let ids = c.ok("./d/u/busybox id -u && ./d/g/busybox id -g");
        assert_eq!(
            ids.split_whitespace().collect::<Vec<_>>(),
            [uid.as_str(); 2],
            "[{}]",
            c.label()
        );

        // Defence in depth: a real setuid-root and setgid-root file (what a failed user
        // namespace would leave), planted by the test as host root, gives nothing either.
        for (name, mode) in [("planted-suid", 0o4755), ("planted-sgid", 0o2755)] {
            std::fs::create_dir_all(wt.join(name)).expect("mkdir");
            let p = wt.join(name).join("busybox");
            std::fs::copy("/bin/busybox", &p).expect("copy busybox");
            nix::unistd::chown(&p, Some(0.into()), Some(0.into())).expect("chown");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let ids = c.ok("./planted-suid/busybox id -u && ./planted-sgid/busybox id -g && grep NoNewPrivs /proc/self/status");
        assert_eq!(
            ids.split_whitespace().collect::<Vec<_>>(),
            [uid.as_str(), uid.as_str(), "NoNewPrivs:", "1"],
            "[{}] set-id files raise nothing",
            c.label()
        );
        // The mount the worktree is on, in the workspace's view (the deepest mount point above
        // it, the last one mounted there), is nosuid,nodev.
        let mounts = mountinfo::parse(&c.ok("cat /proc/self/mountinfo"));
        let line = mountinfo::containing(&mounts, &wt).expect("a mount above the worktree");
        let opts = &line.options;
        assert!(
            opts.contains("nosuid") && opts.contains("nodev"),
            "[{}] {line:?}",
            c.label()
        );
    });
}

#[test]
fn the_hard_link_trick_leaves_no_setid_bit() {
    skip_unless_root!();
    each(44100, |c| {
        // A non-root container user (a subordinate id on the host) makes a world-writable
        // file, so the workspace user may hard-link it outside the bound directory (the
        // kernel's protected_hardlinks refuses a link to another's setuid file), then makes it
        // setuid while the container still runs.
        c.ok(&format!(
            "mkdir -p d o && chmod 777 d && docker run -d --name hl --user 1000:1000 -v $PWD/d:/d {IMAGE} \
             sh -c 'mkdir /d/x && cp /bin/busybox /d/x/busybox && chmod 0777 /d/x/busybox && touch /d/ready && \
                    while [ ! -e /d/go ]; do sleep 0.1; done; chmod 4755 /d/x/busybox && touch /d/done && sleep 600'"
        ));
        let wt = c.wt();
        wait_until(
            Duration::from_secs(30),
            "the container made its setuid file",
            || wt.join("d/ready").exists(),
        );
        c.ok("ln d/x/busybox o/busybox && touch d/go");
        wait_until(Duration::from_secs(30), "the container set 4755", || {
            wt.join("d/done").exists()
        });
        assert_eq!(
            stat(&wt.join("d/x/busybox")).mode() & 0o7777,
            0o4755,
            "[{}] the trick is set up",
            c.label()
        );
        c.ok("docker rm -f hl >/dev/null");
        assert_eq!(
            stat(&wt.join("d/x/busybox")).ino(),
            stat(&wt.join("o/busybox")).ino(),
            "one inode, two links"
        );
        wait_until(
            Duration::from_secs(30),
            "chown-back cleared the setid bit of the shared inode",
            || stat(&wt.join("d/x/busybox")).mode() & 0o6000 == 0,
        );
        // Its owner stays the container user's (a link is outside the source), its bits are gone.
        assert_ne!(stat(&wt.join("d/x/busybox")).uid(), 0);
        let euid = c.ok("./o/busybox id -u");
        assert_eq!(euid.trim(), c.uid.to_string(), "[{}]", c.label());
    });
}

#[test]
fn a_device_node_made_by_a_container_cannot_be_opened_and_is_gone_after_chown_back() {
    skip_unless_root!();
    each(44200, |c| {
        let (code, out, err) = c.exec(&format!(
            "mkdir -p d && docker run --rm -v $PWD/d:/d {IMAGE} sh -c 'mknod /d/hwrng c 10 183 && chmod 666 /d/hwrng'"
        ));
        assert_ne!(
            code,
            0,
            "[{}] mknod in a container must fail: {out}{err}",
            c.label()
        );
        assert!(err.contains("not permitted"), "[{}] {err}", c.label());
        assert!(
            std::fs::symlink_metadata(c.wt().join("d/hwrng")).is_err(),
            "no node was made"
        );
        let (code, _, err) = c.exec(&format!("docker run --rm --cap-add MKNOD {IMAGE} true"));
        assert_ne!(code, 0);
        assert!(
            err.contains("container.capabilities"),
            "[{}] {err}",
            c.label()
        );
        let caps = c.ok(&format!(
            "id=$(docker create {IMAGE} true) && docker inspect --format '{{{{json .HostConfig.CapDrop}}}}' $id && docker rm $id >/dev/null"
        ));
        assert!(
            caps.contains("MKNOD"),
            "[{}] the proxy drops MKNOD: {caps}",
            c.label()
        );

        // A node that got there anyway (planted by the test as host root: /dev/null's numbers,
        // 0666) cannot be opened by the workspace user, and chown-back removes it once a
        // container that bound its directory is gone.
        let wt = c.wt();
        let node = wt.join("d/null-dev");
        nix::sys::stat::mknod(
            &node,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .expect("mknod");
        std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let (code, _, err) = c.exec("echo x > d/null-dev");
        assert_ne!(
            code,
            0,
            "[{}] a device node in the worktree opens nothing (nodev)",
            c.label()
        );
        assert!(err.contains("ermission denied"), "[{}] {err}", c.label());
        let (status, body) = c.svc.read("w", "d/null-dev");
        assert_eq!(
            status,
            400,
            "[{}] files API: {}",
            c.label(),
            String::from_utf8_lossy(&body)
        );
        assert!(
            String::from_utf8_lossy(&body).contains("\"invalid\""),
            "{}",
            String::from_utf8_lossy(&body)
        );
        c.ok(&format!("docker run --rm -v $PWD/d:/d {IMAGE} true"));
        wait_until(
            Duration::from_secs(30),
            "chown-back removed the device node",
            || std::fs::symlink_metadata(&node).is_err(),
        );
    });
}

#[test]
fn a_fifo_read_through_the_files_api_answers_invalid_at_once() {
    skip_unless_root!();
    each(44300, |c| {
        c.ok("mkfifo pipe");
        let socket = c.svc.socket.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = common::http(
                &socket,
                "GET",
                "/v1/workspaces/w/files/content?path=pipe",
                &[],
            );
            let _ = tx.send(r.map(|(s, b)| (s, String::from_utf8_lossy(&b).into_owned())));
        });
        let (status, body) = rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("[{}] a FIFO read hung", c.label()))
            .expect("http");
        assert_eq!(status, 400, "[{}] {body}", c.label());
        let v: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["code"], "invalid", "[{}] {v}", c.label());
        assert!(
            v["message"].as_str().unwrap_or_default().contains("FIFO"),
            "{v}"
        );
    });
}

#[test]
fn fifteen_hundred_binds_in_one_create_are_refused_with_a_rule_id_and_no_host_mount_is_added() {
    skip_unless_root!();
    each(44400, |c| {
        c.ok("mkdir -p b && cd b && i=0; while [ $i -lt 1500 ]; do mkdir $i; i=$((i+1)); done");
        let pins = c.svc.state.join("workspaces/w/docker/pins");
        let before = pin_mounts(&pins);
        let (code, out, err) = c.exec(&format!(
            "args=''; i=0; while [ $i -lt 1500 ]; do args=\"$args -v $PWD/b/$i:/m/$i\"; i=$((i+1)); done; \
             docker create $args {IMAGE} true"
        ));
        assert_ne!(code, 0, "[{}] {out}", c.label());
        assert!(
            err.contains("container.bind.pin_limit"),
            "[{}] {err}",
            c.label()
        );
        assert_eq!(
            (before, pin_mounts(&pins)),
            (0, 0),
            "[{}] no pin was mounted on the host",
            c.label()
        );
        // A create within the cap still works, with its pins.
        c.ok(&format!(
            "docker run --rm -v $PWD/b/1:/a -v $PWD/b/2:/b {IMAGE} sh -c 'touch /a/x /b/y'"
        ));
        assert!(c.wt().join("b/1/x").exists() && c.wt().join("b/2/y").exists());
    });
}

#[test]
fn a_container_writing_past_the_workspace_disk_fails_with_enospc() {
    skip_unless_root!();
    for e in common::installed_engines() {
        let c = Case::start(44500, &e, true);
        let wt = c.wt();
        let data = c.svc.state.join("workspaces/w/docker/data");
        assert!(
            workspace_support_is_mount(&data),
            "[{}] the data root is a disk of its own",
            c.label()
        );
        let (code, out, err) = c.exec(&format!(
            "docker run --rm {IMAGE} sh -c 'dd if=/dev/zero of=/big bs=1M count=300 2>&1; echo rc=$?'"
        ));
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.contains("No space left on device"),
            "[{}] {out}",
            c.label()
        );
        let (_, out, _) = c.exec(&format!(
            "docker volume create vol >/dev/null && docker run --rm -v vol:/v {IMAGE} sh -c 'dd if=/dev/zero of=/v/big bs=1M count=300 2>&1; echo rc=$?'"
        ));
        assert!(
            out.contains("No space left on device"),
            "[{}] a volume is bounded too: {out}",
            c.label()
        );
        drop(wt);
        c.finish();
    }
}

fn workspace_support_is_mount(p: &Path) -> bool {
    let (Ok(a), Some(parent)) = (std::fs::metadata(p), p.parent()) else {
        return false;
    };
    std::fs::metadata(parent).is_ok_and(|b| b.dev() != a.dev())
}

#[test]
fn legitimate_work_keeps_working_with_container_root_as_the_workspace_user() {
    skip_unless_root!();
    each(44600, |c| {
        let wt = c.wt();
        // A compose stack with a named volume and a published port.
        std::fs::write(
            wt.join("compose.yaml"),
            format!(
                "services:\n  web:\n    image: {IMAGE}\n    ports: [\"8080:80\"]\n    volumes: [\"data:/data\", \"./out:/out\"]\n    \
                 command: [\"sh\", \"-c\", \"mkdir -p /www && echo hello > /www/index.html && date > /out/root.txt && touch /data/m && exec httpd -f -p 80 -h /www\"]\n\
                 volumes:\n  data: {{}}\n"
            ),
        )
        .expect("compose.yaml");
        nix::unistd::chown(
            &wt.join("compose.yaml"),
            Some(c.uid.into()),
            Some(c.uid.into()),
        )
        .expect("chown");
        c.ok("mkdir -p out && docker compose up -d --wait 2>&1 || docker-compose up -d 2>&1");
        wait_until(Duration::from_secs(30), "the web service answers", || {
            c.exec("wget -q -O - http://127.0.0.1:8080/ 2>/dev/null || curl -s 127.0.0.1:8080")
                .1
                .contains("hello")
        });
        // What container root wrote into the bind is the workspace user's at once.
        wait_until(Duration::from_secs(10), "root.txt", || {
            wt.join("out/root.txt").exists()
        });
        assert_eq!(
            stat(&wt.join("out/root.txt")).uid(),
            c.uid,
            "[{}] no chown-back needed",
            c.label()
        );
        c.ok("docker compose down -v 2>&1 || docker-compose down -v 2>&1");
        // A non-root container user's file is handed back by chown-back.
        c.ok(&format!("mkdir -p u && chmod 777 u && docker run --rm --user 1000 -v $PWD/u:/u {IMAGE} touch /u/f"));
        wait_until(
            Duration::from_secs(30),
            "chown-back handed the container user's file back",
            || stat(&wt.join("u/f")).uid() == c.uid,
        );
        // Both builders.
        std::fs::create_dir_all(wt.join("ctx")).expect("ctx");
        std::fs::write(
            wt.join("ctx/Dockerfile"),
            format!("FROM {IMAGE}\nRUN echo built > /built && chown 0:0 /built\n"),
        )
        .expect("df");
        c.ok("DOCKER_BUILDKIT=0 docker build -q -t classic ctx && docker run --rm classic cat /built");
        c.ok("DOCKER_BUILDKIT=1 docker build -q -t kit ctx 2>&1 && docker run --rm kit cat /built");
        // A snapshot and a fork.
        let snap = c.svc.ok("POST", "/v1/workspaces/w/snapshot", None);
        let sid = snap["snapshot"]["id"]
            .as_str()
            .or(snap["id"].as_str())
            .expect("snapshot id")
            .to_string();
        let (status, v) = c.svc.api(
            "POST",
            "/v1/workspaces",
            Some(json!({"id": "f", "from": sid})),
        );
        assert!(
            (200..300).contains(&status),
            "[{}] fork: {status} {v}",
            c.label()
        );
        let f = c.svc.exec(
            "f",
            "cat out/root.txt >/dev/null && docker run --rm dockwarden-test:latest id -u",
        );
        assert_eq!(f["exit_code"], 0, "[{}] {f}", c.label());
        let (status, v) = c.svc.api("DELETE", "/v1/workspaces/f", None);
        assert!((200..300).contains(&status), "{status} {v}");
    });
}
