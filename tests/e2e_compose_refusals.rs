//! Compose v1 (Debian's python `docker-compose` 1.29) and v2 (`docker compose` 2.26) through the
//! proxy, on both engines: each forbidden project is refused, compose's output names the rule,
//! and nothing of the project's containers exists.

mod common;
use common::*;

use std::path::Path;
use std::time::Duration;

fn compose(
    c: Compose,
    p: &Proxy,
    dir: &Path,
    project: &str,
    args: &[&str],
) -> std::process::Output {
    let mut c = c.cmd(&p.docker_host());
    c.current_dir(dir).args(["-p", project]).args(args);
    run_with_timeout(&mut c, None, Duration::from_secs(120))
}

fn forbidden_compose_projects_are_refused_naming_the_rule(e: &Engine, c: Compose) {
    let p = Proxy::start_on(e, &[]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/compose");
    let cases = [
        ("privileged", "container.privileged"),
        ("network-host", "container.namespace.host"),
        ("bind-etc", "container.bind.outside"),
        ("cap-add", "container.capabilities"),
    ];
    for (dir, rule) in cases {
        let project = unique(dir).replace('-', "");
        let out = compose(
            c,
            &p,
            &root.join(dir),
            &project,
            &["up", "-d", "--no-build"],
        );
        let text = format!("{}{}", stdout(&out), stderr(&out));
        let down = compose(
            c,
            &p,
            &root.join(dir),
            &project,
            &["down", "-v", "--remove-orphans"],
        );
        assert!(
            !out.status.success(),
            "{dir}: compose up succeeded:\n{text}"
        );
        assert!(
            text.contains(&format!("(rule {rule})")),
            "{dir}: compose output does not name {rule}:\n{text}"
        );
        let left = stdout(&e.daemon(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
        ]));
        assert!(left.is_empty(), "{dir}: containers left: {left}");
        assert!(
            down.status.success(),
            "{dir}: compose down failed: {}",
            stderr(&down)
        );
    }
}

per_engine_compose!(forbidden_compose_projects_are_refused_naming_the_rule);
