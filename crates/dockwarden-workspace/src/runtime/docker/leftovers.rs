//! Processes still inside a workspace's cgroups once its dockerd is gone. A daemon that
//! did not stop its containers in time (SIGKILLed after its grace, or killed with the
//! service) leaves them running under shims that die with it; the cgroup is the complete
//! list of them, so they are found there, killed, and only then is the cgroup removed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::dockerd::alive;

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// `<root>/<name>` on the unified hierarchy and on every v1 hierarchy that has it.
fn dirs_of(name: &str) -> Vec<PathBuf> {
    let root = Path::new(CGROUP_ROOT);
    let mut dirs = vec![root.join(name)];
    if let Ok(rd) = std::fs::read_dir(root) {
        dirs.extend(rd.flatten().map(|e| e.path().join(name)));
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Pure: the pids of a `cgroup.procs` text, without `own` (the service never kills itself:
/// one of its threads may be in a workspace cgroup for a moment while it spawns).
pub fn parse_procs(text: &str, own: i32) -> Vec<i32> {
    text.lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter(|p| *p > 0 && *p != own)
        .collect()
}

/// Every process in cgroup `name` or beneath it, on every hierarchy.
pub fn procs_in(name: &str) -> BTreeSet<i32> {
    let own = std::process::id() as i32;
    let mut out = BTreeSet::new();
    let mut stack = dirs_of(name);
    while let Some(d) = stack.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(parse_procs(&text, own));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

/// SIGKILLs every process in cgroup `name` (and beneath) until none is left or `within`
/// passes; returns how many were killed.
pub async fn kill_all_in(name: &str, within: Duration) -> usize {
    use dockwarden_sys::poll::{Probe, poll_until};
    let mut killed = BTreeSet::new();
    poll_until(within, Duration::from_millis(20), || {
        let live: Vec<i32> = procs_in(name).into_iter().filter(|p| alive(*p)).collect();
        for &pid in &live {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed.insert(pid);
            }
        }
        std::future::ready(if live.is_empty() {
            Probe::Done
        } else {
            Probe::Retry
        })
    })
    .await;
    killed.len()
}

/// Removes cgroup `name` and its children on every hierarchy, retrying for `within` while
/// a just-killed process is still on its way out (rmdir answers EBUSY until then).
pub async fn remove_cgroups(name: &str, within: Duration) {
    use dockwarden_sys::poll::{Probe, poll_until};
    poll_until(within, Duration::from_millis(20), || {
        for d in &dirs_of(name) {
            rmdir_tree(d);
        }
        std::future::ready(if dirs_of(name).is_empty() {
            Probe::Done
        } else {
            Probe::Retry
        })
    })
    .await;
}

fn rmdir_tree(d: &Path) {
    let Ok(meta) = std::fs::symlink_metadata(d) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    if let Ok(rd) = std::fs::read_dir(d) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(d);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_itself_is_never_listed() {
        assert_eq!(parse_procs("12\n700\n\n 31 \nx\n0\n", 700), vec![12, 31]);
        assert_eq!(parse_procs("", 1), Vec::<i32>::new());
    }
}
