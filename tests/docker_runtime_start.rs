//! `DockerRuntime::start` is a guard (`Starting`): a start that fails at any step undoes what
//! the earlier steps made. Each step is made to fail in turn (`DockerConfig::fail_at`, a test
//! seam) against the real dockerd, containerd and dockwarden binaries, and nothing may be left:
//! no process of the workspace (none in its cgroup either), no mount (the namespace's bind
//! mount, dockerd's mounts under its exec root), no namespace, no containers cgroup. A start
//! with no failure comes up, and stops as cleanly.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dockwarden::sys::mountinfo;
use dockwarden::workspace::runtime::docker::StartStep;
use dockwarden::workspace::runtime::{
    DockerConfig, DockerRuntime, LocalRuntime, RunSpec, Runtime, RuntimeKind,
};

const UID: u32 = 43900;
const V1: [&str; 4] = ["cpu", "cpuacct", "memory", "pids"];

fn dockerd() -> PathBuf {
    std::env::var("DOCKWARDEN_TEST_DOCKERD")
        .unwrap_or_else(|_| "/usr/sbin/dockerd".into())
        .into()
}

/// Why this machine cannot run it, if it cannot; CI (`DW_ENGINES_REQUIRED`) fails instead.
fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (a private dockerd in its own namespace)".into());
    }
    if !dockerd().is_file() {
        return Some(format!("no dockerd at {}", dockerd().display()));
    }
    if !Path::new("/sys/fs/cgroup/memory").is_dir() {
        return Some("checks the cgroup v1 hierarchy, which this machine has not".into());
    }
    None
}

fn runtime(fail_at: Option<StartStep>) -> DockerRuntime {
    let cfg = DockerConfig {
        dockerd: dockerd(),
        exe: PathBuf::from(env!("CARGO_BIN_EXE_dockwarden")),
        preload: Vec::new(),
        fail_at,
    };
    DockerRuntime::new(cfg, Arc::new(LocalRuntime::new())).unwrap()
}

fn spec(ws: &Path) -> RunSpec {
    RunSpec {
        workspace_id: "start-guard".into(),
        uid: UID,
        gid: UID,
        worktree: ws.join("worktree"),
        home: ws.join("home"),
        env: Default::default(),
        ws_dir: ws.to_path_buf(),
        kind: RuntimeKind::DockerCompose,
        netns: None,
    }
}

/// Pids whose command line names `dir`.
fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.display().to_string();
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| *p != me)
        .filter_map(|p| {
            let c = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            c.contains(&needle).then_some((p, c))
        })
        .filter(|(p, _)| {
            // Zombies are gone already; only running processes count.
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| {
                !st.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
        })
        .collect()
}

/// `containers_cgroup`: whether the containers' cgroup must be gone too (a stop keeps it for
/// the next start, with its limits; a failed start and `destroy` remove it).
fn assert_nothing_left(ws: &Path, after: &str, containers_cgroup: bool) {
    let procs = processes_under(ws);
    assert!(procs.is_empty(), "{after}: processes left: {procs:?}");
    let mounts = mountinfo::at_or_beneath(&mountinfo::own(), ws);
    assert!(mounts.is_empty(), "{after}: mounts left: {mounts:?}");
    let netns = ws.join("docker/netns");
    assert!(
        !netns.exists() || std::fs::metadata(&netns).unwrap().len() == 0,
        "{after}: the namespace file is still bound"
    );
    for c in V1 {
        let cg = Path::new("/sys/fs/cgroup")
            .join(c)
            .join(format!("dockwarden_ws_{UID}"));
        let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
        assert!(
            procs.trim().is_empty(),
            "{after}: {c} cgroup still holds {procs}"
        );
        assert!(
            !containers_cgroup || !cg.join("containers").exists(),
            "{after}: the containers cgroup is left in {c}"
        );
    }
}

/// The workspace cgroup the service makes before its runtime starts (every daemon joins it);
/// removed on drop with the id ranges.
struct Cgroups;

impl Cgroups {
    fn make() -> Cgroups {
        for c in V1 {
            let cg = Path::new("/sys/fs/cgroup")
                .join(c)
                .join(format!("dockwarden_ws_{UID}"));
            let _ = std::fs::create_dir(&cg);
        }
        Cgroups
    }
}

impl Drop for Cgroups {
    /// Also when the test fails: the cgroups, and the `dw<uid>` account `start` made.
    fn drop(&mut self) {
        let _ = dockwarden::workspace::runtime::docker::subid::Files::default().remove(UID);
        for c in V1 {
            let cg = Path::new("/sys/fs/cgroup")
                .join(c)
                .join(format!("dockwarden_ws_{UID}"));
            let _ = std::fs::remove_dir(cg.join("containers"));
            let _ = std::fs::remove_dir(&cg);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_at_any_step_leaves_nothing_behind() {
    if let Some(why) = skip_reason() {
        if let Ok(req) = std::env::var("DW_ENGINES_REQUIRED") {
            panic!("this test must run here (DW_ENGINES_REQUIRED={req}) but cannot: {why}");
        }
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let ws = dir.path().join("ws");
    // As the service lays it out: the workspace directory root's, its trees the uid's.
    for d in [ws.join("worktree"), ws.join("home")] {
        std::fs::create_dir_all(&d).unwrap();
        nix::unistd::chown(&d, Some(UID.into()), Some(UID.into())).unwrap();
    }
    std::fs::set_permissions(&ws, std::fs::Permissions::from_mode(0o711)).unwrap();
    let _cg = Cgroups::make();
    let spec = spec(&ws);

    for step in StartStep::ALL {
        let rt = runtime(Some(step));
        let e = rt.up(&spec).await.expect_err("the injected failure");
        if !e.to_string().contains("injected") {
            let log = std::fs::read_to_string(ws.join("docker/proxy.log")).unwrap_or_default();
            eprintln!("proxy log:\n{log}");
        }
        assert!(
            e.to_string()
                .contains(&format!("injected failure after the start step {step:?}")),
            "{step:?}: {e}"
        );
        assert!(!rt.is_up(&spec), "{step:?}");
        assert_nothing_left(&ws, &format!("failed after {step:?}"), true);
        eprintln!("start failed after {step:?}: nothing left");
    }

    // Without a failure it comes up, with all three processes, and stops as cleanly.
    let rt = runtime(None);
    rt.up(&spec).await.unwrap();
    assert!(rt.is_up(&spec));
    let running = processes_under(&ws);
    for part in ["dockerd", "containerd", "proxy-args"] {
        assert!(
            running.iter().any(|(_, c)| c.contains(part)),
            "{part} not running: {running:?}"
        );
    }
    rt.down(&spec).await.unwrap();
    assert_nothing_left(&ws, "a clean stop", false);
    rt.destroy(&spec).await.unwrap();
    assert_nothing_left(&ws, "destroy", true);
}
