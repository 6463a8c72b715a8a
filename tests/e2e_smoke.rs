//! The smallest end-to-end check: the real CLI through the real proxy to the real dockerd, on
//! each engine (and a private daemon of each engine's version).

mod common;
use common::*;

fn cli_runs_a_container_through_the_proxy(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let version = ok(p.docker(&["version", "--format", "{{.Server.Version}}"]));
    assert!(
        version.starts_with(&format!("{}.", e.name)),
        "Engine {} answers as {version}",
        e.name
    );
    let out = ok(p.docker(&["run", "--rm", IMAGE, "echo", "hello"]));
    assert_eq!(out, "hello");
    assert!(p.audit_log().contains("\"endpoint\":\"ContainerCreate\""));
}

fn private_daemon_starts_and_restarts(e: &Engine) {
    let mut d = PrivateDaemon::start_on(e, "smoke");
    let version = ok(d.cli(&["version", "--format", "{{.Server.Version}}"]));
    assert!(
        version.starts_with(&format!("{}.", e.name)),
        "private Engine {} answers as {version}",
        e.name
    );
    assert_eq!(ok(d.cli(&["run", "--rm", IMAGE, "echo", "x"])), "x");
    d.restart();
    assert_eq!(ok(d.cli(&["run", "--rm", IMAGE, "echo", "y"])), "y");
}

per_engine!(
    cli_runs_a_container_through_the_proxy,
    private_daemon_starts_and_restarts,
);
