//! A runtime part that dies is restarted: upkeep notices a live workspace whose runtime is
//! not up (a docker-compose workspace's private dockerd, containerd or dockwarden proxy gone;
//! a standard workspace's network namespace or its host link gone) within a tick, and
//! restarts the runtime on the same data root, as `restart` does. The restart is recorded as the workspace's `last_recovery`, with what died
//! and what was lost. A call that finds the runtime down waits for the restart.
//!
//! A part that dies again at once is a crash loop: a restart that fails, or one needed again
//! within `FLAPPING` of the previous, counts as a failure, and failures back off (1 s, 2 s, 4 s, ... 60 s). While
//! backing off, calls get `runtime_down` naming what died and its log.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::model::{RecoveryReport, Workspace};
use crate::service::Service;
use crate::store;

/// A part that dies this soon after its restart keeps dying: the restart counts as failed.
pub const FLAPPING: Duration = Duration::from_secs(3);
/// How long a call waits for a daemon listed as running but not answering to either answer
/// or be seen dead.
const SETTLE_WITHIN: Duration = Duration::from_secs(3);
/// The longest wait between two restarts of a crash loop.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What `heal` remembers of a workspace's restarts (in memory, per service run).
#[derive(Debug, Default)]
pub struct HealState {
    /// Consecutive failed or flapping restarts.
    pub failures: u32,
    /// No restart before this instant (back-off).
    pub next_try: Option<Instant>,
    pub last_restart: Option<Instant>,
    /// Why the last restart failed, with the parts that were down.
    pub last_error: Option<(String, String)>,
}

// Every runtime is watched. The docker-compose runtime's parts are dockerd, containerd, the
// proxy and its namespace; a standard workspace's part is its network namespace with its host
// link (none where the service does not isolate networks: then it is always up). The run
// script is watched apart (`heal_run_script`).

/// The wait after `failures` consecutive failures: 1 s doubling, at most `MAX_BACKOFF`.
pub fn backoff(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    Duration::from_secs(1u64 << (failures - 1).min(6)).min(MAX_BACKOFF)
}

impl Service {
    /// Upkeep: restarts the runtime of a live workspace whose parts died, unless an exclusive
    /// operation holds it (then a later tick does) or a crash loop is backing off.
    pub(crate) async fn heal_runtime_in_upkeep(&self, ws: &Workspace) {
        let live = self.live(&ws.id);
        let Ok(_op) = live.op.clone().try_lock_owned() else {
            return;
        };
        if let Err(e) = self.heal_runtime_locked(&ws.id).await {
            warn!(workspace.id = %ws.id, error = %e, "runtime restart failed");
        }
    }

    /// Before a call: a live workspace whose runtime is down is restarted first (waiting for
    /// a restart already under way). Returns the report of a restart it made or waited for.
    pub(crate) async fn heal_runtime_for_call(
        &self,
        ws: &Workspace,
    ) -> WsResult<Option<RecoveryReport>> {
        if !ws.status.is_live() {
            return Ok(None);
        }
        let spec = self.run_spec(ws, &BTreeMap::new())?;
        if self.runtime.is_up(&spec) && self.settled_up(&spec).await {
            return Ok(None);
        }
        let live = self.live(&ws.id);
        let _op = live.op.lock().await;
        self.heal_runtime_locked(&ws.id).await
    }

    /// For a call that found the runtime's processes up: whether it really is. A daemon just
    /// killed may still be listed as running for a moment while it no longer answers; the
    /// call waits (at most `SETTLE_WITHIN`) until it answers, or is seen dead and is healed.
    async fn settled_up(&self, spec: &crate::runtime::RunSpec) -> bool {
        use dockwarden_sys::poll::{Probe, poll_until};
        if self.runtime.answers(spec).await {
            return true;
        }
        poll_until(SETTLE_WITHIN, Duration::from_millis(20), || async {
            if !self.runtime.is_up(spec) {
                Probe::Stop
            } else if self.runtime.answers(spec).await {
                Probe::Done
            } else {
                Probe::Retry
            }
        })
        .await;
        // Seen dead: healed by the caller. Still listed up: the call goes on and its own
        // error says what the daemon did.
        self.runtime.is_up(spec)
    }

    /// Restarts the runtime of `id` if it is still live and down. The caller holds the op lock.
    async fn heal_runtime_locked(&self, id: &str) -> WsResult<Option<RecoveryReport>> {
        let mut ws = self.store.require(id)?;
        if !ws.status.is_live() {
            return Ok(None);
        }
        let spec = self.run_spec(&ws, &BTreeMap::new())?;
        if self.runtime.is_up(&spec) {
            // Restarted while this call waited for the lock: that restart's report.
            return Ok(ws
                .last_recovery
                .clone()
                .filter(|r| r.reason.starts_with(RESTARTED)));
        }
        let dead = self.runtime.dead_parts(&spec).join(", ");
        let live = self.live(id);
        if let Some(refused) = self.backing_off(&live, id, &dead) {
            return Err(refused);
        }
        info!(workspace.id = %id, runtime.dead = %dead, "a runtime part died; restarting the runtime");
        let restarted = async {
            let (_gate, n) = self.stop_all(&ws).await?;
            let stopped = self.runtime.down(&spec).await?;
            self.runtime.up(&spec).await?;
            Ok::<_, WsError>((n, stopped))
        }
        .await;
        let (processes, stopped) = match restarted {
            Ok(x) => x,
            Err(e) => {
                self.record_failure(&live, &dead, &e.to_string());
                warn!(workspace.id = %id, runtime.dead = %dead, error = %e, "runtime restart failed; backing off");
                return Err(WsError::RuntimeDown {
                    id: id.to_string(),
                    parts: dead,
                    detail: e.to_string(),
                });
            }
        };
        self.record_restart(&live);
        let mut lost = Vec::new();
        if processes > 0 {
            lost.push(format!(
                "{processes} process(es) or process group(s) of the workspace"
            ));
        }
        lost.extend(stopped.into_iter().filter(|s| s.starts_with("container ")));
        let kept =
            "the runtime was restarted on the same data root; files, images and volumes are kept";
        let report = RecoveryReport::restarted(
            format!("{RESTARTED}: {dead}"),
            if lost.is_empty() {
                kept.into()
            } else {
                format!("{kept}; stopped with it: {}", lost.join(", "))
            },
        );
        ws.last_recovery = Some(report.clone());
        self.store.tx(|tx| store::put_ws(tx, &ws))?;
        self.start_run_script(&ws);
        info!(workspace.id = %id, "runtime restarted");
        Ok(Some(report))
    }

    /// `Some(runtime_down)` while a crash loop backs off.
    fn backing_off(&self, live: &crate::service::WsLive, id: &str, dead: &str) -> Option<WsError> {
        let st = live.heal.lock().ok()?;
        let until = st.next_try.filter(|t| *t > Instant::now())?;
        let (_, detail) = st.last_error.clone().unwrap_or_default();
        Some(WsError::RuntimeDown {
            id: id.to_string(),
            parts: dead.to_string(),
            detail: format!(
                "{} restart(s) failed or died at once{}; next try in {} ms",
                st.failures,
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(" (last: {detail})")
                },
                until.saturating_duration_since(Instant::now()).as_millis()
            ),
        })
    }

    fn record_failure(&self, live: &crate::service::WsLive, dead: &str, error: &str) {
        if let Ok(mut st) = live.heal.lock() {
            st.failures += 1;
            st.next_try = Some(Instant::now() + backoff(st.failures));
            st.last_error = Some((dead.to_string(), error.to_string()));
        }
    }

    fn record_restart(&self, live: &crate::service::WsLive) {
        if let Ok(mut st) = live.heal.lock() {
            let flapping = st.last_restart.is_some_and(|t| t.elapsed() < FLAPPING);
            st.last_restart = Some(Instant::now());
            if flapping {
                // It came up and died again: back off before the next restart.
                st.failures += 1;
                st.next_try = Some(Instant::now() + backoff(st.failures));
                warn!(
                    heal.failures = st.failures,
                    "the runtime keeps dying; backing off"
                );
            } else {
                st.failures = 0;
                st.next_try = None;
                st.last_error = None;
            }
        }
    }
}

/// How a restart's recovery report begins.
pub const RESTARTED: &str = "runtime restarted after a part died";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_doubling_to_a_minute() {
        let secs: Vec<u64> = (0..10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
