//! Builds through the proxy: the classic builder and BuildKit (`/session`) work; host
//! networking, cgroup parents and daemon-side remote contexts are refused, including when the
//! parameters try to arrive in a form body. Each test runs on both engines (`per_engine!`).

mod common;
use common::*;

use std::time::Duration;

fn context(p: &Proxy) -> std::path::PathBuf {
    let ctx = p.workspace.join("ctx");
    std::fs::create_dir_all(&ctx).expect("ctx");
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {IMAGE}\nRUN grep memory /proc/self/cgroup; echo built > /built\n"),
    )
    .expect("Dockerfile");
    ctx
}

fn build(p: &Proxy, cli: &str, buildkit: bool, args: &[&str]) -> std::process::Output {
    let mut c = p.cmd(cli);
    c.env("DOCKER_BUILDKIT", if buildkit { "1" } else { "0" })
        .arg("build")
        .args(args);
    run_with_timeout(&mut c, None, Duration::from_secs(300))
}

fn rejects_build_with_host_network(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let ctx = context(&p);
    let ctx = ctx.to_str().expect("utf-8");
    let mut tried = 0;
    for cli in clis() {
        let o = build(
            &p,
            cli,
            false,
            &["--network", "host", "-t", &unique("bnet"), ctx],
        );
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("rule build.network"),
            "{cli}: {}",
            stderr(&o)
        );
        tried += 1;
    }
    assert!(tried > 0, "no docker CLI");
    // BuildKit's `/build?version=2`, through the 20.10 CLI: the refusal also ends the `/session`
    // tunnel, or that CLI hangs when the refusal beats the session's dial (several tries, in
    // parallel, to meet that ordering).
    if let Some(cli) = cli2010() {
        let runs: Vec<_> = (0..6)
            .map(|_| {
                let mut c = p.cmd(cli);
                c.env("DOCKER_BUILDKIT", "1").args([
                    "build",
                    "--network",
                    "host",
                    "-t",
                    &unique("bnetbk"),
                    ctx,
                ]);
                std::thread::spawn(move || run_with_timeout(&mut c, None, Duration::from_secs(120)))
            })
            .collect();
        for r in runs {
            let o = r.join().expect("thread");
            assert!(
                stderr(&o).contains("rule build.network"),
                "buildkit: {}",
                stderr(&o)
            );
        }
    }
    let r = p.raw(b"POST /v1.41/build?version=2&remote=client-session&session=s1&networkmode=host HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert!(
        r.starts_with("HTTP/1.1 403") && r.contains("build.network"),
        "{r}"
    );
}

fn legacy_and_buildkit_builds_work_through_the_proxy(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let ctx = context(&p);
    let ctx = ctx.to_str().expect("utf-8");
    let legacy = unique("blegacy");
    let bk = unique("bbuildkit");
    let cli = cli28().or(cli2010()).expect("a docker CLI");
    let out = ok(build(&p, cli, false, &["-t", &legacy, ctx]));
    // The classic builder's RUN container runs under the budget's parent cgroup.
    assert!(out.contains(":memory:/dockwarden/"), "{out}");
    assert_eq!(
        ok(p.docker(&["run", "--rm", &legacy, "cat", "/built"])),
        "built"
    );
    if let Some(cli) = cli2010() {
        ok(build(&p, cli, true, &["-t", &bk, ctx]));
        assert_eq!(
            ok(p.docker(&["run", "--rm", &bk, "cat", "/built"])),
            "built"
        );
        assert!(
            p.audit_log()
                .contains(r#""endpoint":"Session","decision":"allow""#)
        );
    }
    assert!(
        p.audit_log()
            .contains("build cgroupparent set to `/dockwarden`"),
        "{}",
        p.audit_log()
    );
    for img in [&legacy, &bk] {
        let _ = e.daemon(&["rmi", img]);
    }
}

/// The raw shape of the 20.10 CLI's BuildKit build: a `/session` hijack, then the build naming it.
fn refused_buildkit_build_ends_its_session_tunnel(e: &Engine) {
    use std::io::{Read, Write};
    let p = Proxy::start_on(e, &[]);
    let id = unique("sess");
    let mut s = std::os::unix::net::UnixStream::connect(&p.socket).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let req = format!(
        "POST /v1.41/session HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nX-Docker-Expose-Session-Uuid: {id}\r\nX-Docker-Expose-Session-Name: t\r\nX-Docker-Expose-Session-Sharedkey: k\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).expect("read head"), 1, "closed before 101");
        head.push(b[0]);
    }
    assert!(
        String::from_utf8_lossy(&head).starts_with("HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    let r = p.raw(format!("POST /v1.41/build?version=2&remote=client-session&session={id}&networkmode=host HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes());
    assert!(r.contains("build.network"), "{r}");
    // The tunnel ends: reads reach EOF (after whatever the daemon already sent) instead of blocking.
    let mut rest = [0u8; 4096];
    loop {
        match s.read(&mut rest) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) => panic!("the session tunnel stayed open after its build was refused: {e}"),
        }
    }
    // The proxy ended it (the daemon would too, after its own handshake timeout).
    poll_until(Duration::from_secs(10), || {
        p.log().contains("session ended: its build was refused")
    });
    assert!(
        p.log().contains("session ended: its build was refused"),
        "{}",
        p.log()
    );
}

fn rejects_daemon_side_remote_context_and_cgroup_parent(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for (query, rule) in [
        ("remote=http://169.254.169.254/latest", "build.remote"),
        ("remote=https://github.com/moby/moby.git", "build.remote"),
        ("cgroupparent=/", "build.cgroup_parent"),
        ("networkmode=container:abc", "build.network"),
        ("networkmode=default&networkmode=host", "build.network"),
        ("isolation=hyperv", "build.option"),
    ] {
        let r = p.raw(
            format!("POST /v1.41/build?{query} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status(&r), 403, "{query}: {r}");
        assert!(r.contains(rule), "{query}: {r}");
    }
}

fn rejects_build_parameters_smuggled_in_a_form_body(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let body = "networkmode=host";
    let r = p.raw(
        format!("POST /v1.41/build HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .as_bytes(),
    );
    assert_eq!(status(&r), 403, "{r}");
    assert!(r.contains("request.form_body"), "{r}");
    let body =
        "--b\r\nContent-Disposition: form-data; name=\"networkmode\"\r\n\r\nhost\r\n--b--\r\n";
    let r = p.raw(
        format!("POST /v1.41/build HTTP/1.1\r\nHost: x\r\nContent-Type: Multipart/Form-Data; boundary=b\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .as_bytes(),
    );
    assert_eq!(status(&r), 403, "{r}");
    assert!(r.contains("request.form_body"), "{r}");
}

/// A policy file: the default policy with `profile` set.
fn policy_file(dir: &std::path::Path, profile: &str) -> String {
    let text = dockwarden::policy::config::DEFAULT_POLICY
        .replace("profile = \"default\"", &format!("profile = \"{profile}\""));
    let path = dir.join(format!("{profile}.toml"));
    std::fs::write(&path, text).expect("policy file");
    path.to_str().expect("utf-8").to_owned()
}

/// `docker build --network <user bridge>` (the classic builder) on a private daemon of the
/// engine's version: allowed under `profile = "private-daemon"` for a bridge made through the
/// proxy (the step resolves names through that network's embedded DNS, 127.0.0.11), refused as
/// `build.network` under the default profile; `--network host` stays refused under both.
fn build_on_a_user_bridge_works_only_under_the_private_daemon_profile(e: &Engine) {
    let d = PrivateDaemon::start_on(e, "bnet");
    let files = tempfile::Builder::new()
        .prefix("dwtbpol")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let start = |profile: &str| {
        let dir = tempfile::Builder::new()
            .prefix("dwtest")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let ws = dir.path().canonicalize().expect("canonical").join("ws");
        std::fs::create_dir_all(&ws).expect("ws");
        let policy = policy_file(files.path(), profile);
        Proxy::start_with_upstream(
            dir,
            ws,
            &d.socket.display().to_string(),
            &["--no-cgroup-budget", "--policy", &policy],
        )
    };
    let private = start("private-daemon");
    let strict = start("default");
    let net = unique("bnet");
    ok(private.docker(&["network", "create", &net]));
    let cli = cli28().or(cli2010()).expect("a docker CLI");
    for p in [&private, &strict] {
        let ctx = p.workspace.join("netctx");
        std::fs::create_dir_all(&ctx).expect("ctx");
        std::fs::write(
            ctx.join("Dockerfile"),
            format!(
                "FROM {IMAGE}\nRUN grep nameserver /etc/resolv.conf; echo NETBUILD-$((40+2))\n"
            ),
        )
        .expect("Dockerfile");
    }
    let ctx = |p: &Proxy| p.workspace.join("netctx").display().to_string();
    let o = build(
        &private,
        cli,
        false,
        &[
            "--no-cache",
            "--network",
            &net,
            "-t",
            &unique("bnetimg"),
            &ctx(&private),
        ],
    );
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        o.status.success() && out.contains("NETBUILD-42"),
        "engine {}: private-daemon, --network {net}: {out}",
        e.name
    );
    assert!(
        out.contains("nameserver 127.0.0.11"),
        "engine {}: the step ran on the user network: {out}",
        e.name
    );
    let o = build(
        &strict,
        cli,
        false,
        &["--no-cache", "--network", &net, &ctx(&strict)],
    );
    assert!(
        !o.status.success() && stderr(&o).contains("rule build.network"),
        "engine {}: default profile: {}",
        e.name,
        stderr(&o)
    );
    for p in [&private, &strict] {
        let o = build(p, cli, false, &["--no-cache", "--network", "host", &ctx(p)]);
        assert!(
            !o.status.success() && stderr(&o).contains("rule build.network"),
            "engine {}: --network host: {}",
            e.name,
            stderr(&o)
        );
    }
    let _ = d.cli(&["network", "rm", &net]);
}

per_engine!(
    rejects_build_with_host_network,
    legacy_and_buildkit_builds_work_through_the_proxy,
    refused_buildkit_build_ends_its_session_tunnel,
    rejects_daemon_side_remote_context_and_cgroup_parent,
    rejects_build_parameters_smuggled_in_a_form_body,
    build_on_a_user_bridge_works_only_under_the_private_daemon_profile,
);
