//! The workspace cgroup `dockwarden_ws_<uid>` on cgroup v1 (one directory per controller)
//! and v2 (one directory): which files carry the reservation (floor) and the burst limit
//! (cap), writing them, reading usage back, and starting processes inside it.
//!
//! Floors: `cpu.shares` / `cpu.weight`, `memory.soft_limit_in_bytes` / `memory.low`.
//! Caps: CFS quota / `cpu.max`, `memory.limit_in_bytes` / `memory.max`, `pids.max`.

use std::io;
use std::path::PathBuf;

use serde::Serialize;

use super::model::Sizing;

/// CFS period used for the CPU cap (the kernel default).
pub const CFS_PERIOD_US: u64 = 100_000;

pub use dockwarden_sys::cgroupfs::Hierarchy;
use dockwarden_sys::cgroupfs::{self, keyed, read_u64, write, write_v1_memory};

/// The name of a workspace's cgroup (also the docker runtime's cgroup parent prefix).
pub fn name_of(uid: u32) -> String {
    format!("dockwarden_ws_{uid}")
}

/// v1 controllers a workspace cgroup is made on.
pub const V1_CONTROLLERS: [&str; 5] = ["cpu", "cpuacct", "memory", "pids", "freezer"];

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

fn dirs(h: &Hierarchy, name: &str) -> Vec<PathBuf> {
    h.dirs(name, &V1_CONTROLLERS)
}

/// Creates the workspace cgroup `name` (idempotent) and writes `s` into it.
pub fn apply(h: &Hierarchy, name: &str, s: &Sizing) -> io::Result<()> {
    for d in dirs(h, name) {
        std::fs::create_dir_all(&d)?;
    }
    if let Hierarchy::V2 { root } = h {
        cgroupfs::enable_controllers(root, &["cpu", "memory", "pids"])?;
    }
    for (ctl, file, value) in files_for(h, s) {
        let path = h.dir(name, ctl).join(file);
        if file == "memory.swap.max" && !path.exists() {
            continue;
        }
        if file == "memory.limit_in_bytes" {
            write_v1_memory(&path, &value)?;
            continue;
        }
        write(&path, &value)?;
    }
    apply_container_half(h, name, s)
}

/// A docker-compose workspace's containers (child `containers`) keep half of the
/// workspace's burst memory and pids when the burst limit changes.
fn apply_container_half(h: &Hierarchy, name: &str, s: &Sizing) -> io::Result<()> {
    let child = format!("{name}/containers");
    let (Some(mem), Some(pids)) = (s.burst_limit.memory_bytes, s.burst_limit.pids) else {
        return Ok(());
    };
    match h {
        Hierarchy::V1 { .. } => {
            let m = h.dir(&child, "memory");
            if m.is_dir() {
                write_v1_memory(&m.join("memory.limit_in_bytes"), &(mem / 2).to_string())?;
            }
            let p = h.dir(&child, "pids");
            if p.is_dir() {
                write(&p.join("pids.max"), &(pids / 2).max(1).to_string())?;
            }
        }
        Hierarchy::V2 { .. } => {
            let d = h.dir(&child, "");
            if d.is_dir() {
                write(&d.join("memory.max"), &(mem / 2).to_string())?;
                write(&d.join("pids.max"), &(pids / 2).max(1).to_string())?;
            }
        }
    }
    Ok(())
}

/// Whether the workspace cgroup exists.
pub fn exists(h: &Hierarchy, name: &str) -> bool {
    dirs(h, name).iter().all(|d| d.is_dir())
}

/// Removes the cgroup (its processes must be gone) with its children; on v1 from every
/// mounted hierarchy, since a docker-compose workspace's daemon makes the container
/// parent on all of them. Missing directories are fine.
pub fn remove(h: &Hierarchy, name: &str) -> io::Result<()> {
    let root = match h {
        Hierarchy::V1 { root } | Hierarchy::V2 { root } => root,
    };
    for d in cgroupfs::every_dir(root, name) {
        cgroupfs::remove_tree(&d)?;
    }
    Ok(())
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

/// Reads the workspace cgroup's usage; `None` when it does not exist.
pub fn usage(h: &Hierarchy, name: &str) -> Option<Usage> {
    if !exists(h, name) {
        return None;
    }
    Some(match h {
        Hierarchy::V1 { .. } => {
            let mem = h.dir(name, "memory");
            Usage {
                cpu_usage_usec: read_u64(&h.dir(name, "cpuacct").join("cpuacct.usage"))
                    .unwrap_or(0)
                    / 1000,
                cpu_throttled_periods: keyed(&h.dir(name, "cpu").join("cpu.stat"), "nr_throttled")
                    .unwrap_or(0),
                memory_bytes: read_u64(&mem.join("memory.usage_in_bytes")).unwrap_or(0),
                memory_peak_bytes: read_u64(&mem.join("memory.max_usage_in_bytes")),
                oom_kills: keyed(&mem.join("memory.oom_control"), "oom_kill").unwrap_or(0),
                memory_cap_hits: read_u64(&mem.join("memory.failcnt")).unwrap_or(0),
                pids: read_u64(&h.dir(name, "pids").join("pids.current")).unwrap_or(0),
            }
        }
        Hierarchy::V2 { .. } => {
            let d = h.dir(name, "");
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

/// For a spawn from a fresh thread (as `netns::spawn_in` makes): joins the workspace cgroup
/// `name` when it exists on a v1 hierarchy, so the child starts inside it. Nothing to do
/// when there is no such cgroup (not root, or no resources).
pub fn join_for_spawn(name: &str) -> io::Result<()> {
    match Hierarchy::detect() {
        Some(h @ Hierarchy::V1 { .. }) if exists(&h, name) && nix::unistd::geteuid().is_root() => {
            h.join_current_thread(name, &V1_CONTROLLERS)
        }
        _ => Ok(()),
    }
}

/// The workspace's burst memory and pids as its cgroup enforces them (`None`: no cgroup).
pub fn burst_of(name: &str) -> Option<(Option<u64>, Option<u64>)> {
    let h = Hierarchy::detect()?;
    if !exists(&h, name) {
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

/// Spawns with `spawn` so that the new process starts inside the workspace cgroup `name`
/// ([`Hierarchy::spawn_joined`] over the workspace's controllers).
pub fn spawn_joined<T: Send>(
    h: &Hierarchy,
    name: &str,
    spawn: impl FnOnce() -> io::Result<T> + Send,
    pid_of: impl Fn(&T) -> Option<u32>,
) -> io::Result<T> {
    h.spawn_joined(name, &V1_CONTROLLERS, spawn, pid_of)
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
        apply(&h, "dockwarden_ws_7", &sizing()).expect("applies");
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
        let u = usage(&h, "dockwarden_ws_7").expect("usage");
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
