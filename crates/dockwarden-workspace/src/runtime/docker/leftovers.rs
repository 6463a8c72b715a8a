//! Processes still inside a workspace's cgroups once its dockerd is gone. A daemon that
//! did not stop its containers in time (SIGKILLed after its grace, or killed with the
//! service) leaves them running under shims that die with it; the cgroup is the complete
//! list of them, so they are found there, killed, and only then is the cgroup removed.

use std::collections::BTreeSet;
use std::time::Duration;

use dockwarden_sys::cgroupfs;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::dockerd::alive;

/// `<root>/<name>` on the unified hierarchy and on every v1 hierarchy that has it.
fn dirs_of(name: &str) -> Vec<std::path::PathBuf> {
    cgroupfs::every_dir(std::path::Path::new(cgroupfs::ROOT), name)
}

/// Every process in cgroup `name` or beneath it, on every hierarchy.
pub fn procs_in(name: &str) -> BTreeSet<i32> {
    cgroupfs::procs_beneath(dirs_of(name))
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
            let _ = cgroupfs::remove_tree(d);
        }
        std::future::ready(if dirs_of(name).is_empty() {
            Probe::Done
        } else {
            Probe::Retry
        })
    })
    .await;
}
