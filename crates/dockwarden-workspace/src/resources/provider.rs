//! The provider seam: how sizing reaches a workspace. The local provider writes the
//! workspace cgroup (every change `live`) and the worktree's own XFS image (grow `live`,
//! shrink `unsupported`). A VM or cloud provider implements the same trait with its own
//! modes (a restart for a reservation change, say).

use std::path::Path;

use super::cgroup::{self, Hierarchy, Usage};
use super::disk::{Disk, DiskUsage};
use super::model::{Axis, Sizing};
use super::resize::{Mode, Modes};

/// A workspace as the provider sees it.
pub struct Target<'a> {
    pub uid: u32,
    pub worktree: &'a Path,
}

/// Where sizing is enforced.
pub trait Provider: Modes + Send + Sync {
    fn name(&self) -> &'static str;
    /// Makes the workspace's limits `s` (creating what holds them on first use).
    fn apply(&self, t: &Target<'_>, s: &Sizing) -> Result<(), String>;
    /// Whether cpu/memory/pids are enforced, and why not.
    fn compute_enforced(&self) -> Result<(), String>;
    fn disk_enforced(&self) -> Result<(), String>;
    fn usage(&self, t: &Target<'_>) -> Option<Usage>;
    fn disk_usage(&self, t: &Target<'_>) -> Option<DiskUsage>;
    /// Whether the worktree's filesystem is full (read from the filesystem).
    fn disk_full(&self, t: &Target<'_>) -> bool;
    /// Removes what holds the limits (processes must be gone).
    fn remove(&self, t: &Target<'_>);
}

/// cgroups and per-worktree XFS images on this machine.
pub struct LocalProvider {
    pub cgroup: Option<Hierarchy>,
    pub disk: Disk,
}

impl LocalProvider {
    pub fn detect(disk: Disk) -> LocalProvider {
        let root = nix::unistd::geteuid().is_root();
        LocalProvider {
            cgroup: if root { Hierarchy::detect() } else { None },
            disk,
        }
    }
}

impl Modes for LocalProvider {
    fn mode(&self, axis: Axis, up: bool) -> (Mode, Option<String>) {
        match axis {
            Axis::Disk => match (&self.disk, up) {
                (Disk::NotEnforced { reason }, _) => (
                    Mode::Unsupported,
                    Some(format!("disk is not enforced here: {reason}")),
                ),
                (Disk::Images { .. }, false) => (
                    Mode::Unsupported,
                    Some("the local provider cannot shrink a worktree's disk".into()),
                ),
                (Disk::Images { .. }, true) => (Mode::Live, None),
            },
            _ if self.cgroup.is_none() => (
                Mode::Unsupported,
                Some("no writable cgroup hierarchy (the service must run as root)".into()),
            ),
            _ => (Mode::Live, None),
        }
    }

    fn reservation_raises_burst(&self) -> bool {
        false
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    fn apply(&self, t: &Target<'_>, s: &Sizing) -> Result<(), String> {
        if let Some(h) = &self.cgroup {
            cgroup::apply(h, &cgroup::name_of(t.uid), s).map_err(|e| format!("cgroup: {e}"))?;
        }
        if let (true, Some(bytes)) = (self.disk.enforced(), s.burst_limit.disk_bytes)
            && t.worktree.is_dir()
        {
            self.disk.ensure(t.worktree, t.uid, bytes)?;
        }
        Ok(())
    }

    fn compute_enforced(&self) -> Result<(), String> {
        match self.cgroup {
            Some(_) => Ok(()),
            None => Err("no writable cgroup hierarchy (the service must run as root)".into()),
        }
    }

    fn disk_enforced(&self) -> Result<(), String> {
        match &self.disk {
            Disk::Images { .. } => Ok(()),
            Disk::NotEnforced { reason } => Err(reason.clone()),
        }
    }

    fn usage(&self, t: &Target<'_>) -> Option<Usage> {
        cgroup::usage(self.cgroup.as_ref()?, &cgroup::name_of(t.uid))
    }

    fn disk_usage(&self, t: &Target<'_>) -> Option<DiskUsage> {
        super::disk::usage(t.worktree)
    }

    fn disk_full(&self, t: &Target<'_>) -> bool {
        self.disk.is_full(t.worktree)
    }

    fn remove(&self, t: &Target<'_>) {
        if let Some(h) = &self.cgroup {
            let _ = cgroup::remove(h, &cgroup::name_of(t.uid));
        }
        self.disk.remove(t.worktree, t.uid);
    }
}
