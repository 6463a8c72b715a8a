//! The container cap and the shared memory and pids budget, end to end: the real proxy in front
//! of a real dockerd, with the cgroup limits enforced by the kernel.

mod common;
use common::*;

use std::process::Command;
use std::time::Duration;

/// A cgroup name for this test (the budget's names allow `[a-z0-9_]` only).
fn cgroup_name(e: &Engine, tag: &str) -> String {
    format!("dwt_{tag}_{}_{}", e.tag(), std::process::id())
}

/// Removes the test's parent cgroup once its containers are gone (best effort).
struct CgroupCleanup(String);

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        for ctl in ["memory", "pids"] {
            let dir = format!("/sys/fs/cgroup/{ctl}/{}", self.0);
            for _ in 0..20 {
                if std::fs::remove_dir(&dir).is_ok() || !std::path::Path::new(&dir).exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

fn create_body() -> String {
    format!(r#"{{"Image":"{IMAGE}","Cmd":["true"]}}"#)
}

fn post_create(sock: &std::path::Path) -> String {
    let body = create_body();
    let req = format!(
        "POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw(sock, req.as_bytes())
}

fn eighty_parallel_creates_leave_exactly_the_default_cap_of_64(e: &Engine) {
    let d = PrivateDaemon::start_on(e, "cap");
    let name = cgroup_name(e, "cap");
    let _cg = CgroupCleanup(name.clone());
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let ws = dir.path().canonicalize().expect("canon").join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    // Debug lines of admission: how many creates were pending when each was admitted.
    let env = [("RUST_LOG", "info,dockwarden_proxy::proxy::admission=debug")];
    let p = Proxy::start_in_on_env(&d.engine(), dir, ws, &["--cgroup-name", &name], &env);
    assert_eq!(
        stdout(&d.cli(&["ps", "-aq"])),
        "",
        "the private daemon starts empty"
    );

    let handles: Vec<_> = (0..80)
        .map(|_| {
            let s = p.socket.clone();
            std::thread::spawn(move || post_create(&s))
        })
        .collect();
    let answers: Vec<String> = handles
        .into_iter()
        .map(|h| h.join().expect("thread"))
        .collect();
    let created = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 201"))
        .count();
    let refused: Vec<&String> = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 403"))
        .collect();
    let exist = stdout(&d.cli(&["ps", "-aq"])).lines().count();
    eprintln!(
        "80 parallel creates: {created} created, {} refused, {exist} exist",
        refused.len()
    );
    assert_eq!(created, 64);
    assert_eq!(refused.len(), 16);
    assert!(
        refused
            .iter()
            .all(|a| a.contains("limits.containers") && a.contains("docker rm")),
        "{}",
        refused[0]
    );
    assert_eq!(exist, 64, "the daemon holds exactly the cap");
    // The cap is kept without making the daemon create one container at a time: creates were
    // admitted while others were still with the daemon (impossible while one lock was held
    // from the count to the daemon's answer), and refusals by the cap were counted again
    // once those had been answered.
    let log = p.log();
    let most = log
        .lines()
        .filter(|l| l.contains("create admitted"))
        .filter_map(|l| {
            l.split("creates.pending=")
                .nth(1)?
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max();
    eprintln!("most creates pending at an admission: {most:?}");
    assert!(
        most.is_some_and(|n| n >= 1),
        "no create was admitted while another was pending:\n{log}"
    );

    // Freeing one makes room for exactly one more.
    let first = stdout(&d.cli(&["ps", "-aq"]))
        .lines()
        .next()
        .map(str::to_owned)
        .expect("an id");
    ok(d.cli(&["rm", &first]));
    assert!(post_create(&p.socket).starts_with("HTTP/1.1 201"));
    assert!(post_create(&p.socket).starts_with("HTTP/1.1 403"));
    let any = stdout(&d.cli(&["ps", "-aq"]))
        .lines()
        .next()
        .map(str::to_owned)
        .expect("an id");
    let parent = stdout(&d.cli(&["inspect", "-f", "{{.HostConfig.CgroupParent}}", &any]));
    assert_eq!(parent, format!("/{name}"));
}

fn memory_budget_kills_a_container_that_allocates_past_it(e: &Engine) {
    let name = cgroup_name(e, "mem");
    let _cg = CgroupCleanup(name.clone());
    let p = Proxy::start_on(e, &["--cgroup-name", &name, "--memory-budget", "64m"]);
    let limit = std::fs::read_to_string(format!(
        "/sys/fs/cgroup/memory/{name}/memory.limit_in_bytes"
    ))
    .expect("limit file");
    assert_eq!(limit.trim(), (64u64 << 20).to_string());

    // Within the budget: 16 MiB held in memory is fine.
    let small = unique("mem-small");
    let out = ok(p.docker(&[
        "run",
        "--name",
        &small,
        IMAGE,
        "sh",
        "-c",
        "head -c 16m /dev/zero | tail >/dev/null; echo rc=$?",
    ]));
    assert_eq!(out, "rc=0");
    // Past it: 200 MiB held by `tail` (no newline, so it buffers everything) is OOM-killed.
    let big = unique("mem-big");
    let o = p.docker(&[
        "run",
        "--name",
        &big,
        IMAGE,
        "sh",
        "-c",
        "head -c 200m /dev/zero | tail >/dev/null; echo rc=$?",
    ]);
    let state = e.inspect(&big);
    let out = stdout(&o);
    eprintln!(
        "past the budget: stdout {out:?}, exit {:?}, OOMKilled={}",
        o.status.code(),
        state["State"]["OOMKilled"]
    );
    // The kernel's OOM killer picks within the parent cgroup: `tail` (the shell prints 137) or
    // the whole container (docker run exits 137).
    assert!(
        out == "rc=137" || o.status.code() == Some(137),
        "not killed: {out:?} {:?} {}",
        o.status.code(),
        stderr(&o)
    );
    assert_eq!(state["HostConfig"]["CgroupParent"], format!("/{name}"));
    // A per-container limit larger than the budget is refused; one that fits stays.
    let o = p.docker(&["create", "-m", "128m", IMAGE]);
    assert!(stderr(&o).contains("limits.memory"), "{}", stderr(&o));
    let fits = unique("mem-fits");
    ok(p.docker(&["create", "--name", &fits, "-m", "32m", IMAGE]));
    assert_eq!(e.inspect(&fits)["HostConfig"]["Memory"], 32u64 << 20);
    for c in [&small, &big, &fits] {
        e.force_remove(c);
    }
}

fn pids_budget_stops_a_fork_loop(e: &Engine) {
    let name = cgroup_name(e, "pids");
    let _cg = CgroupCleanup(name.clone());
    let p = Proxy::start_on(e, &["--cgroup-name", &name, "--pids-budget", "40"]);
    let max =
        std::fs::read_to_string(format!("/sys/fs/cgroup/pids/{name}/pids.max")).expect("pids.max");
    assert_eq!(max.trim(), "40");
    let c = unique("pids");
    let o = p.docker(&[
        "run",
        "--name",
        &c,
        IMAGE,
        "sh",
        "-c",
        "for i in $(seq 100); do sleep 30 & done; echo started",
    ]);
    let err = stderr(&o);
    e.force_remove(&c);
    eprintln!(
        "fork loop under a 40-process budget: {}",
        err.lines().next().unwrap_or("")
    );
    assert!(err.contains("can't fork"), "stderr: {err}");
    let o = p.docker(&["create", "--pids-limit", "1000", IMAGE]);
    assert!(stderr(&o).contains("limits.pids"), "{}", stderr(&o));
}

#[test]
fn proxy_refuses_to_start_when_the_budget_cannot_be_applied() {
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let sock = dir.path().join("s.sock");
    let run = |extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dockwarden"));
        c.args(["proxy", "--listen"])
            .arg(&sock)
            .arg("--workspace")
            .arg(dir.path())
            .args(extra);
        run_with_timeout(&mut c, None, Duration::from_secs(30))
    };
    let o = run(&["--cgroup-root", "/proc/dwt-no-such-hierarchy"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--no-cgroup-budget"), "{}", stderr(&o));
    let o = run(&["--cgroup-name", "Not-A-Name"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("invalid cgroup name"), "{}", stderr(&o));
}

fn without_the_budget_containers_keep_the_daemon_default_parent(e: &Engine) {
    let p = Proxy::start_on(e, &["--no-cgroup-budget"]);
    let c = unique("nobudget");
    ok(p.docker(&["create", "--name", &c, IMAGE]));
    let parent = e.inspect(&c)["HostConfig"]["CgroupParent"].clone();
    e.force_remove(&c);
    assert_eq!(parent, "");
}

fn pids_budget_holds_on_a_private_daemon_too(e: &Engine) {
    let d = PrivateDaemon::start_on(e, "budget");
    let name = cgroup_name(e, "pdpids");
    let _cg = CgroupCleanup(name.clone());
    let dir = tempfile::Builder::new()
        .prefix("dwtest")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let ws = dir.path().canonicalize().expect("canon").join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let p = Proxy::start_in_on(
        &d.engine(),
        dir,
        ws,
        &["--cgroup-name", &name, "--pids-budget", "40"],
    );
    let o = p.docker(&[
        "run",
        "--rm",
        IMAGE,
        "sh",
        "-c",
        "for i in $(seq 100); do sleep 30 & done; echo started",
    ]);
    assert!(stderr(&o).contains("can't fork"), "stderr: {}", stderr(&o));
}

per_engine!(
    eighty_parallel_creates_leave_exactly_the_default_cap_of_64,
    memory_budget_kills_a_container_that_allocates_past_it,
    pids_budget_stops_a_fork_loop,
    without_the_budget_containers_keep_the_daemon_default_parent,
    pids_budget_holds_on_a_private_daemon_too,
);
