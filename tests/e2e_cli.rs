//! The Docker CLI (28 and Debian's 20.10) works unchanged through the proxy for everything the
//! policy allows: run, run -i (half-close), logs -f, exec (-i, -t), attach, cp, events, stats,
//! build (legacy and BuildKit), images, volumes and networks.

mod common;
use common::*;

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

fn version_info_ps_with_both_clis(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for cli in clis() {
        let v = ok(run_with_timeout(
            p.cmd(cli)
                .args(["version", "--format", "{{.Server.APIVersion}}"]),
            None,
            Duration::from_secs(30),
        ));
        assert!(v.starts_with("1."), "{cli}: server API version `{v}`");
        ok(run_with_timeout(
            p.cmd(cli).args(["info"]),
            None,
            Duration::from_secs(30),
        ));
        ok(run_with_timeout(
            p.cmd(cli).args(["ps", "-a"]),
            None,
            Duration::from_secs(30),
        ));
    }
}

fn run_rm_and_piped_stdin_half_close_with_both_clis(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for cli in clis() {
        let out = run_with_timeout(
            p.cmd(cli).args(["run", "--rm", IMAGE, "echo", "plain"]),
            None,
            Duration::from_secs(60),
        );
        assert_eq!(ok(out), "plain", "{cli}");
        // `cat` only exits when stdin's EOF is relayed as a half-close, and its output must
        // still arrive after that.
        let out = run_with_timeout(
            p.cmd(cli).args(["run", "-i", "--rm", IMAGE, "cat"]),
            Some(b"hi\n"),
            Duration::from_secs(60),
        );
        assert_eq!(ok(out), "hi", "{cli}");
    }
}

fn run_detached_then_logs_follow_and_stop(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("logs");
    let script = "for i in 1 2 3; do echo line$i; sleep 0.2; done; sleep 300";
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sh", "-c", script]));
    // `logs -f` streams until the container stops: stop it from another connection.
    let mut follow = p
        .cmd(cli28().or(cli2010()).expect("cli"))
        .args(["logs", "-f", &name])
        .stdout(Stdio::piped())
        .spawn()
        .expect("logs -f");
    std::thread::sleep(Duration::from_millis(1200));
    assert!(ok(p.docker(&["logs", &name])).contains("line3"));
    ok(p.docker(&["stop", "-t", "1", &name]));
    let mut text = String::new();
    follow
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut text)
        .expect("read logs -f");
    assert!(follow.wait().expect("wait").success());
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec!["line1", "line2", "line3"]
    );
    e.force_remove(&name);
}

fn exec_plain_interactive_and_tty(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("exec");
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
    assert_eq!(
        ok(p.docker(&["exec", &name, "echo", "from-exec"])),
        "from-exec"
    );
    for cli in clis() {
        let out = run_with_timeout(
            p.cmd(cli)
                .args(["exec", "-i", &name, "sh", "-c", "tr a-z A-Z"]),
            Some(b"shout\n"),
            Duration::from_secs(60),
        );
        assert_eq!(ok(out), "SHOUT", "{cli}");
    }
    // A tty needs a terminal on the client side: `script` gives the CLI one.
    let cli = cli28().or(cli2010()).expect("cli");
    let cmdline = format!("{cli} exec -t {name} sh -c 'test -t 1 && echo has-tty'");
    let mut c = std::process::Command::new("script");
    c.args(["-qec", &cmdline, "/dev/null"])
        .env("DOCKER_HOST", p.docker_host());
    let out = stdout(&run_with_timeout(&mut c, None, Duration::from_secs(60)));
    assert!(out.contains("has-tty"), "tty exec output: {out:?}");
    let code = run_with_timeout(
        p.cmd(cli).args(["exec", &name, "sh", "-c", "exit 7"]),
        None,
        Duration::from_secs(30),
    );
    assert_eq!(
        code.status.code(),
        Some(7),
        "exec exit codes come back through the proxy"
    );
    e.force_remove(&name);
}

fn attach_receives_output_and_sends_stdin(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("attach");
    ok(p.docker(&[
        "run",
        "-d",
        "-i",
        "--name",
        &name,
        IMAGE,
        "sh",
        "-c",
        "read x; echo got-$x",
    ]));
    for cli in clis() {
        let mut c = p
            .cmd(cli)
            .args(["attach", &name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("attach");
        // Give the attach time to hook up before the input arrives (the CLI races otherwise,
        // with or without a proxy).
        std::thread::sleep(Duration::from_millis(800));
        let mut sin = c.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut sin, b"ping\n").expect("write stdin");
        // dockerd closes a non-StdinOnce attach's output as soon as stdin ends, so keep stdin
        // open until the answer has been written (this is the daemon's behaviour, proxy or not).
        std::thread::sleep(Duration::from_millis(1500));
        drop(sin);
        let out = c.wait_with_output().expect("attach output");
        assert_eq!(ok(out), "got-ping", "{cli}");
        ok(p.docker(&["rm", "-f", &name]));
        ok(p.docker(&[
            "run",
            "-d",
            "-i",
            "--name",
            &name,
            IMAGE,
            "sh",
            "-c",
            "read x; echo got-$x",
        ]));
    }
    e.force_remove(&name);
}

fn cp_multi_mib_file_both_directions_byte_for_byte(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("cp");
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
    let data: Vec<u8> = (0..(6 * 1024 * 1024u32))
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let src = p.workspace.join("blob.bin");
    std::fs::write(&src, &data).expect("write blob");
    ok(p.docker(&[
        "cp",
        src.to_str().expect("utf8"),
        &format!("{name}:/tmp/blob.bin"),
    ]));
    let back = p.workspace.join("back.bin");
    ok(p.docker(&[
        "cp",
        &format!("{name}:/tmp/blob.bin"),
        back.to_str().expect("utf8"),
    ]));
    assert!(
        std::fs::read(&back).expect("read back") == data,
        "copied file differs"
    );
    e.force_remove(&name);
}

fn events_stream_shows_a_container_starting(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("events");
    let cli = cli28().or(cli2010()).expect("cli");
    let mut ev = p
        .cmd(cli)
        .args([
            "events",
            "--filter",
            &format!("container={name}"),
            "--format",
            "{{.Status}}",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("events");
    std::thread::sleep(Duration::from_millis(500));
    ok(p.docker(&["run", "--rm", "--name", &name, IMAGE, "true"]));
    std::thread::sleep(Duration::from_millis(500));
    let _ = ev.kill();
    let mut text = String::new();
    ev.stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut text)
        .expect("read events");
    let _ = ev.wait();
    for status in ["create", "start", "die"] {
        assert!(
            text.lines().any(|l| l == status),
            "no `{status}` event in {text:?}"
        );
    }
}

fn stats_no_stream_images_and_rm(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("stats");
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
    let out = ok(p.docker(&["stats", "--no-stream", "--format", "{{.Name}}", &name]));
    assert_eq!(out, name);
    assert!(
        ok(p.docker(&["images", "--format", "{{.Repository}}:{{.Tag}}"]))
            .lines()
            .any(|l| l == IMAGE)
    );
    ok(p.docker(&["rm", "-f", &name]));
    assert!(ok(p.docker(&["ps", "-aq", "--filter", &format!("name={name}")])).is_empty());
}

fn build_legacy_and_buildkit(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let ctx = p.workspace.join("ctx");
    std::fs::create_dir_all(&ctx).expect("ctx");
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {IMAGE}\nCOPY hello.txt /hello.txt\nCMD [\"cat\", \"/hello.txt\"]\n"),
    )
    .expect("dockerfile");
    std::fs::write(ctx.join("hello.txt"), "built-through-proxy\n").expect("file");
    let Some(cli) = cli2010() else {
        eprintln!(
            "skip: Debian's /usr/bin/docker (20.10) is needed for the BuildKit /session path"
        );
        return;
    };
    for (mode, tag) in [("0", unique("legacy")), ("1", unique("buildkit"))] {
        let out = run_with_timeout(
            p.cmd(cli).env("DOCKER_BUILDKIT", mode).args([
                "build",
                "-t",
                &tag,
                ctx.to_str().expect("utf8"),
            ]),
            None,
            Duration::from_secs(180),
        );
        ok(out);
        assert_eq!(
            ok(p.docker(&["run", "--rm", &tag])),
            "built-through-proxy",
            "DOCKER_BUILDKIT={mode}"
        );
        let _ = e.daemon(&["rmi", "-f", &tag]);
    }
    if mode_used_session(&p) {
        return;
    }
    panic!(
        "BuildKit build did not go through /session: {}",
        p.audit_log()
    );
}

fn mode_used_session(p: &Proxy) -> bool {
    p.audit_log().contains("\"endpoint\":\"Session\"")
}

fn volume_and_network_ls_create_rm(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let vol = unique("vol");
    let net = unique("net");
    ok(p.docker(&["volume", "create", &vol]));
    assert!(
        ok(p.docker(&["volume", "ls", "-q"]))
            .lines()
            .any(|l| l == vol)
    );
    ok(p.docker(&["volume", "rm", &vol]));
    ok(p.docker(&["network", "create", &net]));
    assert!(
        ok(p.docker(&["network", "ls", "--format", "{{.Name}}"]))
            .lines()
            .any(|l| l == net)
    );
    ok(p.docker(&["network", "rm", &net]));
}

fn image_save_and_load_stream_through_the_proxy(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let tag = format!("{}:saved", unique("img"));
    ok(p.docker(&["tag", IMAGE, &tag]));
    let tar = p.workspace.join("img.tar");
    ok(p.docker(&["save", "-o", tar.to_str().expect("utf8"), &tag]));
    assert!(
        std::fs::metadata(&tar).expect("tar").len() > 1024 * 1024,
        "saved image has the busybox layer"
    );
    ok(p.docker(&["rmi", &tag]));
    let out = ok(p.docker(&["load", "-i", tar.to_str().expect("utf8")]));
    assert!(out.contains(&tag), "{out}");
    ok(p.docker(&["rmi", &tag]));
}

per_engine!(
    version_info_ps_with_both_clis,
    run_rm_and_piped_stdin_half_close_with_both_clis,
    run_detached_then_logs_follow_and_stop,
    exec_plain_interactive_and_tty,
    attach_receives_output_and_sends_stdin,
    cp_multi_mib_file_both_directions_byte_for_byte,
    events_stream_shows_a_container_starting,
    stats_no_stream_images_and_rm,
    build_legacy_and_buildkit,
    volume_and_network_ls_create_rm,
    image_save_and_load_stream_through_the_proxy,
);
