//! Raw HTTP at the proxy's socket, where framing matters: refusals are Docker-style JSON with
//! the right status, ambiguous framing never reaches the daemon, slow clients are cut off, and
//! one large stream does not block other clients.

mod common;
use common::*;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn unknown_endpoint_gets_403_with_a_json_message_naming_the_rule(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let (status, body) = status_and_json(&p.raw(b"GET /v1.41/nope HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_eq!(status, 403);
    let msg = body["message"].as_str().expect("message");
    assert!(msg.contains("route.unknown"), "{msg}");
    assert!(p.audit_log().contains("\"decision\":\"deny\""));
}

fn content_length_with_transfer_encoding_gets_400_and_never_reaches_the_daemon(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("smuggle");
    let body = format!("{{\"Image\":\"{IMAGE}\"}}");
    let req = format!(
        "POST /v1.41/containers/create?name={name} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len(),
        body.len()
    );
    let (status, _) = status_and_json(&p.raw(req.as_bytes()));
    assert_eq!(status, 400);
    assert!(
        !e.daemon(&["inspect", &name]).status.success(),
        "the container must not exist"
    );
}

fn repeated_content_length_gets_400(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let (status, body) = status_and_json(&p.raw(b"POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"));
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("ambiguous framing")
    );
}

fn oversized_json_body_gets_413(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let big = format!(
        "{{\"Image\":\"{IMAGE}\",\"Env\":[\"X={}\"]}}",
        "a".repeat(5 * 1024 * 1024)
    );
    let req = format!(
        "POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{big}",
        big.len()
    );
    let (status, body) = status_and_json(&p.raw(req.as_bytes()));
    assert_eq!(status, 413);
    assert!(body["message"].as_str().unwrap_or("").contains("limit"));
}

fn malformed_json_gets_400_and_duplicate_keys_are_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for body in [
        r#"{"Image": "#,
        r#"{"Image":"x","HostConfig":{"Privileged":false,"privileged":true}}"#,
    ] {
        let req = format!(
            "POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let (status, json) = status_and_json(&p.raw(req.as_bytes()));
        assert_eq!(status, 400, "{body}");
        assert!(
            json["message"]
                .as_str()
                .unwrap_or("")
                .contains("request.body.invalid")
        );
    }
}

fn encoded_slash_and_unclean_paths_are_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for path in [
        "/v1.41/containers%2Fcreate",
        "//v1.41/containers/json",
        "/v1.41/x/../containers/json",
    ] {
        let (status, json) = status_and_json(&p.raw(
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        ));
        assert_eq!(status, 403, "{path}");
        assert!(
            json["message"]
                .as_str()
                .unwrap_or("")
                .contains("route.noncanonical"),
            "{path}"
        );
    }
}

fn http2_preface_is_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let resp = p.raw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert!(
        !resp.contains("HTTP/2") && !resp.contains(" 200 "),
        "h2 must not be served: {resp:?}"
    );
}

fn form_encoded_bodies_are_refused_where_parameters_matter(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let body = "networkmode=host";
    let req = format!(
        "POST /v1.41/build HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, json) = status_and_json(&p.raw(req.as_bytes()));
    assert_eq!(status, 403);
    assert!(
        json["message"]
            .as_str()
            .unwrap_or("")
            .contains("request.form_body")
    );
}

fn slow_client_is_cut_off_after_the_header_timeout(e: &Engine) {
    let p = Proxy::start_on(e, &["--header-timeout", "1"]);
    let mut s = UnixStream::connect(&p.socket).expect("connect");
    s.write_all(b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\n")
        .expect("partial head");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let mut buf = Vec::new();
    // The proxy closes the connection (EOF) instead of waiting for the rest forever; a read
    // timeout here would be the failure.
    let res = s.read_to_end(&mut buf);
    assert!(
        res.is_ok(),
        "connection was not closed by the proxy: {res:?}"
    );
    // And the proxy still serves others afterwards.
    assert!(
        p.raw(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .contains("200 OK")
    );
}

fn other_clients_are_served_while_one_streams_a_large_cp(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("bigcp");
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
    let big = p.workspace.join("big.bin");
    let f = std::fs::File::create(&big).expect("create");
    f.set_len(256 * 1024 * 1024).expect("size");
    let cli = cli28().or(cli2010()).expect("cli");
    let mut cp = p
        .cmd(cli)
        .args([
            "cp",
            big.to_str().expect("utf8"),
            &format!("{name}:/tmp/big.bin"),
        ])
        .spawn()
        .expect("cp");
    let mut served = 0;
    let t0 = Instant::now();
    while cp.try_wait().expect("poll cp").is_none() && t0.elapsed() < Duration::from_secs(120) {
        assert!(
            p.raw(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
                .contains("200 OK")
        );
        ok(p.docker(&["ps", "-q", "--filter", &format!("name={name}")]));
        served += 1;
    }
    assert!(cp.wait().expect("cp").success());
    assert!(served >= 1, "no request was served while the copy ran");
    let size = ok(p.docker(&["exec", &name, "stat", "-c", "%s", "/tmp/big.bin"]));
    assert_eq!(size, (256 * 1024 * 1024).to_string());
    e.force_remove(&name);
}

#[test]
fn unreachable_daemon_gives_502_saying_so() {
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let ws = dir.path().canonicalize().expect("canon").join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    // The shared cgroup budget needs the daemon's `/info` at start-up (surface issue).
    let p =
        Proxy::start_with_upstream(dir, ws, "/nonexistent/docker.sock", &["--no-cgroup-budget"]);
    let (status, json) = status_and_json(&p.raw(b"GET /v1.41/info HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_eq!(status, 502);
    assert!(
        json["message"]
            .as_str()
            .unwrap_or("")
            .contains("cannot reach the docker daemon")
    );
}

fn sigterm_drains_and_removes_the_socket_and_a_live_socket_is_never_stolen(e: &Engine) {
    let mut p = Proxy::start_on(e, &[]);
    // A second proxy on the same live socket must refuse to start.
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_dockwarden"))
        .args(["proxy", "--listen"])
        .arg(&p.socket)
        .arg("--workspace")
        .arg(&p.workspace)
        .output()
        .expect("second proxy");
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("in use"));
    assert!(
        p.raw(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .contains("200 OK"),
        "first proxy still serves"
    );
    let pid = p.child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let status = p.child.wait().expect("wait");
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");
    assert!(!p.socket.exists(), "socket removed on shutdown");
}

fn a_stale_socket_file_is_replaced(e: &Engine) {
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canon");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    // A socket file nobody listens on, as left by a crash.
    drop(std::os::unix::net::UnixListener::bind(root.join("docker.sock")).expect("bind"));
    assert!(root.join("docker.sock").exists());
    // A child another test thread forked just now holds a copy of the listener until its exec
    // (CLOEXEC closes it only then): while it does, the socket is live and the proxy rightly
    // refuses to take it over. Start once it is stale for good.
    let t0 = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(root.join("docker.sock")).is_ok() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "the dropped listener stays live"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let p = Proxy::start_in_on(e, dir, ws, &[]);
    let resp = p.raw(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        resp.contains("200 OK"),
        "ping through the proxy that replaced the stale socket: {resp:?}\nproxy log:\n{}",
        p.log()
    );
}

fn api_versions_below_the_floor_are_refused_before_legacy_decode_paths(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    // API < 1.24 makes a start body replace the HostConfig; the proxy refuses the version.
    let body = r#"{"Privileged":true}"#;
    let req = format!(
        "POST /v1.23/containers/x/start HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, json) = status_and_json(&p.raw(req.as_bytes()));
    assert_eq!(status, 403);
    assert!(
        json["message"]
            .as_str()
            .unwrap_or("")
            .contains("api.version")
    );
    // `1.9` is numerically below 1.24 although it sorts above it as text.
    let (status, _) = status_and_json(&p.raw(b"GET /v1.9/info HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_eq!(status, 403);
}

fn dry_run_logs_would_deny_and_forwards(e: &Engine) {
    let p = Proxy::start_on(e, &["--dry-run"]);
    let name = unique("dry");
    // `create`, not `run`: this VM cannot start privileged containers at all.
    let out = p.docker(&["create", "--name", &name, "--privileged", IMAGE, "true"]);
    assert!(out.status.success(), "dry run forwards: {}", stderr(&out));
    assert_eq!(
        e.inspect(&name)["HostConfig"]["Privileged"],
        true,
        "the daemon got the request"
    );
    e.force_remove(&name);
    let audit = p.audit_log();
    let line = audit
        .lines()
        .find(|l| l.contains("ContainerCreate"))
        .expect("create audited");
    let rec: serde_json::Value = serde_json::from_str(line).expect("json line");
    assert_eq!(rec["decision"], "would-deny");
    assert_eq!(rec["rules"][0], "container.privileged");
    assert!(
        rec["peer"]["pid"].as_i64().unwrap_or(0) > 0,
        "peer credentials recorded"
    );
    assert!(p.log().contains("DRY RUN"), "dry run is loud in the log");
}

fn attach_websocket_upgrades_and_streams_output(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("ws");
    ok(p.docker(&[
        "run",
        "-d",
        "--name",
        &name,
        IMAGE,
        "sh",
        "-c",
        "while true; do echo ws-out; sleep 0.2; done",
    ]));
    let mut s = UnixStream::connect(&p.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let req = format!(
        "GET /v1.41/containers/{name}/attach/ws?stream=1&stdout=1 HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: http://localhost\r\n\r\n"
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        let n = s.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if text.contains("ws-out") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 101"), "{text:?}");
    assert!(
        text.to_ascii_lowercase().contains("upgrade: websocket"),
        "{text:?}"
    );
    assert!(text.contains("ws-out"), "no output frame arrived: {text:?}");
    e.force_remove(&name);
}

fn hijack_without_upgrade_is_refused_but_detached_exec_works(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("noupg");
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
    let (status, json) = status_and_json(&p.raw(format!("POST /v1.41/containers/{name}/attach?stream=1&stdout=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes()));
    assert_eq!(status, 400);
    assert!(json["message"].as_str().unwrap_or("").contains("Upgrade"));
    // A detached exec start never hijacks, so it needs no Upgrade header.
    let create = r#"{"Cmd":["touch","/tmp/detached-ran"]}"#;
    let resp = p.raw(format!("POST /v1.41/containers/{name}/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{create}", create.len()).as_bytes());
    let (status, json) = status_and_json(&resp);
    assert_eq!(status, 201, "{resp}");
    let id = json["Id"].as_str().expect("exec id").to_owned();
    let start = r#"{"Detach":true}"#;
    let resp = p.raw(format!("POST /v1.41/exec/{id}/start HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{start}", start.len()).as_bytes());
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    std::thread::sleep(Duration::from_millis(500));
    ok(p.docker(&["exec", &name, "test", "-f", "/tmp/detached-ran"]));
    e.force_remove(&name);
}

fn buildkit_grpc_endpoint_switches_to_h2c_through_the_proxy(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let mut s = UnixStream::connect(&p.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(b"POST /grpc HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 0\r\n\r\n").expect("write");
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).expect("read");
    let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: h2c"), "{head}");
}

#[test]
fn prints_the_docker_host_line_on_start() {
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canon");
    std::fs::create_dir_all(root.join("ws")).expect("ws");
    let sock = root.join("d.sock");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dockwarden"))
        .args(["proxy", "--no-cgroup-budget", "--pin-dir"])
        .arg(root.join("pins"))
        .arg("--listen")
        .arg(&sock)
        .arg("--workspace")
        .arg(root.join("ws"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("line");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        line.trim(),
        format!("export DOCKER_HOST=unix://{}", sock.display())
    );
}

fn connection_bound_holds_extra_clients_until_a_slot_frees(e: &Engine) {
    let p = Proxy::start_on(e, &["--max-connections", "1"]);
    let first = UnixStream::connect(&p.socket).expect("first");
    // The second client is accepted by the kernel but not served while the first holds the slot.
    let mut second = UnixStream::connect(&p.socket).expect("second");
    second
        .set_read_timeout(Some(Duration::from_millis(700)))
        .expect("timeout");
    second
        .write_all(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut buf = [0u8; 256];
    assert!(
        second.read(&mut buf).is_err(),
        "served beyond the connection bound"
    );
    drop(first);
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let n = second.read(&mut buf).expect("served once the slot is free");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("200 OK"));
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn closed_event_streams_release_their_sockets(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let pid = p.child.id();
    assert!(
        p.raw(b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n")
            .contains("200 OK")
    );
    let before = open_fds(pid);
    let mut streams = Vec::new();
    for _ in 0..50 {
        let mut s = UnixStream::connect(&p.socket).expect("connect");
        s.write_all(b"GET /v1.41/events HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("write");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).expect("response head");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        streams.push(s);
    }
    assert!(open_fds(pid) >= before + 50, "streams are open");
    drop(streams);
    // No event happens meanwhile: the proxy must notice the clients left on its own.
    let t0 = Instant::now();
    while open_fds(pid) > before + 5 && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        open_fds(pid) <= before + 5,
        "sockets of closed event streams are still open: {} vs {before}",
        open_fds(pid)
    );
}

per_engine!(
    unknown_endpoint_gets_403_with_a_json_message_naming_the_rule,
    content_length_with_transfer_encoding_gets_400_and_never_reaches_the_daemon,
    repeated_content_length_gets_400,
    oversized_json_body_gets_413,
    malformed_json_gets_400_and_duplicate_keys_are_refused,
    encoded_slash_and_unclean_paths_are_refused,
    http2_preface_is_refused,
    form_encoded_bodies_are_refused_where_parameters_matter,
    slow_client_is_cut_off_after_the_header_timeout,
    other_clients_are_served_while_one_streams_a_large_cp,
    sigterm_drains_and_removes_the_socket_and_a_live_socket_is_never_stolen,
    a_stale_socket_file_is_replaced,
    api_versions_below_the_floor_are_refused_before_legacy_decode_paths,
    dry_run_logs_would_deny_and_forwards,
    attach_websocket_upgrades_and_streams_output,
    hijack_without_upgrade_is_refused_but_detached_exec_works,
    buildkit_grpc_endpoint_switches_to_h2c_through_the_proxy,
    connection_bound_holds_extra_clients_until_a_slot_frees,
    closed_event_streams_release_their_sockets,
);
