//! Client transparency (issue 12, items 5, 7 and 9), with docker-py's own calls
//! (`tests/py/transparency.py`): what a real SDK sees through the proxy is what it sees direct.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{IMAGE, PrivateDaemon, Proxy, daemon, ok, stderr, stdout, unique};
use serde_json::Value;

const PY: &str = "/usr/bin/python3";
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/transparency.py");

fn have_docker_py() -> bool {
    let ok = Command::new(PY)
        .args(["-c", "import docker"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: python3-docker is not installed (CI installs Debian's package)");
    }
    ok
}

fn py(host: &str, args: &[&str]) -> Value {
    let o = Command::new(PY)
        .arg(SCRIPT)
        .arg(host)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "transparency.py {args:?}: {}",
        stderr(&o)
    );
    serde_json::from_str(stdout(&o).trim()).expect("json from transparency.py")
}

fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("dwtr")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let ws = dir.path().canonicalize().expect("canonical").join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    (dir, ws)
}

fn proxy(upstream: &str, extra: &[&str]) -> Proxy {
    let (dir, ws) = tempdir();
    let mut args = vec!["--no-cgroup-budget"];
    args.extend_from_slice(extra);
    Proxy::start_with_upstream(dir, ws, upstream, &args)
}

/// Status line and `message` of a raw response.
fn status_and_message(resp: &str) -> (String, String) {
    let status = resp
        .lines()
        .next()
        .unwrap_or("")
        .split(' ')
        .nth(1)
        .unwrap_or("")
        .to_owned();
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
    let json = body
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or("{}");
    let msg = serde_json::from_str::<Value>(json)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, msg)
}

#[test]
fn leave_swarm_force_returns_as_it_does_direct_on_both_engines() {
    if !have_docker_py() {
        return;
    }
    for e in common::engines_or_skip() {
        let (name, sock) = (e.name, e.socket.to_str().expect("a UTF-8 socket path"));
        let p = proxy(sock, &[]);
        let direct = py(&format!("unix://{sock}"), &["leave"]);
        let through = py(&p.docker_host(), &["leave"]);
        assert_eq!(direct, serde_json::json!({"ok": true}), "{name} direct");
        assert_eq!(
            through, direct,
            "{name}: leave_swarm(force=True) through the proxy"
        );
        // The raw answers of leave and of read-only inspects are the daemon's own 503s.
        for req in [
            "POST /v1.41/swarm/leave?force=1",
            "GET /v1.41/swarm",
            "GET /v1.41/nodes",
            "GET /v1.41/secrets",
        ] {
            let bytes = format!(
                "{req} HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let d = status_and_message(&common::raw(Path::new(sock), bytes.as_bytes()));
            let t = status_and_message(&p.raw(bytes.as_bytes()));
            assert_eq!(d.0, "503", "{name} {req} direct: {d:?}");
            assert_eq!(t, d, "{name} {req} through the proxy");
        }
        let bytes = b"POST /v1.41/swarm/init HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
        let t = status_and_message(&p.raw(bytes));
        assert_eq!(t.0, "403", "{name}: swarm init stays refused: {t:?}");
        assert!(t.1.contains("system.swarm"), "{name}: {t:?}");
    }
}

/// Whether `ip -4 route` of the current (host) namespace has a route for `subnet`.
fn host_route_for(subnet: &str) -> bool {
    let o = Command::new("ip")
        .args(["-4", "route"])
        .output()
        .expect("ip route");
    stdout(&o).lines().any(|l| l.starts_with(subnet))
}

#[test]
fn network_created_without_subnet_is_joinable_when_the_daemon_is_in_another_netns() {
    if !have_docker_py() {
        return;
    }
    let Some(e26) = common::engine("26.1").filter(|e| e.netns.is_some()) else {
        assert!(
            !common::engine_required("26.1"),
            "Engine 26.1 is required (DW_ENGINES_REQUIRED) but is not running in its own network namespace"
        );
        eprintln!("skipped: Engine 26.1 in its own network namespace is not running");
        return;
    };
    let p = proxy(e26.socket.to_str().expect("a UTF-8 socket path"), &[]);
    let host = p.docker_host();
    let net = unique("netns");
    let created = py(&host, &["network-create", &net]);
    assert!(
        created.get("ok").is_some(),
        "network create through the proxy: {created}"
    );
    let subnet = created["subnet"].as_str().expect("subnet").to_owned();
    // Make the proxy's own namespace hold a route over that subnet, as the host's engine does
    // when its pools overlap: the daemon's namespace (the one that counts) does not.
    let shadow = unique("shadow");
    let shadowed = !host_route_for(&subnet);
    if shadowed {
        ok(daemon(&["network", "create", "--subnet", &subnet, &shadow]));
    }
    assert!(
        host_route_for(&subnet),
        "the proxy's namespace has a route over {subnet}"
    );
    let joined = py(&host, &["join", &net, IMAGE]);
    if shadowed {
        let _ = daemon(&["network", "rm", &shadow]);
    }
    let removed = py(&host, &["network-rm", &net]);
    assert_eq!(
        joined,
        serde_json::json!({"ok": 0}),
        "joining {net} ({subnet}) through the proxy"
    );
    assert!(removed.get("ok").is_some(), "{removed}");
}

fn policy_file(dir: &Path, profile: &str) -> String {
    let text = dockwarden::policy::config::DEFAULT_POLICY
        .replace("profile = \"default\"", &format!("profile = \"{profile}\""));
    let path = dir.join(format!("{profile}.toml"));
    std::fs::write(&path, text).expect("policy file");
    path.to_str().expect("utf8").to_owned()
}

/// On a private daemon of each engine's version (prune on the shared ones would delete other
/// tests' objects).
fn prune_containers_and_images_work_only_under_the_private_daemon_profile(e: &common::Engine) {
    if !have_docker_py() {
        return;
    }
    let d = PrivateDaemon::start_on(e, "prune");
    let sock = d.socket.to_str().expect("utf8").to_owned();
    let cid = ok(d.cli(&["create", IMAGE, "true"]));
    let img = ok(d.cli(&["commit", &cid]))
        .trim_start_matches("sha256:")
        .to_owned();
    let files = tempfile::Builder::new()
        .prefix("dwtrpol")
        .tempdir_in("/tmp")
        .expect("tempdir");

    let strict = proxy(&sock, &["--policy", &policy_file(files.path(), "default")]);
    let out = py(&strict.docker_host(), &["prune"]);
    for what in ["containers", "images"] {
        assert_eq!(
            out[what]["status"], 403,
            "default profile, prune {what}: {out}"
        );
        assert!(
            out[what]["message"]
                .as_str()
                .unwrap_or("")
                .contains("rule system.prune"),
            "{out}"
        );
    }
    assert!(
        stdout(&d.cli(&["ps", "-aq", "--no-trunc"])).contains(&cid),
        "nothing was pruned"
    );

    let private = proxy(
        &sock,
        &["--policy", &policy_file(files.path(), "private-daemon")],
    );
    let out = py(&private.docker_host(), &["prune"]);
    let deleted = out["containers"]["ok"]["ContainersDeleted"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        deleted.iter().any(|c| c == cid.as_str()),
        "private-daemon profile, prune containers: {out}"
    );
    let images = out["images"]["ok"]["ImagesDeleted"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        images
            .iter()
            .any(|i| i["Deleted"].as_str().is_some_and(|x| x.contains(&img))),
        "prune images: {out}"
    );
    assert!(!stdout(&d.cli(&["ps", "-aq", "--no-trunc"])).contains(&cid));
    eprintln!(
        "engine {}: pruned {} container(s) and {} image record(s) under the private-daemon profile",
        e.name,
        deleted.len(),
        images.len()
    );
}

common::per_engine!(prune_containers_and_images_work_only_under_the_private_daemon_profile);

#[test]
fn compose_style_namespaced_sysctls_run_and_host_namespace_ones_are_refused() {
    for e in common::engines_or_skip() {
        let (name, sock) = (e.name, e.socket.to_str().expect("a UTF-8 socket path"));
        let p = proxy(sock, &[]);
        let o = p.docker(&[
            "run",
            "--rm",
            "--sysctl",
            "net.ipv6.conf.all.disable_ipv6=1",
            "--sysctl",
            "kernel.shmmni=8192",
            IMAGE,
            "sh",
            "-c",
            "cat /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/kernel/shmmni",
        ]);
        assert_eq!(
            ok(o).split_whitespace().collect::<Vec<_>>(),
            ["1", "8192"],
            "{name}"
        );
        let o = p.docker(&[
            "run",
            "--rm",
            "--network",
            "host",
            "--sysctl",
            "net.ipv4.ip_forward=1",
            IMAGE,
            "true",
        ]);
        assert!(
            !o.status.success() && stderr(&o).contains("rule container.sysctl"),
            "{name}: {}",
            stderr(&o)
        );
        let o = p.docker(&[
            "run",
            "--rm",
            "--ipc",
            "host",
            "--sysctl",
            "kernel.shmmax=1",
            IMAGE,
            "true",
        ]);
        assert!(
            !o.status.success() && stderr(&o).contains("rule container.sysctl"),
            "{name}: {}",
            stderr(&o)
        );
    }
}
