//! Writing the parent cgroup's limits: cgroupfs v1 and v2 directly, systemd through a slice.

use std::path::Path;
use std::process::Command;

use dockwarden_sys::cgroupfs;

use super::{BudgetError, Sizes};

fn write(path: &Path, value: &str) -> Result<(), BudgetError> {
    cgroupfs::write(path, value).map_err(|source| BudgetError::Write {
        path: path.to_owned(),
        source,
    })
}

fn mkdir(path: &Path) -> Result<(), BudgetError> {
    std::fs::create_dir_all(path).map_err(|source| BudgetError::Write {
        path: path.to_owned(),
        source,
    })
}

/// cgroup v1: `<root>/memory/<name>` and `<root>/pids/<name>`.
pub fn install_v1(root: &Path, name: &str, sizes: Sizes) -> Result<(), BudgetError> {
    let mem = root.join("memory").join(name);
    mkdir(&mem)?;
    let hierarchy = mem.join("memory.use_hierarchy");
    // INVARIANT: limits only bind children when hierarchical accounting is on (always on since
    // Linux 5.16; older kernels inherit the parent's setting, which may be off).
    let hierarchical = || std::fs::read_to_string(&hierarchy).map(|v| v.trim() == "1");
    if hierarchical().is_ok_and(|on| !on) {
        let _ = write(&hierarchy, "1");
        if !hierarchical().unwrap_or(false) {
            return Err(BudgetError::NoHierarchy { path: mem });
        }
    }
    let limit = mem.join("memory.limit_in_bytes");
    cgroupfs::write_v1_memory(&limit, &sizes.memory.to_string()).map_err(|source| {
        BudgetError::Write {
            path: limit.clone(),
            source,
        }
    })?;
    let pids = root.join("pids").join(name);
    mkdir(&pids)?;
    write(&pids.join("pids.max"), &sizes.pids.to_string())
}

/// cgroup v2: `<root>/<name>` with the memory and pids controllers enabled for it and its children.
pub fn install_v2(root: &Path, name: &str, sizes: Sizes) -> Result<(), BudgetError> {
    enable_controllers(root)?;
    let dir = root.join(name);
    mkdir(&dir)?;
    write(&dir.join("memory.max"), &sizes.memory.to_string())?;
    // Swap is not part of the share on v2; without this a container could page out past it.
    if dir.join("memory.swap.max").exists() {
        write(&dir.join("memory.swap.max"), "0")?;
    }
    write(&dir.join("pids.max"), &sizes.pids.to_string())?;
    enable_controllers(&dir)
}

fn enable_controllers(dir: &Path) -> Result<(), BudgetError> {
    cgroupfs::enable_controllers(dir, &["memory", "pids"]).map_err(|source| BudgetError::Write {
        path: dir.join("cgroup.subtree_control"),
        source,
    })
}

/// systemd driver: a slice with `MemoryMax`/`MemoryLimit` and `TasksMax`, started so its cgroup exists.
pub fn install_systemd(slice: &str, v2: bool, sizes: Sizes) -> Result<(), BudgetError> {
    let mem = if v2 {
        format!("MemoryMax={}", sizes.memory)
    } else {
        format!("MemoryLimit={}", sizes.memory)
    };
    let tasks = format!("TasksMax={}", sizes.pids);
    systemctl(&["set-property", "--runtime", slice, &mem, &tasks])?;
    systemctl(&["start", slice])
}

fn systemctl(args: &[&str]) -> Result<(), BudgetError> {
    let command = format!("systemctl {}", args.join(" "));
    let out = Command::new("systemctl")
        .args(args)
        .output()
        .map_err(|e| BudgetError::Systemd {
            command: command.clone(),
            reason: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BudgetError::Systemd {
            command,
            reason: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).expect("read").trim().to_owned()
    }

    #[test]
    fn v1_writes_memory_swap_and_pids_limits() {
        let root = tempfile::tempdir().expect("tempdir");
        let mem = root.path().join("memory/dwx");
        std::fs::create_dir_all(&mem).expect("mkdir");
        std::fs::write(
            mem.join("memory.memsw.limit_in_bytes"),
            "9223372036854771712",
        )
        .expect("seed");
        std::fs::write(mem.join("memory.use_hierarchy"), "1").expect("seed");
        install_v1(
            root.path(),
            "dwx",
            Sizes {
                memory: 1 << 26,
                pids: 100,
            },
        )
        .expect("installs");
        assert_eq!(read(&mem.join("memory.limit_in_bytes")), "67108864");
        assert_eq!(read(&mem.join("memory.memsw.limit_in_bytes")), "67108864");
        assert_eq!(read(&root.path().join("pids/dwx/pids.max")), "100");
    }

    #[test]
    fn v2_enables_controllers_and_writes_limits() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::write(root.path().join("cgroup.subtree_control"), "cpu").expect("seed");
        install_v2(
            root.path(),
            "dwx",
            Sizes {
                memory: 1 << 26,
                pids: 100,
            },
        )
        .expect("installs");
        assert_eq!(read(&root.path().join("dwx/memory.max")), "67108864");
        assert_eq!(read(&root.path().join("dwx/pids.max")), "100");
    }
}
