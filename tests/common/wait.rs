//! Waiting for something the system does on its own time (a daemon starting, pins released).

use std::time::{Duration, Instant};

/// How long to wait before trying a condition again: short at first, for what happens at
/// once; longer later, for conditions that run a command each time.
const FIRST: Duration = Duration::from_millis(25);
const MOST: Duration = Duration::from_millis(100);

/// Tries `f` until it holds (true) or `limit` has passed (false).
pub fn poll_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    let mut pause = FIRST;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MOST);
    }
}

/// Waits until `f` holds; panics with `what` after `limit`.
#[track_caller]
pub fn wait_until(limit: Duration, what: &str, f: impl FnMut() -> bool) {
    assert!(poll_until(limit, f), "timed out waiting until {what}");
}
