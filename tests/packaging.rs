//! Packaging artefacts stay valid: the systemd unit passes `systemd-analyze verify`, and the
//! Dockerfile builds the binary the README documents.

use std::process::Command;

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

#[test]
fn dockerfile_builds_when_its_base_images_are_present() {
    let has = |img: &str| {
        Command::new("docker")
            .args(["image", "inspect", img])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    let (builder, runtime) = ("rust:1-bookworm", "debian:bookworm-slim");
    if !has(builder) || !has(runtime) {
        eprintln!(
            "skip: the Dockerfile's base images `{builder}` and `{runtime}` are not on this machine and no registry is reachable"
        );
        return;
    }
    let tag = format!("dockwarden-dockerfile-test:{}", std::process::id());
    let out = Command::new("docker")
        .args(["build", "-t", &tag, env!("CARGO_MANIFEST_DIR")])
        .output()
        .expect("docker build");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new("docker")
        .args(["run", "--rm", &tag, "rules"])
        .output()
        .expect("docker run");
    let _ = Command::new("docker").args(["rmi", "-f", &tag]).output();
    assert!(String::from_utf8_lossy(&run.stdout).contains("container.privileged"));
}
