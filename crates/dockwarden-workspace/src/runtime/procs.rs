//! Finding and killing a workspace's processes by their uid, via `/proc`.

use std::collections::BTreeMap;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Live processes any of whose uids (real, effective, saved, filesystem) `is_ours` picks,
/// each with the first such uid. A process another user started from a setuid binary of
/// the workspace user acts as that user too, so it is the workspace's as well.
pub(crate) fn pids_matching(is_ours: impl Fn(u32) -> bool) -> Vec<(i32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ent in dir.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(ent.path().join("status")) else {
            continue;
        };
        if status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
        {
            continue;
        }
        let ours = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .into_iter()
            .flat_map(str::split_whitespace)
            .filter_map(|u| u.parse::<u32>().ok())
            // INVARIANT: root's processes are never picked, whatever the caller asks.
            .find(|&u| u != 0 && is_ours(u));
        if let Some(uid) = ours {
            out.push((pid, uid));
        }
    }
    out
}

/// SIGKILLs every process `is_ours` picks until none is left (bounded retries for forks
/// in flight); returns how many were signalled per uid.
pub(crate) async fn kill_matching(is_ours: impl Fn(u32) -> bool) -> BTreeMap<u32, u32> {
    use dockwarden_sys::poll::{Probe, poll_until};
    use std::time::Duration;
    let mut signalled = BTreeMap::new();
    // About 20 rounds, 20 ms apart.
    poll_until(
        Duration::from_millis(400),
        Duration::from_millis(20),
        || {
            let pids = pids_matching(&is_ours);
            let done = pids.is_empty();
            for (pid, uid) in pids {
                if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                    *signalled.entry(uid).or_insert(0) += 1;
                }
            }
            std::future::ready(if done { Probe::Done } else { Probe::Retry })
        },
    )
    .await;
    signalled
}

/// SIGKILLs every process of `uid` until none is left.
pub(crate) async fn kill_uid(uid: u32) -> u32 {
    // INVARIANT: never called with uid 0; the allocator only hands out the configured range.
    if uid == 0 {
        return 0;
    }
    kill_matching(|u| u == uid).await.values().sum()
}
