//! The workspace cgroup `dockwarden_ws_<uid>` on cgroup v1 (one directory per controller)
//! and v2 (one directory): which files carry the reservation (floor) and the burst limit
//! (cap), writing them, reading usage back, and starting processes inside it.
//!
//! Floors: `cpu.shares` / `cpu.weight`, `memory.soft_limit_in_bytes` / `memory.low`.
//! Caps: CFS quota / `cpu.max`, `memory.limit_in_bytes` / `memory.max`, `pids.max`.

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::Sizing;

/// CFS period used for the CPU cap (the kernel default).
pub const CFS_PERIOD_US: u64 = 100_000;

/// Which cgroup hierarchy, and where it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// `<root>/<controller>/<name>`.
    V1 { root: PathBuf },
    /// `<root>/<name>`.
    V2 { root: PathBuf },
}

/// The name of a workspace's cgroup (also the docker runtime's cgroup parent prefix).
pub fn name_of(uid: u32) -> String {
    format!("dockwarden_ws_{uid}")
}

/// v1 controllers a workspace cgroup is made on.
const V1_CONTROLLERS: [&str; 4] = ["cpu", "cpuacct", "memory", "pids"];

/// One file to write: controller (v1; empty on v2), file name, value.
pub type FileWrite = (&'static str, &'static str, String);

/// A limit as its cgroup file spells it, or the file's word for "none".
fn value_or(v: Option<u64>, none: &str) -> String {
    v.map_or_else(|| none.to_owned(), |v| v.to_string())
}

fn shares(millis: u64) -> u64 {
    (millis * 1024 / 1000).clamp(2, 262_144)
}

/// The files that express `s`, in a safe order (floors before caps; on v1 swap with memory
/// is handled by the writer). Pure.
pub fn files_for(h: &Hierarchy, s: &Sizing) -> Vec<FileWrite> {
    let r = &s.reservation;
    let b = &s.burst_limit;
    let mut out = Vec::new();
    match h {
        Hierarchy::V1 { .. } => {
            let floor = r.cpu_millis.map(shares).unwrap_or(1024);
            out.push(("cpu", "cpu.shares", floor.to_string()));
            out.push(("cpu", "cpu.cfs_period_us", CFS_PERIOD_US.to_string()));
            let quota = b
                .cpu_millis
                .map(|m| (m * CFS_PERIOD_US / 1000).max(1000).to_string())
                .unwrap_or_else(|| "-1".into());
            out.push(("cpu", "cpu.cfs_quota_us", quota));
            let soft = value_or(r.memory_bytes, "-1");
            out.push(("memory", "memory.soft_limit_in_bytes", soft));
            let cap = value_or(b.memory_bytes, "-1");
            out.push(("memory", "memory.limit_in_bytes", cap));
            let pids = value_or(b.pids, "max");
            out.push(("pids", "pids.max", pids));
        }
        Hierarchy::V2 { .. } => {
            // cpu.weight is cpu.shares mapped onto 1..10000 the way runc maps it.
            let weight = r
                .cpu_millis
                .map(|m| 1 + (shares(m) - 2) * 9999 / 262_142)
                .unwrap_or(100);
            out.push(("", "cpu.weight", weight.to_string()));
            let max = b
                .cpu_millis
                .map(|m| format!("{} {CFS_PERIOD_US}", (m * CFS_PERIOD_US / 1000).max(1000)))
                .unwrap_or_else(|| format!("max {CFS_PERIOD_US}"));
            out.push(("", "cpu.max", max));
            let low = value_or(r.memory_bytes, "0");
            out.push(("", "memory.low", low));
            let cap = value_or(b.memory_bytes, "max");
            out.push(("", "memory.max", cap));
            // Swap is not part of the budget; without this the cap could be paged past.
            out.push(("", "memory.swap.max", "0".into()));
            let pids = value_or(b.pids, "max");
            out.push(("", "pids.max", pids));
        }
    }
    out
}

impl Hierarchy {
    /// The hierarchy of this machine: v2 when `/sys/fs/cgroup` is cgroup2, v1 when it has a
    /// `memory` controller directory; `None` otherwise.
    pub fn detect() -> Option<Hierarchy> {
        let root = PathBuf::from("/sys/fs/cgroup");
        if root.join("cgroup.controllers").exists() {
            Some(Hierarchy::V2 { root })
        } else if root.join("memory").join("memory.limit_in_bytes").exists() {
            Some(Hierarchy::V1 { root })
        } else {
            None
        }
    }

    /// Directory of the workspace cgroup for `controller` (ignored on v2).
    pub fn dir(&self, name: &str, controller: &str) -> PathBuf {
        match self {
            Hierarchy::V1 { root } => root.join(controller).join(name),
            Hierarchy::V2 { root } => root.join(name),
        }
    }

    fn dirs(&self, name: &str) -> Vec<PathBuf> {
        match self {
            Hierarchy::V1 { .. } => V1_CONTROLLERS.iter().map(|c| self.dir(name, c)).collect(),
            Hierarchy::V2 { .. } => vec![self.dir(name, "")],
        }
    }

    /// Creates the cgroup (idempotent) and writes `s` into it.
    pub fn apply(&self, name: &str, s: &Sizing) -> io::Result<()> {
        for d in self.dirs(name) {
            std::fs::create_dir_all(&d)?;
        }
        if let Hierarchy::V2 { root } = self {
            enable(root, &["cpu", "memory", "pids"])?;
        }
        for (ctl, file, value) in files_for(self, s) {
            let path = self.dir(name, ctl).join(file);
            if file == "memory.swap.max" && !path.exists() {
                continue;
            }
            if file == "memory.limit_in_bytes" {
                write_v1_memory(&path, &value)?;
                continue;
            }
            write(&path, &value)?;
        }
        self.apply_container_half(name, s)
    }

    /// A docker-compose workspace's containers (child `containers`) keep half of the
    /// workspace's burst memory and pids when the burst limit changes.
    fn apply_container_half(&self, name: &str, s: &Sizing) -> io::Result<()> {
        let child = format!("{name}/containers");
        let (Some(mem), Some(pids)) = (s.burst_limit.memory_bytes, s.burst_limit.pids) else {
            return Ok(());
        };
        match self {
            Hierarchy::V1 { .. } => {
                let m = self.dir(&child, "memory");
                if m.is_dir() {
                    write_v1_memory(&m.join("memory.limit_in_bytes"), &(mem / 2).to_string())?;
                }
                let p = self.dir(&child, "pids");
                if p.is_dir() {
                    write(&p.join("pids.max"), &(pids / 2).max(1).to_string())?;
                }
            }
            Hierarchy::V2 { .. } => {
                let d = self.dir(&child, "");
                if d.is_dir() {
                    write(&d.join("memory.max"), &(mem / 2).to_string())?;
                    write(&d.join("pids.max"), &(pids / 2).max(1).to_string())?;
                }
            }
        }
        Ok(())
    }

    /// Whether the workspace cgroup exists.
    pub fn exists(&self, name: &str) -> bool {
        self.dirs(name).iter().all(|d| d.is_dir())
    }

    /// Removes the cgroup (its processes must be gone) with its children; on v1 from every
    /// mounted hierarchy, since a docker-compose workspace's daemon makes the container
    /// parent on all of them. Missing directories are fine.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let mut dirs = self.dirs(name);
        if let Hierarchy::V1 { root } = self {
            dirs.extend(
                std::fs::read_dir(root)?
                    .flatten()
                    .map(|e| e.path().join(name)),
            );
        }
        for d in dirs {
            remove_tree(&d)?;
        }
        Ok(())
    }

    /// Moves the calling thread into the cgroup (v1: `tasks`). A process forked by this
    /// thread starts inside it, before it runs anything.
    pub fn join_current_thread(&self, name: &str) -> io::Result<()> {
        let tid = nix::unistd::gettid().to_string();
        match self {
            Hierarchy::V1 { .. } => {
                for d in self.dirs(name) {
                    write(&d.join("tasks"), &tid)?;
                }
                Ok(())
            }
            // A v2 domain cgroup takes whole processes only; see `move_process`.
            Hierarchy::V2 { .. } => Err(io::Error::other("v2 moves processes, not threads")),
        }
    }

    /// Moves a whole process into the cgroup (`cgroup.procs`).
    pub fn move_process(&self, name: &str, pid: u32) -> io::Result<()> {
        for d in self.dirs(name) {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing `{value}` to {}: {e}", path.display()),
        )
    })
}

/// memory+swap must stay >= memory on v1: lowering writes memory first, raising swap first.
fn write_v1_memory(limit: &Path, value: &str) -> io::Result<()> {
    let memsw = limit.with_file_name("memory.memsw.limit_in_bytes");
    if !memsw.exists() {
        return write(limit, value);
    }
    write(limit, value)
        .and_then(|()| write(&memsw, value))
        .or_else(|_| write(&memsw, value).and_then(|()| write(limit, value)))
}

fn enable(dir: &Path, controllers: &[&str]) -> io::Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    let have = std::fs::read_to_string(&ctl).unwrap_or_default();
    for c in controllers {
        if !have.split_whitespace().any(|x| x == *c) {
            write(&ctl, &format!("+{c}"))?;
        }
    }
    Ok(())
}

/// Removes a cgroup directory and its child cgroups, deepest first (cgroupfs only allows
/// `rmdir`).
fn remove_tree(d: &Path) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(d) else {
        return Ok(());
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&e.path())?;
        }
    }
    match std::fs::remove_dir(d) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Usage measured from the cgroup.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Usage {
    /// Cumulative CPU time of every process of the workspace.
    #[serde(alias = "cpuUsageUsec")]
    pub cpu_usage_usec: u64,
    /// CFS periods in which the workspace hit its CPU cap.
    #[serde(alias = "cpuThrottledPeriods")]
    pub cpu_throttled_periods: u64,
    #[serde(alias = "memoryBytes")]
    pub memory_bytes: u64,
    #[serde(alias = "memoryPeakBytes")]
    pub memory_peak_bytes: Option<u64>,
    /// Processes killed by the OOM killer because of the memory cap.
    #[serde(alias = "oomKills")]
    pub oom_kills: u64,
    /// Times the memory cap was reached (v1 `failcnt`, v2 `memory.events` `max`).
    #[serde(alias = "memoryCapHits")]
    pub memory_cap_hits: u64,
    pub pids: u64,
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// `key value` lines (`cpu.stat`, `memory.events`, `memory.oom_control`).
fn keyed(p: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(p).ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
    })
}

impl Hierarchy {
    /// Reads usage; `None` when the cgroup does not exist.
    pub fn usage(&self, name: &str) -> Option<Usage> {
        if !self.exists(name) {
            return None;
        }
        Some(match self {
            Hierarchy::V1 { .. } => {
                let mem = self.dir(name, "memory");
                Usage {
                    cpu_usage_usec: read_u64(&self.dir(name, "cpuacct").join("cpuacct.usage"))
                        .unwrap_or(0)
                        / 1000,
                    cpu_throttled_periods: keyed(
                        &self.dir(name, "cpu").join("cpu.stat"),
                        "nr_throttled",
                    )
                    .unwrap_or(0),
                    memory_bytes: read_u64(&mem.join("memory.usage_in_bytes")).unwrap_or(0),
                    memory_peak_bytes: read_u64(&mem.join("memory.max_usage_in_bytes")),
                    oom_kills: keyed(&mem.join("memory.oom_control"), "oom_kill").unwrap_or(0),
                    memory_cap_hits: read_u64(&mem.join("memory.failcnt")).unwrap_or(0),
                    pids: read_u64(&self.dir(name, "pids").join("pids.current")).unwrap_or(0),
                }
            }
            Hierarchy::V2 { .. } => {
                let d = self.dir(name, "");
                Usage {
                    cpu_usage_usec: keyed(&d.join("cpu.stat"), "usage_usec").unwrap_or(0),
                    cpu_throttled_periods: keyed(&d.join("cpu.stat"), "nr_throttled").unwrap_or(0),
                    memory_bytes: read_u64(&d.join("memory.current")).unwrap_or(0),
                    memory_peak_bytes: read_u64(&d.join("memory.peak")),
                    oom_kills: keyed(&d.join("memory.events"), "oom_kill").unwrap_or(0),
                    memory_cap_hits: keyed(&d.join("memory.events"), "max").unwrap_or(0),
                    pids: read_u64(&d.join("pids.current")).unwrap_or(0),
                }
            }
        })
    }
}

/// For a spawn from a fresh thread (as `netns::spawn_in` makes): joins the workspace cgroup
/// `name` when it exists on a v1 hierarchy, so the child starts inside it. Nothing to do
/// when there is no such cgroup (not root, or no resources).
pub fn join_for_spawn(name: &str) -> io::Result<()> {
    match Hierarchy::detect() {
        Some(h @ Hierarchy::V1 { .. }) if h.exists(name) && nix::unistd::geteuid().is_root() => {
            h.join_current_thread(name)
        }
        _ => Ok(()),
    }
}

/// The workspace's burst memory and pids as its cgroup enforces them (`None`: no cgroup).
pub fn burst_of(name: &str) -> Option<(Option<u64>, Option<u64>)> {
    let h = Hierarchy::detect()?;
    if !h.exists(name) {
        return None;
    }
    let (mem, pids) = match &h {
        Hierarchy::V1 { .. } => (
            h.dir(name, "memory").join("memory.limit_in_bytes"),
            h.dir(name, "pids").join("pids.max"),
        ),
        Hierarchy::V2 { .. } => (
            h.dir(name, "").join("memory.max"),
            h.dir(name, "").join("pids.max"),
        ),
    };
    // "max" and v1's near-2^63 "unlimited" both read as no limit.
    let mem = read_u64(&mem).filter(|v| *v < (1 << 62));
    Some((mem, read_u64(&pids)))
}

/// Spawns with `spawn` so that the new process starts inside the workspace cgroup `name`.
/// v1: from a short-lived thread that joined the cgroup first (as `netns::spawn_in` does for
/// namespaces), so nothing runs outside it. v2: the process is moved right after the fork.
pub fn spawn_joined<T: Send>(
    h: &Hierarchy,
    name: &str,
    spawn: impl FnOnce() -> io::Result<T> + Send,
    pid_of: impl Fn(&T) -> Option<u32>,
) -> io::Result<T> {
    match h {
        Hierarchy::V1 { .. } => {
            let handle = tokio::runtime::Handle::try_current().ok();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _ctx = handle.as_ref().map(|h| h.enter());
                    h.join_current_thread(name)?;
                    spawn()
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("cgroup spawn thread panicked")))
            })
        }
        Hierarchy::V2 { .. } => {
            let child = spawn()?;
            if let Some(pid) = pid_of(&child) {
                h.move_process(name, pid)?;
            }
            Ok(child)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing() -> Sizing {
        let mut s = Sizing::default();
        s.reservation.cpu_millis = Some(500);
        s.reservation.memory_bytes = Some(32 << 20);
        s.burst_limit.cpu_millis = Some(1500);
        s.burst_limit.memory_bytes = Some(64 << 20);
        s.burst_limit.pids = Some(100);
        s
    }

    fn read(p: PathBuf) -> String {
        std::fs::read_to_string(&p).expect("read").trim().to_owned()
    }

    #[test]
    fn v2_files_on_a_temp_dir() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join("cgroup.subtree_control"), "").expect("seed");
        let h = Hierarchy::V2 {
            root: root.path().to_owned(),
        };
        let d = root.path().join("dockwarden_ws_7");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("memory.swap.max"), "max").expect("seed");
        h.apply("dockwarden_ws_7", &sizing()).expect("applies");
        assert_eq!(read(d.join("cpu.max")), "150000 100000");
        assert_eq!(read(d.join("cpu.weight")), "20");
        assert_eq!(read(d.join("memory.low")), "33554432");
        assert_eq!(read(d.join("memory.max")), "67108864");
        assert_eq!(read(d.join("memory.swap.max")), "0");
        assert_eq!(read(d.join("pids.max")), "100");
        // Stub kernel files: the controllers were asked for (each write replaces the file).
        assert!(read(root.path().join("cgroup.subtree_control")).starts_with('+'));
        std::fs::write(
            d.join("cpu.stat"),
            "usage_usec 1500\nnr_periods 4\nnr_throttled 3\n",
        )
        .expect("seed");
        std::fs::write(d.join("memory.current"), "4096\n").expect("seed");
        std::fs::write(
            d.join("memory.events"),
            "low 0\nhigh 0\nmax 7\noom 1\noom_kill 2\n",
        )
        .expect("seed");
        std::fs::write(d.join("pids.current"), "3\n").expect("seed");
        let u = h.usage("dockwarden_ws_7").expect("usage");
        assert_eq!((u.cpu_usage_usec, u.cpu_throttled_periods), (1500, 3));
        assert_eq!(
            (u.memory_bytes, u.oom_kills, u.memory_cap_hits, u.pids),
            (4096, 2, 7, 3)
        );
    }

    #[test]
    fn v1_files_and_unbounded_values() {
        let h = Hierarchy::V1 {
            root: PathBuf::from("/x"),
        };
        let f = files_for(&h, &sizing());
        assert!(f.contains(&("cpu", "cpu.shares", "512".into())));
        assert!(f.contains(&("cpu", "cpu.cfs_quota_us", "150000".into())));
        assert!(f.contains(&("memory", "memory.soft_limit_in_bytes", "33554432".into())));
        assert!(f.contains(&("memory", "memory.limit_in_bytes", "67108864".into())));
        let open = files_for(&h, &Sizing::default());
        assert!(open.contains(&("cpu", "cpu.cfs_quota_us", "-1".into())));
        assert!(open.contains(&("pids", "pids.max", "max".into())));
        let v2 = files_for(
            &Hierarchy::V2 {
                root: PathBuf::from("/x"),
            },
            &Sizing::default(),
        );
        assert!(v2.contains(&("", "cpu.max", "max 100000".into())));
        assert!(v2.contains(&("", "memory.max", "max".into())));
    }
}
