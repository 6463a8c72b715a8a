//! The one poll-until-deadline loop: probe, and if not done, wait and probe again until a
//! limit passes. Waiting for a socket to answer, a process to go, a cgroup to empty.

use std::time::Duration;

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// What was waited for happened.
    Done,
    /// Not yet: probe again after the interval.
    Retry,
    /// It never will (the process that was to answer died): stop now.
    Stop,
}

/// How a poll ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    Done,
    Stopped,
    TimedOut,
}

impl Polled {
    pub fn is_done(self) -> bool {
        self == Polled::Done
    }
}

/// Probes at once, then every `every`, until a probe answers `Done` or `Stop` or `limit` has
/// passed since the call (the last probe runs at or after the limit, never skipped).
///
/// `probe` does its synchronous part when called and returns the future of the rest
/// (`std::future::ready(..)` when there is none), so the future owns nothing of the closure and
/// stays `Send`.
pub async fn poll_until<F, Fut>(limit: Duration, every: Duration, mut probe: F) -> Polled
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Probe>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match probe().await {
            Probe::Done => return Polled::Done,
            Probe::Stop => return Polled::Stopped,
            Probe::Retry => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Polled::TimedOut;
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn done_stop_and_timeout() {
        let mut n = 0;
        let r = poll_until(Duration::from_secs(1), Duration::from_millis(10), || {
            n += 1;
            std::future::ready(if n == 3 { Probe::Done } else { Probe::Retry })
        })
        .await;
        assert_eq!((r, n), (Polled::Done, 3));
        let r = poll_until(Duration::from_secs(1), Duration::from_millis(10), || {
            std::future::ready(Probe::Stop)
        })
        .await;
        assert_eq!(r, Polled::Stopped);
        let t0 = tokio::time::Instant::now();
        let mut tries = 0;
        let r = poll_until(
            Duration::from_millis(100),
            Duration::from_millis(10),
            || {
                tries += 1;
                std::future::ready(Probe::Retry)
            },
        )
        .await;
        assert_eq!(r, Polled::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(100));
        assert!(
            (2..=12).contains(&tries),
            "{tries} probes in 100 ms every 10 ms"
        );
    }
}
