//! Packaging artefacts stay valid: the systemd unit passes `systemd-analyze verify`, and the
//! Dockerfile builds the sidecar image the README documents, whose proxy, run the way the
//! Dockerfile's header says, serves the policy on the host.

mod common;
mod pins_support;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use pins_support::{PinGuard, mounted as pins_mounted};

#[test]
fn systemd_unit_verifies() {
    let Ok(out) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skip: systemd-analyze is not installed");
        return;
    };
    assert!(out.status.success());
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/systemd/dockwarden.service"
    ))
    .expect("unit");
    assert!(
        unit.contains("Before=systemd-user-sessions.service"),
        "starts before the user's session"
    );
    assert!(unit.contains("After=docker.service"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dockwarden.service");
    std::fs::write(
        &path,
        unit.replace(
            "/usr/local/bin/dockwarden",
            env!("CARGO_BIN_EXE_dockwarden"),
        ),
    )
    .expect("write");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("verify");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("dockwarden.service:"),
        "systemd-analyze verify: {err}"
    );
}

#[test]
fn docker_socket_drop_in_keeps_the_daemon_root_only() {
    let conf = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/systemd/docker.socket.d/root-only.conf"
    ))
    .expect("drop-in");
    assert!(conf.contains("SocketMode=0600") && conf.contains("SocketGroup=root"));
}

/// What `scripts/sidecar-base-images.sh` printed: the local base images and the build context.
struct BuildInputs {
    builder: String,
    runtime: String,
    context: String,
}

/// Makes the base images (mmdebstrap, `docker import`) and the vendored context on `e`'s daemon.
/// Never a skip: a missing tool fails here with the script's message saying what to install.
fn base_images(e: &Engine) -> BuildInputs {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/sidecar-base-images.sh"
    );
    let mut cmd = Command::new(script);
    cmd.env("DOCKER_HOST", e.host());
    let out = run_with_timeout(&mut cmd, None, Duration::from_secs(1200));
    assert!(
        out.status.success(),
        "scripts/sidecar-base-images.sh failed (it needs mmdebstrap, docker and a rustup toolchain; scripts/setup.sh installs the first two):\n{}",
        stderr(&out)
    );
    let text = stdout(&out);
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("no `{k}` in the script's output: {text}"))
            .to_owned()
    };
    BuildInputs {
        builder: get("BUILDER_IMAGE="),
        runtime: get("RUNTIME_IMAGE="),
        context: get("CONTEXT="),
    }
}

/// An image tag removed from its daemon on drop, whatever the test did.
struct ImageTag {
    engine: Engine,
    tag: String,
}

impl Drop for ImageTag {
    fn drop(&mut self) {
        let _ = self.engine.daemon(&["rmi", "-f", &self.tag]);
    }
}

/// The sidecar container and everything it was given: on drop, the containers that use its
/// pins go first (`PinGuard`, while the proxy still runs), then the sidecar, its leftover
/// pins, the shared mount of its run directory and the workspace.
struct Sidecar {
    pins: Option<PinGuard>,
    engine: Engine,
    name: String,
    /// Stands for `/run/dockwarden`: a shared mount, so pins made inside propagate out.
    run_dir: PathBuf,
    workspace: tempfile::TempDir,
}

impl Sidecar {
    fn socket(&self) -> PathBuf {
        self.run_dir.join("docker.sock")
    }

    fn ws(&self) -> PathBuf {
        self.workspace.path().join("ws")
    }

    /// The Docker CLI pointed at the sidecar's proxy.
    fn docker(&self, args: &[&str]) -> std::process::Output {
        let cli = cli28().or(cli2010()).expect("a docker CLI");
        let mut c = Command::new(cli);
        c.env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .env_remove("DOCKER_CONTEXT")
            .args(args);
        run_with_timeout(&mut c, None, Duration::from_secs(120))
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        drop(self.pins.take());
        let _ = self.engine.daemon(&["rm", "-f", &self.name]);
        drop(PinGuard {
            pins: self.run_dir.join("pins"),
            host: self.engine.host(),
        });
        let _ = Command::new("umount").arg("-l").arg(&self.run_dir).status();
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// Starts the image as the Dockerfile's header says, with this test's paths: the daemon's
/// socket, a shared run directory (`rshared`), the workspace at the same path inside and out,
/// the cgroup hierarchy.
fn start_sidecar(e: &Engine, tag: &str) -> Sidecar {
    let workspace = tempfile::Builder::new()
        .prefix("dwsidecar")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let name = unique("sidecar");
    let run_dir = PathBuf::from(format!("/run/dockwarden/{name}"));
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let mut s = Sidecar {
        pins: None,
        engine: e.clone(),
        name: name.clone(),
        run_dir: run_dir.clone(),
        workspace,
    };
    std::fs::create_dir_all(s.ws().join("data")).expect("workspace");
    let ws = s.ws().canonicalize().expect("canonical workspace");
    std::fs::write(ws.join("data/marker"), b"pinned").expect("marker");
    // The VM image's part: /run/dockwarden is a shared mount on the host.
    let run = run_dir.display().to_string();
    for args in [vec!["--bind", &run, &run], vec!["--make-shared", &run]] {
        let st = Command::new("mount").args(&args).status().expect("mount");
        assert!(st.success(), "mount {args:?}");
    }
    let ws = ws.display().to_string();
    let sock = format!("{}:/var/run/docker.sock", e.socket.display());
    let pins = format!("{run}/pins");
    let listen = format!("{run}/docker.sock");
    let (mount_run, mount_ws) = (format!("{run}:{run}:rshared"), format!("{ws}:{ws}"));
    let flags = [
        "--pid",
        "host",
        "--cgroupns",
        "host",
        "-v",
        &sock,
        "-v",
        &mount_run,
        "-v",
        &mount_ws,
        "-v",
        "/sys/fs/cgroup:/sys/fs/cgroup",
    ];
    let proxy = [
        tag,
        "proxy",
        "--workspace",
        &ws,
        "--listen",
        &listen,
        "--pin-dir",
        &pins,
    ];
    let run_with = |privilege: &[&str]| {
        let mut args = vec!["run", "-d", "--name", &name];
        args.extend(privilege.iter().chain(&flags).chain(&proxy));
        e.daemon(&args)
    };
    let started = run_with(&["--privileged"]);
    if !started.status.success() && stderr(&started).contains("unable to apply caps") {
        // A machine whose capability bounding set lacks one (this project's VM has no
        // CAP_SYS_RESOURCE): Engine 20.10 asks for every capability it knows for
        // `--privileged` and runc cannot grant them. The nearest it can start: every other
        // capability, unconfined.
        eprintln!(
            "note: Engine {} cannot start --privileged containers on this machine ({}); the sidecar gets --cap-add ALL --cap-drop SYS_RESOURCE, seccomp and AppArmor unconfined",
            e.name,
            stderr(&started).lines().next().unwrap_or_default()
        );
        e.force_remove(&name);
        ok(run_with(&[
            "--cap-add",
            "ALL",
            "--cap-drop",
            "SYS_RESOURCE",
            "--security-opt",
            "seccomp=unconfined",
            "--security-opt",
            "apparmor=unconfined",
        ]));
    } else {
        ok(started);
    }
    s.pins = Some(PinGuard {
        pins: PathBuf::from(&pins),
        host: e.host(),
    });
    let t0 = Instant::now();
    while !(UnixStream::connect(s.socket()).is_ok() && raw(&s.socket(), PING).contains(" 200 ")) {
        if t0.elapsed() > Duration::from_secs(30) {
            let logs = e.daemon(&["logs", &name]);
            panic!(
                "the sidecar's proxy does not answer on {listen}:\n{}",
                stderr(&logs)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    s
}

const PING: &[u8] = b"GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n";

/// Through the sidecar's socket on the host: a plain run works, a privileged one is refused
/// (403, rule `container.privileged`), and a workspace bind is mounted from its pin.
fn sidecar_serves_the_policy(e: &Engine, tag: &str) {
    let s = start_sidecar(e, tag);
    let hello = ok(s.docker(&["run", "--rm", IMAGE, "echo", "hello from the sidecar"]));
    assert_eq!(hello, "hello from the sidecar");

    let refused = s.docker(&["run", "--rm", "--privileged", IMAGE, "true"]);
    assert!(!refused.status.success(), "--privileged must be refused");
    assert!(
        stderr(&refused).contains("container.privileged"),
        "{}",
        stderr(&refused)
    );
    let body = format!(r#"{{"Image":"{IMAGE}","HostConfig":{{"Privileged":true}}}}"#);
    let create = raw(
        &s.socket(),
        format!(
            "POST /containers/create HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert!(
        create.starts_with("HTTP/1.1 403"),
        "raw privileged create: {create}"
    );
    assert!(create.contains("container.privileged"), "{create}");

    let bind = format!(
        "{}:/d",
        s.ws().join("data").canonicalize().expect("data").display()
    );
    let id = ok(s.docker(&["run", "-d", "-v", &bind, IMAGE, "sleep", "300"]));
    let pins = s.run_dir.join("pins");
    let src = e.inspect(&id)["Mounts"][0]["Source"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        Path::new(&src).starts_with(&pins),
        "the daemon mounts the pin under {}, got `{src}`",
        pins.display()
    );
    assert!(
        pins_mounted(&pins).contains(&src),
        "the pin made in the sidecar is a mount on the host (rshared): {src}"
    );
    assert_eq!(ok(e.daemon(&["exec", &id, "cat", "/d/marker"])), "pinned");
    ok(s.docker(&["rm", "-f", &id]));
    eprintln!(
        "sidecar on Engine {}: run works, --privileged refused (403), the bind mounted from its pin",
        e.name
    );
}

#[test]
fn sidecar_image_builds_and_its_proxy_serves_the_policy() {
    let e20 = engine("20.10")
        .expect("Engine 20.10 (the system's dockerd) must answer; scripts/setup.sh starts it");
    let t0 = Instant::now();
    let inputs = base_images(&e20);
    eprintln!("sidecar base images: {:.1?}", t0.elapsed());
    let image = ImageTag {
        engine: e20.clone(),
        tag: format!("dockwarden-sidecar-test:{}", unique("image")),
    };
    let t1 = Instant::now();
    let build = run_with_timeout(
        Command::new(cli28().or(cli2010()).expect("a docker CLI"))
            .env("DOCKER_HOST", e20.host())
            .args(["build", "-q", "-t", &image.tag, "-f"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Dockerfile"))
            .arg(format!("--build-arg=BUILDER_IMAGE={}", inputs.builder))
            .arg(format!("--build-arg=RUNTIME_IMAGE={}", inputs.runtime))
            .arg(&inputs.context),
        None,
        Duration::from_secs(1800),
    );
    assert!(build.status.success(), "docker build: {}", stderr(&build));
    eprintln!("sidecar image build: {:.1?}", t1.elapsed());
    let size = ok(e20.daemon(&["image", "inspect", "-f", "{{.Size}}", &image.tag]));
    eprintln!("sidecar image size: {size} bytes");
    let rules = ok(e20.daemon(&["run", "--rm", &image.tag, "rules"]));
    assert!(rules.contains("container.privileged"), "{rules}");

    sidecar_serves_the_policy(&e20, &image.tag);
    on_engine("26.1", |e26| {
        // The same image, copied over (`docker save | docker load`), not built twice.
        let copy = ImageTag {
            engine: e26.clone(),
            tag: image.tag.clone(),
        };
        let saved = e20.daemon(&["save", &image.tag]);
        assert!(saved.status.success(), "docker save: {}", stderr(&saved));
        let load = run_with_timeout(
            Command::new(cli28().or(cli2010()).expect("a docker CLI"))
                .env("DOCKER_HOST", e26.host())
                .args(["load", "-q"]),
            Some(&saved.stdout),
            Duration::from_secs(120),
        );
        ok(load);
        sidecar_serves_the_policy(e26, &copy.tag);
    });
}
