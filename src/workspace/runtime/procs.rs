//! Finding and killing a workspace's processes by their uid, via `/proc`.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Pids of processes whose real uid is `uid`.
pub(super) fn pids_of_uid(uid: u32) -> Vec<i32> {
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
        let real_uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|u| u.parse::<u32>().ok());
        if real_uid == Some(uid) {
            out.push(pid);
        }
    }
    out
}

/// SIGKILLs every process of `uid` until none is left (bounded retries for forks in flight).
pub(super) async fn kill_uid(uid: u32) -> u32 {
    // INVARIANT: never called with uid 0; the allocator only hands out the configured range.
    if uid == 0 {
        return 0;
    }
    let mut total = 0;
    for _ in 0..20 {
        let pids = pids_of_uid(uid);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                total += 1;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    total
}
