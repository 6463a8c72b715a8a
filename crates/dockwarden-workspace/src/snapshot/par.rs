//! A few worker threads over a slice, for the I/O-bound loops of captures and restores.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::error::WsResult;

/// How many threads a capture or restore uses: file system calls block, so more than the
/// processors, but few enough not to thrash a small machine.
pub(super) fn workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cpus * 2).clamp(2, 8)
}

/// Runs `f` on every item, spread over [`workers`] threads in chunks; stops at the first
/// error and returns it.
pub(super) fn for_each<T: Sync>(
    items: &[T],
    chunk: usize,
    f: impl Fn(&T) -> WsResult<()> + Sync,
) -> WsResult<()> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let error = Mutex::new(None);
    let n = workers().min(items.len().div_ceil(chunk.max(1))).max(1);
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let start = next.fetch_add(chunk, Ordering::Relaxed);
                    if start >= items.len() {
                        break;
                    }
                    for item in &items[start..(start + chunk).min(items.len())] {
                        if let Err(e) = f(item) {
                            failed.store(true, Ordering::Relaxed);
                            if let Ok(mut slot) = error.lock() {
                                slot.get_or_insert(e);
                            }
                            return;
                        }
                    }
                }
            });
        }
    });
    match error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}
