//! Compose v1 (Debian's docker-compose 1.29), Compose v2 (`docker compose` 2.26) and the Python
//! SDK (docker-py) work unchanged through the proxy on a legitimate project, on both engines.

mod common;
use common::*;

use std::process::Command;
use std::time::Duration;

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).expect("copy");
        }
    }
}

fn compose(
    c: Compose,
    p: &Proxy,
    dir: &std::path::Path,
    project: &str,
    port: &str,
    args: &[&str],
) -> std::process::Output {
    let mut c = c.cmd(&p.docker_host());
    c.current_dir(dir)
        .env("WEB_PORT", port)
        .args(["-p", project])
        .args(args);
    run_with_timeout(&mut c, None, Duration::from_secs(180))
}

/// GET from a published port, in the daemon's network namespace (where it listens).
fn http_get(e: &Engine, port: &str) -> String {
    let mut c = e.in_netns("curl");
    c.args([
        "-sf",
        "--max-time",
        "5",
        &format!("http://127.0.0.1:{port}/index.html"),
    ]);
    stdout(&run_with_timeout(&mut c, None, Duration::from_secs(10)))
}

fn compose_project_comes_up_and_down_through_the_proxy(e: &Engine, c: Compose) {
    let p = Proxy::start_on(e, &[]);
    let dir = p.workspace.join("app");
    copy_dir(
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/compose/app")),
        &dir,
    );
    let project = unique("app").replace('-', "");
    // v1 and v2 run at once on the same engine: each its own port.
    let port =
        (18_000 + std::process::id() % 1000 + if c.name == "v1" { 0 } else { 1000 }).to_string();
    let up = compose(c, &p, &dir, &project, &port, &["up", "-d"]);
    let result = std::panic::catch_unwind(|| {
        ok(up);
        let ps = ok(compose(c, &p, &dir, &project, &port, &["ps"]));
        assert!(ps.contains("web") && ps.contains("worker"), "{ps}");
        let mut body = String::new();
        for _ in 0..50 {
            body = http_get(e, &port);
            if !body.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(
            body, "hello from the workspace",
            "published port answers on 127.0.0.1"
        );
        let logs = ok(compose(c, &p, &dir, &project, &port, &["logs", "worker"]));
        assert!(logs.contains("worker-up"), "{logs}");
        // The worker fetches once a second and may have started before web listened.
        let mut out = String::new();
        for _ in 0..50 {
            out = stdout(&compose(
                c,
                &p,
                &dir,
                &project,
                &port,
                &["exec", "-T", "worker", "cat", "/data/last"],
            ));
            if !out.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(
            out, "hello from the workspace",
            "worker fetched web over the custom network into the named volume"
        );
        let web = ok(e.daemon(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
            "--filter",
            "label=com.docker.compose.service=web",
        ]));
        let inspect = e.inspect(web.lines().next().expect("web container"));
        let binding = &inspect["HostConfig"]["PortBindings"]["8080/tcp"][0];
        assert_eq!(
            binding["HostIp"], "127.0.0.1",
            "the published port is bound to loopback: {binding}"
        );
        let ro_bind = inspect["Mounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .find(|m| m["Destination"] == "/www")
            .cloned()
            .expect("bind");
        assert_eq!(ro_bind["RW"], false);
    });
    let down = compose(c, &p, &dir, &project, &port, &["down", "-v"]);
    if let Err(e) = result {
        eprintln!("proxy log:\n{}", p.log());
        std::panic::resume_unwind(e);
    }
    ok(down);
    assert!(
        ok(e.daemon(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={project}")
        ]))
        .is_empty()
    );
    assert!(
        !e.daemon(&["volume", "inspect", &format!("{project}_data")])
            .status
            .success(),
        "down -v removed the volume"
    );
}

fn docker_py_runs_a_container_streams_logs_and_removes_it(e: &Engine) {
    let py = "/usr/bin/python3";
    let has_sdk = Command::new(py)
        .args(["-c", "import docker"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !has_sdk {
        eprintln!("skip: python3-docker is not installed (CI installs Debian's package)");
        return;
    }
    let p = Proxy::start_on(e, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/docker_py_smoke.py");
    let out = run_with_timeout(
        Command::new(py).args([script, &p.docker_host(), IMAGE]),
        None,
        Duration::from_secs(120),
    );
    assert_eq!(ok(out), "one|two");
}

per_engine_compose!(compose_project_comes_up_and_down_through_the_proxy);
per_engine!(docker_py_runs_a_container_streams_logs_and_removes_it);
