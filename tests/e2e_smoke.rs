//! The smallest end-to-end check: the real CLI through the real proxy to the real dockerd.

mod common;
use common::*;

#[test]
fn cli_runs_a_container_through_the_proxy() {
    let p = Proxy::start(&[]);
    let out = ok(p.docker(&["run", "--rm", IMAGE, "echo", "hello"]));
    assert_eq!(out, "hello");
    assert!(p.audit_log().contains("\"endpoint\":\"ContainerCreate\""));
}

#[test]
fn private_daemon_starts_and_restarts() {
    let mut d = PrivateDaemon::start("smoke");
    assert_eq!(ok(d.cli(&["run", "--rm", IMAGE, "echo", "x"])), "x");
    d.restart();
    assert_eq!(ok(d.cli(&["run", "--rm", IMAGE, "echo", "y"])), "y");
}
