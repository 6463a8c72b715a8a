//! Every build step counts in the shared budget, or the build is refused (issue 25): on both
//! engines, over `/grpc` (buildx), `/build?version=2` (the 20.10 CLI with BuildKit) and the
//! classic builder, each RUN step forks 30 sleeping processes and the budget's `pids.current`
//! must rise by at least 25 while the step runs.
//!
//! - On the machine's daemons, configured by `scripts/setup.sh` with `cgroup-parent` at the
//!   budget's parent (`/dockwarden`), the proxy's budget is that parent and all three paths count.
//! - On a private daemon started without `cgroup-parent`, the proxy places what it can itself
//!   (the classic builder's `cgroupparent`; on Engine 26.1 the Dockerfile frontend's
//!   `cgroup-parent` attribute over `/grpc`) and refuses the rest with `limits.build_budget`:
//!   `/build?version=2` on both engines, `/grpc` on 20.10. With `--allow-unbudgeted-builds`
//!   the refused build runs and the proxy logs a warning.
//!
//! The builds of one test run one after another (a lock), so the rise is this step's.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One build at a time in this binary: `pids.current` is read while a step runs.
static SERIAL: Mutex<()> = Mutex::new(());

/// Processes the step forks, and how many of them must be seen in the budget.
const FORKS: u64 = 30;
const AT_LEAST: u64 = 25;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path3 {
    Grpc,
    BuildKit,
    Classic,
}

fn buildx_cli() -> &'static str {
    let cli = cli28().expect(
        "Docker CLI 28 with buildx at /usr/local/bin/docker (scripts/setup.sh installs it)",
    );
    let ok = Command::new(cli)
        .args(["buildx", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no buildx plugin for {cli} (scripts/engine26.sh installs it)"
    );
    cli
}

fn cli_2010() -> &'static str {
    cli2010().expect("Docker CLI 20.10 at /usr/bin/docker (Debian's docker.io)")
}

fn pids_current(cgroup: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/fs/cgroup/pids/{cgroup}/pids.current"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The build's output, and the most processes the budget's cgroup held above its level before
/// the build, sampled while it ran.
struct Built {
    out: String,
    ok: bool,
    rise: u64,
}

/// Builds a context whose one RUN step forks [`FORKS`] sleeps through the proxy, on `path`.
fn build(p: &Proxy, path: Path3, cgroup: &str, tag: &str) -> Built {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = p.workspace.join(format!("ctx-{tag}"));
    std::fs::create_dir_all(&ctx).expect("context");
    // The marker is computed, so a log that merely echoes the Dockerfile never shows it.
    std::fs::write(
        ctx.join("Dockerfile"),
        format!(
            "FROM {IMAGE}\nRUN echo {tag}; grep pids /proc/self/cgroup; for i in $(seq {FORKS}); do sleep 60 & done; sleep 4; echo STEP-DONE-$((40+2))\n"
        ),
    )
    .expect("Dockerfile");
    let mut c = match path {
        Path3::Grpc => {
            let mut c = p.cmd(buildx_cli());
            c.env("BUILDX_NO_DEFAULT_ATTESTATIONS", "1").args([
                "buildx",
                "build",
                "--progress=plain",
                "--pull=false",
                "--no-cache",
            ]);
            c
        }
        Path3::BuildKit | Path3::Classic => {
            let mut c = p.cmd(cli_2010());
            let buildkit = if path == Path3::BuildKit { "1" } else { "0" };
            c.env("DOCKER_BUILDKIT", buildkit)
                .arg("build")
                .arg("--no-cache");
            if path == Path3::BuildKit {
                c.arg("--progress=plain");
            }
            c
        }
    };
    c.arg(&ctx).stdout(Stdio::piped()).stderr(Stdio::piped());
    let base = pids_current(cgroup);
    let mut child = c.spawn().expect("build");
    let (mut peak, t0) = (base, Instant::now());
    while child.try_wait().expect("wait").is_none() {
        peak = peak.max(pids_current(cgroup));
        if t0.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(40));
    }
    let o: Output = child.wait_with_output().expect("output");
    Built {
        out: format!("{}{}", stdout(&o), stderr(&o)),
        ok: o.status.success(),
        rise: peak.saturating_sub(base),
    }
}

fn assert_counted(b: &Built, what: &str) {
    assert!(
        b.ok && b.out.contains("STEP-DONE-42"),
        "{what}: the build failed: {}",
        b.out
    );
    assert!(
        b.rise >= AT_LEAST,
        "{what}: the budget's pids.current rose by {} while the step forked {FORKS}: {}",
        b.rise,
        b.out
    );
    println!(
        "{what}: pids.current rose by {} (step forked {FORKS})",
        b.rise
    );
}

fn assert_refused(b: &Built, what: &str) {
    assert!(
        !b.ok && b.out.contains("limits.build_budget") && b.out.contains("cgroup-parent"),
        "{what}: not refused with the rule and its hint: {}",
        b.out
    );
    assert!(
        !b.out.contains("STEP-DONE-42"),
        "{what}: the step ran: {}",
        b.out
    );
    assert!(
        b.rise < 5,
        "{what}: processes appeared in the budget ({})",
        b.rise
    );
}

/// The name of the parent the machine's daemons were given by setup (`packaging/daemon.json`).
const MACHINE_PARENT: &str = "dockwarden";

fn every_path_counts_on_the_machine_daemon(e: &Engine) {
    assert!(
        Path::new("/sys/fs/cgroup/pids").is_dir(),
        "this test reads the cgroup v1 pids hierarchy (the proxy's budget uses it)"
    );
    // The budget's parent is the daemon's own: the default `--cgroup-name`.
    let p = Proxy::start_on(e, &["--cgroup-name", MACHINE_PARENT]);
    assert!(
        !p.log().contains("limits.build_budget"),
        "the machine's daemon is set up with the budget's cgroup parent: {}",
        p.log()
    );
    for path in [Path3::Grpc, Path3::BuildKit, Path3::Classic] {
        let b = build(&p, path, MACHINE_PARENT, &format!("m{}{path:?}", e.tag()));
        assert_counted(&b, &format!("engine {} {path:?}", e.name));
        assert!(
            b.out.contains(&format!("pids:/{MACHINE_PARENT}/")),
            "{path:?}: {}",
            b.out
        );
    }
}

per_engine!(every_path_counts_on_the_machine_daemon);

/// A private daemon of engine `e`'s version with no `cgroup-parent`, and a proxy with its own
/// budget in front of it.
fn unconfigured(e: &Engine, name: &str, extra: &[&str]) -> (PrivateDaemon, Proxy, String) {
    let d = PrivateDaemon::start_on(e, name);
    let cgroup = format!("dwt_bb_{name}_{}_{}", e.tag(), std::process::id());
    let mut args = vec!["--cgroup-name", cgroup.as_str()];
    args.extend_from_slice(extra);
    let p = Proxy::start_on(&d.engine(), &args);
    (d, p, cgroup)
}

fn unconfigured_daemon_builds_are_placed_by_the_proxy_or_refused(e: &Engine) {
    let (d, p, cgroup) = unconfigured(e, "bbnone", &[]);
    let _cg = Cleanup(cgroup.clone());
    let log = p.log();
    assert!(
        log.contains("has no `cgroup-parent`") && log.contains("limits.build_budget"),
        "the proxy says once what it will refuse: {log}"
    );
    // The classic builder takes the proxy's `cgroupparent`.
    let b = build(&p, Path3::Classic, &cgroup, "uclassic");
    assert_counted(
        &b,
        &format!("engine {} classic, no daemon cgroup-parent", e.name),
    );
    // BuildKit over /build ignores it: refused.
    let b = build(&p, Path3::BuildKit, &cgroup, "ubuildkit");
    assert_refused(&b, &format!("engine {} /build?version=2", e.name));
    // /grpc: Engine 26.1 honours the frontend's cgroup parent the proxy sets; 20.10 does not.
    let b = build(&p, Path3::Grpc, &cgroup, "ugrpc");
    if e.name.starts_with("26.1") {
        assert_counted(
            &b,
            &format!("engine {} /grpc, no daemon cgroup-parent", e.name),
        );
        assert!(
            b.out.contains(&format!("pids:/{cgroup}/buildkit/")),
            "{}",
            b.out
        );
    } else {
        assert_refused(&b, &format!("engine {} /grpc", e.name));
    }
    let audit = p.audit_log();
    assert!(
        audit.contains("limits.build_budget"),
        "the refusals are audited: {audit}"
    );
    drop(p);
    drop(d);
}

fn the_operator_opt_out_forwards_unbudgeted_builds_with_a_warning(e: &Engine) {
    let (d, p, cgroup) = unconfigured(e, "bbopt", &["--allow-unbudgeted-builds"]);
    let _cg = Cleanup(cgroup.clone());
    let b = build(&p, Path3::BuildKit, &cgroup, "uoptout");
    assert!(
        b.ok && b.out.contains("STEP-DONE-42"),
        "forwarded: {}",
        b.out
    );
    // Outside the proxy's budget: under the daemon's own default parent.
    assert!(b.rise < 5, "the step was not in the budget ({})", b.rise);
    let log = p.log();
    let warned = log
        .lines()
        .filter(|l| {
            l.contains("WARN")
                && l.contains("limits.build_budget")
                && l.contains("--allow-unbudgeted-builds")
        })
        .count();
    assert!(
        warned >= 2,
        "a warning at start-up and one at the build: {log}"
    );
    drop(p);
    drop(d);
}

per_engine!(
    unconfigured_daemon_builds_are_placed_by_the_proxy_or_refused,
    the_operator_opt_out_forwards_unbudgeted_builds_with_a_warning,
);

/// Removes a test's parent cgroup (and the `buildkit/...` ones BuildKit made in it) once its
/// steps are gone (best effort).
struct Cleanup(String);

fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..20 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for ctl in ["memory", "pids"] {
            remove_tree(&PathBuf::from(format!("/sys/fs/cgroup/{ctl}/{}", self.0)));
        }
    }
}
