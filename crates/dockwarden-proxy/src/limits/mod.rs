//! The shared memory and pids budget (I/O side): size it from the machine, create the parent
//! cgroup the proxy owns, and set its limits. Every container is then placed under it through
//! `CgroupParent` (see `crate::policy::limits`), so together they cannot use more than the budget.
//!
//! Supported: cgroup v1 and v2 with the `cgroupfs` driver (the proxy writes the cgroup files
//! itself) and the `systemd` driver (a slice configured with `systemctl set-property --runtime`).
//! The driver and version come from the daemon's `GET /info`.

pub mod amount;
pub mod cgroup;
pub mod daemon_config;

use std::path::PathBuf;

pub use amount::Amount;

/// Why the budget could not be put in place; the proxy then refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error("writing `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading `{path}`: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`{path}` does not enforce limits on child cgroups (memory.use_hierarchy is 0)")]
    NoHierarchy { path: PathBuf },
    #[error(
        "the daemon reports cgroup driver `{driver}` version `{version}`, which the budget does not support"
    )]
    Unsupported { driver: String, version: String },
    #[error("`{command}` failed: {reason}")]
    Systemd { command: String, reason: String },
    #[error("invalid cgroup name `{0}`: use lowercase letters, digits and `_`")]
    BadName(String),
}

/// The machine's capacity the shares are taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// `MemTotal` from `/proc/meminfo`, in bytes.
    pub mem_total: u64,
    /// The smaller of `kernel.pid_max` and `kernel.threads-max`.
    pub max_tasks: u64,
}

impl Machine {
    pub fn read() -> Result<Self, BudgetError> {
        let read = |p: &str| {
            std::fs::read_to_string(p).map_err(|source| BudgetError::Read {
                path: PathBuf::from(p),
                source,
            })
        };
        let meminfo = read("/proc/meminfo")?;
        let kb = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        let num = |p: &str| read(p).map(|s| s.trim().parse::<u64>().unwrap_or(0));
        let max_tasks = num("/proc/sys/kernel/pid_max")?.min(num("/proc/sys/kernel/threads-max")?);
        Ok(Self {
            mem_total: kb * 1024,
            max_tasks,
        })
    }
}

/// The budget's two limits, resolved to absolute numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub memory: u64,
    pub pids: u64,
}

impl Sizes {
    pub fn of(machine: Machine, memory: Amount, pids: Amount) -> Self {
        Self {
            memory: memory.resolve(machine.mem_total),
            pids: pids.resolve(machine.max_tasks),
        }
    }
}

/// How the daemon manages cgroups (`GET /info`: `CgroupDriver`, `CgroupVersion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    CgroupfsV1,
    CgroupfsV2,
    SystemdV1,
    SystemdV2,
}

impl Layout {
    /// From the daemon's `/info` strings. Daemons before 20.10 report no version (v1).
    pub fn from_info(driver: &str, version: &str) -> Result<Self, BudgetError> {
        match (driver, version) {
            ("cgroupfs", "1" | "") => Ok(Self::CgroupfsV1),
            ("cgroupfs", "2") => Ok(Self::CgroupfsV2),
            ("systemd", "1" | "") => Ok(Self::SystemdV1),
            ("systemd", "2") => Ok(Self::SystemdV2),
            _ => Err(BudgetError::Unsupported {
                driver: driver.to_owned(),
                version: version.to_owned(),
            }),
        }
    }
}

/// Creates (or re-limits) the parent cgroup `name` and returns the `CgroupParent` value that
/// places a container under it. `root` is the cgroup mount (`/sys/fs/cgroup`).
pub fn install(
    layout: Layout,
    root: &std::path::Path,
    name: &str,
    sizes: Sizes,
) -> Result<String, BudgetError> {
    // `/` nests the budget under a parent (a workspace's own cgroup); no empty or dot segment.
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let nested = name.contains('/');
    if !name.split('/').all(segment_ok)
        || (nested && matches!(layout, Layout::SystemdV1 | Layout::SystemdV2))
    {
        return Err(BudgetError::BadName(name.to_owned()));
    }
    match layout {
        Layout::CgroupfsV1 => cgroup::install_v1(root, name, sizes).map(|()| format!("/{name}")),
        Layout::CgroupfsV2 => cgroup::install_v2(root, name, sizes).map(|()| format!("/{name}")),
        Layout::SystemdV1 | Layout::SystemdV2 => {
            let slice = format!("{name}.slice");
            cgroup::install_systemd(&slice, layout == Layout::SystemdV2, sizes).map(|()| slice)
        }
    }
}
