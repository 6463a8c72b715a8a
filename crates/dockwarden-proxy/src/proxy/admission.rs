//! Admission of container creates under the container cap, without serialising the daemon's
//! work: Compose creates a project's containers in parallel, and holding one lock from the
//! count to the daemon's answer made them one at a time (issue 14, `compose up`).
//!
//! A create counts under [`Creates::lock`]: the daemon's containers plus the creates admitted
//! and not yet answered ([`Creates::pending`]). That sum can only overstate the count (a
//! pending create the daemon has already made is in both), so admitting when it is under
//! the cap never overshoots. It may refuse wrongly only near the cap while creates are
//! pending; so a refusal by the cap with creates pending is not final: still holding the
//! lock, the create waits until every pending create has been answered
//! ([`Creates::settled`]) and counts again, exactly. Admitted ([`Creates::admit`]), it
//! releases the lock and holds a [`Slot`] until the daemon has answered.

use tokio::sync::{Mutex, MutexGuard, watch};

/// The creates of one proxy: the counting lock and the creates admitted but not answered.
pub struct Creates {
    lock: Mutex<()>,
    pending: watch::Sender<u64>,
}

impl Default for Creates {
    fn default() -> Self {
        Creates {
            lock: Mutex::new(()),
            pending: watch::Sender::new(0),
        }
    }
}

/// A create admitted and not yet answered by the daemon; counted as pending until dropped.
#[must_use = "the create is pending only while its slot lives"]
pub struct Slot<'a>(&'a Creates);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Creates {
    /// The counting lock: held from the count to [`admit`](Self::admit) or the refusal.
    pub async fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().await
    }

    /// Creates admitted and not yet answered.
    pub fn pending(&self) -> u64 {
        *self.pending.borrow()
    }

    /// Waits until no create is pending. Call with the lock held, so no other is admitted
    /// meanwhile; pending ones never need the lock to finish.
    pub async fn settled(&self) {
        tracing::debug!(
            creates.pending = self.pending(),
            "a refusal by the container cap waits for the pending creates"
        );
        let mut rx = self.pending.subscribe();
        // The sender lives in `self`: the channel cannot close while this borrows it.
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    /// Admits a create counted under `held` (this lock's guard), which is released: the
    /// create is pending until the returned slot is dropped.
    pub fn admit(&self, held: MutexGuard<'_, ()>) -> Slot<'_> {
        let mut before = 0;
        self.pending.send_modify(|n| {
            before = *n;
            *n += 1;
        });
        tracing::debug!(creates.pending = before, "create admitted");
        drop(held);
        Slot(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn slots_are_pending_until_dropped_and_settled_waits_for_the_last() {
        let c = Arc::new(Creates::default());
        assert_eq!(c.pending(), 0);
        c.settled().await;
        let a = c.admit(c.lock().await);
        let b = c.admit(c.lock().await);
        assert_eq!(c.pending(), 2, "the lock was released by each admission");
        let held = c.lock().await;
        let waiter = {
            let c = c.clone();
            tokio::spawn(async move { c.settled().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "two creates pending");
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one create pending");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("settled")
            .expect("task");
        assert_eq!(c.pending(), 0);
        drop(held);
    }
}
