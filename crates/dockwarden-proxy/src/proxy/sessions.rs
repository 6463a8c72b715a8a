//! BuildKit sessions by id, so that a refused `/build` ends the `/session` tunnel it opened.
//!
//! The 20.10 CLI (`DOCKER_BUILDKIT=1`) dials `/session` and posts `/build?session=<id>` at the
//! same time. If the build fails before the session's `101` arrives, the CLI's `Session.Close`
//! waits for a `Run` that only ends when the connection does: the CLI hangs. The proxy refuses a
//! build in microseconds, so it ends the session's tunnel itself: now, or as soon as it is up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Most remembered sessions; beyond it, ids nobody holds are forgotten.
const CAP: usize = 4096;

/// Close signals for BuildKit sessions, keyed by the id the client chose.
#[derive(Debug, Default)]
pub struct Sessions {
    inner: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Sessions {
    /// The close signal for session `id`, shared by its tunnel and its build.
    pub fn handle(&self, id: &str) -> Arc<Notify> {
        let mut map = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= CAP {
            map.retain(|_, n| Arc::strong_count(n) > 1);
        }
        map.entry(id.to_owned()).or_default().clone()
    }

    /// Ends the session's tunnel: at once if it is up, else as soon as it comes up.
    pub fn end(&self, id: &str) {
        // `notify_one` keeps a permit when nobody waits yet, so a later tunnel sees it.
        self.handle(id).notify_one();
    }

    /// Drops a session whose tunnel has finished.
    pub fn forget(&self, id: &str) {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_end_before_the_tunnel_is_kept() {
        let s = Sessions::default();
        s.end("a");
        let n = s.handle("a");
        tokio::time::timeout(std::time::Duration::from_secs(5), n.notified())
            .await
            .expect("permit kept");
        s.forget("a");
        assert!(s.inner.lock().expect("lock").is_empty());
    }
}
