//! Resources against the real service and real cgroups (v1 on this machine) and a real
//! loop-mounted XFS image per worktree: the memory cap OOM-kills an allocator over it, the CPU
//! cap holds a busy loop, resize applies live or waits for approval, and ENOSPC grows the disk.
#![allow(clippy::unwrap_used)]

mod common;
#[path = "workspace_support/repo.rs"]
mod repo;
mod workspace_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use workspace_support::Svc;

const MIB: u64 = 1 << 20;

/// Why the real-cgroup tests cannot run here, if they cannot.
fn cannot_run() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not root: workspace cgroups need root");
    }
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
        && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        return Some("no cgroup hierarchy mounted");
    }
    None
}

macro_rules! need_cgroups {
    () => {
        if let Some(why) = cannot_run() {
            println!("skipped: {why}");
            return;
        }
    };
}

/// Starts the service with a resources file.
fn start(uid_base: u32, toml: &str) -> Svc {
    start_with(uid_base, toml, &[])
}

fn start_with(uid_base: u32, toml: &str, extra: &[&str]) -> Svc {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("resources.toml");
    std::fs::write(&file, toml).unwrap();
    let mut args = vec!["--resources", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let svc = Svc::start(uid_base, &args, &[]);
    // The file is read at start; the temp dir may go.
    drop(dir);
    svc
}

fn uid_of(svc: &Svc, id: &str) -> u64 {
    svc.ok("GET", &format!("/v1/workspaces/{id}"), None)["uid"]
        .as_u64()
        .unwrap()
}

fn v1(controller: &str, uid: u64, file: &str) -> String {
    std::fs::read_to_string(format!(
        "/sys/fs/cgroup/{controller}/dockwarden_ws_{uid}/{file}"
    ))
    .unwrap()
    .trim()
    .to_string()
}

fn status(svc: &Svc, id: &str) -> Value {
    svc.ok("GET", &format!("/v1/workspaces/{id}/status"), None)
}

/// The host pid of the workspace process whose command line has `arg`.
fn host_pid_of(uid: u32, arg: &str) -> i32 {
    workspace_support::pids_of(uid)
        .into_iter()
        .find(|p| cmdline(&p.to_string()).iter().any(|a| a == arg))
        .unwrap_or_else(|| panic!("no process of uid {uid} runs with `{arg}`"))
}

fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

const PLAN: &str = r#"
[platform.ceiling]
cpu = 4
memory = "1GiB"
[plan.ceiling]
memory = "512MiB"
disk = "128MiB"
[plan.approval]
memory = "256MiB"
cpu = 2
[defaults.reservation]
cpu = 0.25
memory = "32MiB"
[defaults.burst]
cpu = 1
memory = "64MiB"
pids = 256
"#;

#[test]
fn a_64mib_burst_limit_oom_kills_a_200mib_allocator_while_a_small_one_runs() {
    need_cgroups!();
    let svc = start(28500, PLAN);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "mem" })));
    let uid = uid_of(&svc, "mem");
    assert_eq!(
        v1("memory", uid, "memory.limit_in_bytes"),
        (64 * MIB).to_string()
    );
    assert_eq!(
        v1("memory", uid, "memory.soft_limit_in_bytes"),
        (32 * MIB).to_string()
    );
    // `tail` keeps a line without a newline in memory: it allocates what it reads.
    let small = svc.exec("mem", "head -c 20M /dev/zero | tail | wc -c");
    assert_eq!(small["exit_code"], 0, "{small}");
    assert_eq!(
        small["stdout"].as_str().unwrap().trim(),
        (20 * MIB).to_string()
    );
    let big = svc.exec("mem", "head -c 200M /dev/zero | tail >/dev/null");
    assert_eq!(
        big["exit_code"], 137,
        "a 200 MiB allocator was not OOM-killed under a 64 MiB cap: {big}"
    );
    let st = status(&svc, "mem");
    let usage = &st["health"]["usage"];
    assert!(usage["oom_kills"].as_u64().unwrap() >= 1, "{st}");
    assert!(
        usage["memory_peak_bytes"].as_u64().unwrap() <= 64 * MIB,
        "{st}"
    );
    assert_eq!(st["burst_limit"]["memory_bytes"], 64 * MIB);
    assert_eq!(st["reservation"]["memory_bytes"], 32 * MIB);
    assert_eq!(st["resource_model"], "burstable");
    assert_eq!(st["ceilings"]["memory"]["set_by"], "plan");
    assert_eq!(st["ceilings"]["cpu"]["set_by"], "platform");
    // The workspace keeps working after the kill.
    let after = svc.exec("mem", "echo alive");
    assert_eq!(after["stdout"], "alive\n");
    svc.ok("DELETE", "/v1/workspaces/mem", None);
    assert!(!Path::new(&format!("/sys/fs/cgroup/memory/dockwarden_ws_{uid}")).exists());
}

#[test]
fn a_half_cpu_cap_holds_a_busy_loop_near_50_percent() {
    need_cgroups!();
    let svc = start(28600, PLAN);
    let body = json!({ "id": "cpu", "resources": { "burst": { "cpu": 0.5 } } });
    svc.ok("POST", "/v1/workspaces", Some(body));
    let uid = uid_of(&svc, "cpu");
    assert_eq!(v1("cpu", uid, "cpu.cfs_quota_us"), "50000");
    assert_eq!(v1("cpu", uid, "cpu.shares"), "256");
    let before = status(&svc, "cpu")["health"]["usage"].clone();
    let t = Instant::now();
    // Two busy loops: uncapped they would take both CPUs of this machine (share ~2).
    let r = svc.exec(
        "cpu",
        "timeout 3 sh -c 'while :; do :; done' & timeout 3 sh -c 'while :; do :; done'; wait; true",
    );
    let wall = t.elapsed().as_secs_f64();
    assert_eq!(r["exit_code"], 0, "{r}");
    let after = status(&svc, "cpu")["health"]["usage"].clone();
    let used = (after["cpu_usage_usec"].as_u64().unwrap()
        - before["cpu_usage_usec"].as_u64().unwrap()) as f64
        / 1e6;
    let share = used / wall;
    let throttled = after["cpu_throttled_periods"].as_u64().unwrap();
    println!(
        "two busy loops under a 0.5 CPU cap: {used:.2} s CPU in {wall:.2} s = {:.0}% of one CPU, {throttled} throttled periods",
        share * 100.0
    );
    // Measured from cpuacct, wide tolerance (the machine is shared, so the loops may get
    // less): never much above half a CPU, and they did run.
    assert!(share < 0.65, "the cap did not hold: {share}");
    assert!(used > 0.05, "{used}");
    svc.ok("DELETE", "/v1/workspaces/cpu", None);
}

#[test]
fn resize_up_under_the_threshold_is_live_over_it_and_down_wait_for_approval() {
    need_cgroups!();
    let svc = start(28700, PLAN);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "rs" })));
    let uid = uid_of(&svc, "rs");
    svc.exec("rs", "sleep 300.25 >/dev/null 2>&1 &");
    // Its pid on the host (inside, it has the sandbox's own).
    let pid = host_pid_of(uid as u32, "300.25");
    assert!(
        v1("memory", uid, "cgroup.procs")
            .lines()
            .any(|l| l == pid.to_string())
    );

    // Up, under the threshold: applied live, the background process keeps running.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "burst": { "memory": "128MiB", "cpu": 1.5 } })),
    );
    assert_eq!(r["state"], "applied", "{r}");
    assert_eq!(r["disruptive"], false);
    assert_eq!(r["interrupted"], json!([]));
    assert!(
        r["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["mode"] == "live")
    );
    assert_eq!(
        v1("memory", uid, "memory.limit_in_bytes"),
        (128 * MIB).to_string()
    );
    assert_eq!(v1("cpu", uid, "cpu.cfs_quota_us"), "150000");
    assert!(alive(pid), "the background process died in a live resize");

    // Up over the approval threshold (256 MiB, plan): recorded, nothing changes yet.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "burst": { "memory": "300MiB" } })),
    );
    assert_eq!(r["state"], "pending_approval", "{r}");
    assert!(
        r["approval_needed"][0]
            .as_str()
            .unwrap()
            .contains("layer `plan`"),
        "{r}"
    );
    assert_eq!(
        v1("memory", uid, "memory.limit_in_bytes"),
        (128 * MIB).to_string()
    );
    let req = r["request"].as_str().unwrap().to_string();
    let out = svc.cli(&["--json", "approve", &req]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let approved: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(approved["state"], "applied", "{approved}");
    assert_eq!(
        v1("memory", uid, "memory.limit_in_bytes"),
        (300 * MIB).to_string()
    );
    // A decided request cannot be decided again.
    let (code, again) = svc.api("POST", &format!("/v1/resize-requests/{req}/approve"), None);
    assert_eq!(
        (code, again["code"].as_str()),
        (409, Some("wrong_state")),
        "{again}"
    );

    // Down always waits; rejected, it changes nothing.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "burst": { "cpu": 0.5 } })),
    );
    assert_eq!(r["state"], "pending_approval", "{r}");
    let req = r["request"].as_str().unwrap().to_string();
    let out = svc.cli(&["--json", "reject", &req]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v1("cpu", uid, "cpu.cfs_quota_us"), "150000");

    // A reservation above the burst limit adds nothing usable: skipped, saying why.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "reservation": { "cpu": 2 } })),
    );
    assert_eq!(r["state"], "skipped", "{r}");
    assert!(
        r["changes"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("no usable capacity"),
        "{r}"
    );
    assert_eq!(v1("cpu", uid, "cpu.shares"), "256");

    // Over the ceiling: refused with the ceiling and the layer.
    let (code, e) = svc.api(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "burst": { "memory": "1GiB" } })),
    );
    assert_eq!(code, 422, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("512 MiB set by layer `plan`"),
        "{e}"
    );
    // Disk without a pool: unsupported, and nothing is claimed.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "disk": "100MiB" })),
    );
    assert_eq!(r["changes"][0]["action"], "unsupported", "{r}");
    assert_eq!(r["state"], "skipped");
    // Malformed input is a 400, not a crash.
    let (code, e) = svc.api(
        "POST",
        "/v1/workspaces/rs/resize",
        Some(json!({ "burst": { "memory": "lots" } })),
    );
    assert_eq!(code, 400, "{e}");

    let list = svc.ok("GET", "/v1/workspaces/rs/resize-requests", None);
    let states: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["applied", "applied", "rejected", "skipped", "skipped"]
    );
    assert!(alive(pid));
    svc.ok("DELETE", "/v1/workspaces/rs", None);
}

#[test]
fn create_over_a_ceiling_is_refused_and_makes_nothing() {
    need_cgroups!();
    let svc = start(28800, PLAN);
    let body = json!({ "id": "big", "resources": { "burst": { "memory": "2GiB" } } });
    let (code, e) = svc.api("POST", "/v1/workspaces", Some(body));
    assert_eq!(code, 422, "{e}");
    // 2 GiB is over the platform's 1 GiB too; the tighter plan ceiling is the one named.
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("512 MiB set by layer `plan`"),
        "{e}"
    );
    let (code, _) = svc.api("GET", "/v1/workspaces/big", None);
    assert_eq!(code, 404);
    // A workspace layer can tighten, and status says who set what.
    let body =
        json!({ "id": "tight", "resources": { "ceiling": { "memory": "48MiB", "cpu": 8 } } });
    svc.ok("POST", "/v1/workspaces", Some(body));
    let st = status(&svc, "tight");
    assert_eq!(st["ceilings"]["memory"]["value"], 48 * MIB, "{st}");
    assert_eq!(st["ceilings"]["memory"]["set_by"], "workspace");
    // The looser cpu value was ignored and reported.
    assert_eq!(st["ceilings"]["cpu"]["set_by"], "platform", "{st}");
    assert_eq!(st["ignored_layer_values"][0]["layer"], "workspace", "{st}");
    // The default burst (64 MiB) was lowered to the workspace's ceiling.
    assert_eq!(st["burst_limit"]["memory_bytes"], 48 * MIB, "{st}");
    svc.ok("DELETE", "/v1/workspaces/tight", None);
}

/// Unmounts every worktree image of the service when the test ends, even on failure (the
/// harness SIGKILLs the service, which would leave them mounted).
/// Skips (saying why) where disk images cannot be made: no xfsprogs or losetup.
macro_rules! need_image_tools {
    () => {
        for tool in ["mkfs.xfs", "xfs_growfs", "losetup"] {
            if Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {tool}"))
                .output()
                .map(|o| !o.status.success())
                .unwrap_or(true)
            {
                println!("skipped: `{tool}` is missing (scripts/setup.sh installs xfsprogs)");
                return;
            }
        }
    };
}

/// The test plan with 64 MiB disks on their own images.
fn images_toml() -> String {
    format!("{PLAN}\n[defaults]\ndisk = \"64MiB\"\n[disk]\nimages = \"on\"\n")
}

struct Images(PathBuf);

impl Drop for Images {
    fn drop(&mut self) {
        for e in std::fs::read_dir(&self.0).into_iter().flatten().flatten() {
            let wt = e.path().join("worktree");
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&wt)
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

fn repo_with_setup(dir: &Path, setup: &str) -> PathBuf {
    repo::repo_with(dir, "repo", &json!({ "scripts": { "setup": setup } }))
}

#[test]
fn enospc_grows_a_64mib_disk_to_96_retries_setup_once_and_stops_at_the_ceiling() {
    need_cgroups!();
    need_image_tools!();
    let toml = images_toml();
    let svc = start(28900, &toml);
    let _images = Images(svc.state.join("workspaces"));
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_setup(
        dir.path(),
        "echo run >> setup-runs.log; head -c 80M /dev/zero > deps.bin",
    );
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "full", "repo": repo.display().to_string() })),
    );
    let setup = &created["workspace"]["setup"];
    assert_eq!(
        setup["exit_code"], 0,
        "setup did not succeed after growth: {created}"
    );
    assert_eq!(setup["disk"]["grew"], true, "{setup}");
    assert_eq!(setup["disk"]["retried"], true, "{setup}");
    assert_eq!(setup["disk"]["from_bytes"], 64 * MIB);
    assert_eq!(setup["disk"]["to_bytes"], 96 * MIB);
    assert_eq!(setup["disk"]["ceiling_bytes"], 128 * MIB);
    let runs = std::fs::read_to_string(svc.worktree("full").join("setup-runs.log")).unwrap();
    assert_eq!(runs.lines().count(), 2, "setup ran {runs:?}");
    let st = status(&svc, "full");
    assert_eq!(st["disk"]["enforced"], true, "{st}");
    assert_eq!(st["disk"]["configured_bytes"], 96 * MIB, "{st}");
    // statfs of the worktree: its own filesystem, 96 MiB less the XFS log.
    let size = st["disk"]["size_bytes"].as_u64().unwrap();
    assert!((85 * MIB..=96 * MIB).contains(&size), "{st}");
    assert!(
        st["disk"]["used_bytes"].as_u64().unwrap() >= 80 * MIB,
        "{st}"
    );
    assert_eq!(st["disk"]["ceiling"]["set_by"], "plan");

    // A non-setup command on a full disk: the disk grows (96 -> 128), the command is not
    // replayed, and its failure is kept.
    let r = svc.exec(
        "full",
        "echo run >> exec-runs.log; head -c 200M /dev/zero > more.bin",
    );
    assert_ne!(r["exit_code"], 0, "{r}");
    assert_eq!(r["disk"]["grew"], true, "{r}");
    assert_eq!(r["disk"]["to_bytes"], 128 * MIB, "{r}");
    assert!(
        r["disk"]["note"].as_str().unwrap().contains("not replayed"),
        "{r}"
    );
    let runs = std::fs::read_to_string(svc.worktree("full").join("exec-runs.log")).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "the command was replayed: {runs:?}"
    );
    // Past the ceiling: no growth possible.
    let r = svc.exec("full", "head -c 200M /dev/zero > more.bin");
    assert_ne!(r["exit_code"], 0, "{r}");
    assert_eq!(r["disk"]["grew"], false, "{r}");
    assert!(
        r["disk"]["note"]
            .as_str()
            .unwrap()
            .contains("no growth is possible"),
        "{r}"
    );
    assert_eq!(status(&svc, "full")["disk"]["configured_bytes"], 128 * MIB);
    // A command that fails with room left does not touch the disk.
    let r = svc.exec("full", "rm -f more.bin; false");
    assert_eq!(r["disk"], Value::Null, "{r}");
    // Shrinking is unsupported and claims nothing.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/full/resize",
        Some(json!({ "disk": "64MiB" })),
    );
    assert_eq!(r["changes"][0]["action"], "unsupported", "{r}");
    let wt = svc.worktree("full");
    svc.ok("DELETE", "/v1/workspaces/full", None);
    assert!(
        !svc.state
            .join("disks")
            .join(format!("{}.img", uid_of_deleted(&created)))
            .exists()
    );
    assert!(!wt.exists());
}

fn uid_of_deleted(created: &Value) -> u64 {
    created["workspace"]["uid"].as_u64().unwrap()
}

fn comm(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn cmdline(pid: &str) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[test]
fn a_docker_compose_workspace_keeps_its_daemons_in_its_cgroup_and_gives_containers_half() {
    need_cgroups!();
    if !Path::new("/usr/sbin/dockerd").is_file() {
        println!("skipped: no /usr/sbin/dockerd for a private daemon");
        return;
    }
    let svc = start_with(29000, PLAN, &["--dockerd", "/usr/sbin/dockerd"]);
    let body = json!({
        "id": "dc", "runtime": "docker-compose",
        "resources": { "burst": { "memory": "256MiB", "pids": 400 } },
    });
    svc.ok("POST", "/v1/workspaces", Some(body));
    let uid = uid_of(&svc, "dc");
    let procs = v1("memory", uid, "cgroup.procs");
    let names: Vec<String> = procs.lines().map(comm).collect();
    for want in ["dockerd", "containerd", "dockwarden"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} is not in the workspace cgroup: {names:?}"
        );
    }
    // The proxy's container budget is half of the workspace's burst limit: the service hands
    // the proxy its typed arguments in a file (`dockwarden proxy-args FILE`).
    let proxy = procs
        .lines()
        .map(cmdline)
        .find(|a| a.iter().any(|x| x == "proxy-args"))
        .unwrap();
    let args: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&proxy[proxy.iter().position(|x| x == "proxy-args").unwrap() + 1])
            .unwrap(),
    )
    .unwrap();
    let budget = &args["budget"];
    assert_eq!(
        budget["memory_budget"],
        json!({ "Absolute": 128 * MIB }),
        "{args}"
    );
    assert_eq!(budget["pids_budget"], json!({ "Absolute": 200 }), "{args}");
    assert_eq!(
        budget["cgroup_name"],
        json!(format!("dockwarden_ws_{uid}/containers"))
    );
    assert_eq!(
        v1("memory", uid, "containers/memory.limit_in_bytes"),
        (128 * MIB).to_string()
    );
    assert_eq!(v1("pids", uid, "containers/pids.max"), "200");
    // A live resize keeps the containers at half.
    let r = svc.ok(
        "POST",
        "/v1/workspaces/dc/resize",
        Some(json!({ "burst": { "memory": "200MiB" } })),
    );
    assert_eq!(r["state"], "pending_approval", "a lower cap waits: {r}");
    let r = svc.ok(
        "POST",
        "/v1/workspaces/dc/resize",
        Some(json!({ "burst": { "memory": "384MiB" } })),
    );
    assert_eq!(
        r["state"], "pending_approval",
        "over the 256 MiB threshold: {r}"
    );
    let req = r["request"].as_str().unwrap().to_string();
    let r = svc.ok("POST", &format!("/v1/resize-requests/{req}/approve"), None);
    assert_eq!(r["state"], "applied", "{r}");
    assert_eq!(
        v1("memory", uid, "memory.limit_in_bytes"),
        (384 * MIB).to_string()
    );
    assert_eq!(
        v1("memory", uid, "containers/memory.limit_in_bytes"),
        (192 * MIB).to_string()
    );
    svc.ok("DELETE", "/v1/workspaces/dc", None);
    assert!(!Path::new(&format!("/sys/fs/cgroup/memory/dockwarden_ws_{uid}")).exists());
}

/// Recovery of a damaged worktree with disk images on: the image holding the damaged tree is
/// unmounted and kept aside (`recovery.preserved_at`), and the restored tree is put in a new
/// image mounted in its place, so the disk stays enforced.
#[test]
fn a_damaged_worktree_on_a_disk_image_is_restored_into_a_new_image() {
    need_cgroups!();
    need_image_tools!();
    let toml = images_toml();
    let svc = start(29100, &toml);
    let _images = Images(svc.state.join("workspaces"));
    let dir = tempfile::tempdir().unwrap();
    let repo = repo_with_setup(dir.path(), "true");
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "dmg", "repo": repo.display().to_string() })),
    );
    let wt = svc.worktree("dmg");
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| std::fs::metadata(p).unwrap().dev();
    assert_ne!(
        dev(&wt),
        dev(wt.parent().unwrap()),
        "the worktree is its own filesystem"
    );
    svc.raw(
        "PUT",
        "/v1/workspaces/dmg/files/content?path=a.txt",
        b"kept",
    );
    let snap = svc.ok("POST", "/v1/workspaces/dmg/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Damage: the repository's metadata and the file, from inside the mounted image (the
    // mount point itself cannot be removed).
    std::fs::remove_dir_all(wt.join(".git")).unwrap();
    std::fs::remove_file(wt.join("a.txt")).unwrap();
    let out = svc.exec("dmg", "cat a.txt");
    assert_eq!(out["stdout"], "kept", "{out}");
    assert_eq!(out["recovery"]["restored_from"], snap.as_str(), "{out}");
    let aside = out["recovery"]["preserved_at"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(aside.ends_with(".img"), "{out}");
    assert!(
        Path::new(&aside).is_file(),
        "the damaged image is kept at {aside}"
    );
    assert_ne!(
        dev(&wt),
        dev(wt.parent().unwrap()),
        "the restored worktree is on a disk image again"
    );
    let st = status(&svc, "dmg");
    assert_eq!(st["disk"]["enforced"], true, "{st}");
    assert!(
        wt.join(".git").is_dir(),
        "the restored tree has its repository"
    );
    svc.ok("DELETE", "/v1/workspaces/dmg", None);
}

/// With disk images on, `kill -9` of the service in the middle of a create (its image made
/// and mounted, setup running) leaves nothing once the service is back: the rolled-back
/// workspace's mount, image and loop device are gone, and the other workspace's image is
/// mounted and works.
#[test]
fn a_crash_mid_create_leaves_no_image_mount_or_loop_device_after_restart() {
    need_cgroups!();
    need_image_tools!();
    let toml = images_toml();
    // The resources file must outlive the first service: the restart reads it again.
    let conf = tempfile::tempdir().unwrap();
    let file = conf.path().join("resources.toml");
    std::fs::write(&file, toml).unwrap();
    let mut svc = Svc::start(29150, &["--resources", file.to_str().unwrap()], &[]);
    let _images = Images(svc.state.join("workspaces"));
    let dir = tempfile::tempdir().unwrap();
    let slow = repo_with_setup(dir.path(), "sleep 60");
    let src = svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "src" })));
    let next_uid = src["workspace"]["uid"].as_u64().unwrap() as u32 + 1;
    let image = svc.state.join(format!("disks/{next_uid}.img"));
    let socket = svc.socket.clone();
    let body = json!({ "id": "victim", "repo": slow.display().to_string() }).to_string();
    let _pending = std::thread::spawn(move || {
        common::http(&socket, "POST", "/v1/workspaces", body.as_bytes())
    });
    let victim_wt = svc.worktree("victim");
    common::wait_until(
        std::time::Duration::from_secs(20),
        "the victim's image mounted and its setup running",
        || image.exists() && !workspace_support::pids_of(next_uid).is_empty(),
    );
    let victim_dir = svc.state.join("workspaces/victim");
    let mounted = || {
        dockwarden::sys::mountinfo::at_or_beneath(&dockwarden::sys::mountinfo::own(), &victim_dir)
    };
    assert!(
        !mounted().is_empty(),
        "the victim's worktree image is mounted"
    );
    svc.kill9();
    svc.restart(&[]);
    assert_eq!(svc.api("GET", "/v1/workspaces/victim", None).0, 404);
    assert_eq!(mounted(), Vec::<PathBuf>::new(), "a mount is left");
    assert!(!image.exists(), "the victim's image is left");
    assert!(!victim_wt.exists());
    // The loop device goes when the last user of the (lazily unmounted) filesystem does:
    // the crashed create's setup processes, which the restarted service ends.
    let backed = || {
        let loops = Command::new("losetup").arg("-a").output().unwrap();
        String::from_utf8_lossy(&loops.stdout).contains(&image.display().to_string())
    };
    common::wait_until(
        std::time::Duration::from_secs(10),
        "no loop device backs the removed image",
        || !backed(),
    );
    let r = svc.exec("src", "echo ok > f && cat f");
    assert_eq!(r["stdout"], "ok\n", "{r}");
    svc.ok("DELETE", "/v1/workspaces/src", None);
}
