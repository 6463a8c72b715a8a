//! Background upkeep: the maximum runtime, idle suspension then archive, and refreshing the
//! baseline snapshot when it is missing or stale. Captures are deferred while setup or an
//! exclusive operation holds the lock.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::model::{Workspace, now_ms};
use crate::service::{Service, no_progress};
use crate::status::Status;

impl Service {
    /// Runs upkeep every `cfg.tick` until the task is dropped.
    pub async fn upkeep_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.cfg.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // Taken again once a full disk has room (it was given up to close a journal).
            self.store.reserve.ensure();
            let Ok(all) = self.store.list() else { continue };
            for ws in all {
                if ws.status.is_live() {
                    self.upkeep_one(&ws).await;
                } else if ws.status == Status::Suspended {
                    self.upkeep_suspended(&ws).await;
                }
            }
        }
    }

    async fn upkeep_one(&self, ws: &Workspace) {
        let live = self.live(&ws.id);
        if let Ok(spec) = self.run_spec(ws, &std::collections::BTreeMap::new())
            && !self.runtime.is_up(&spec)
        {
            self.heal_runtime_in_upkeep(ws).await;
            return;
        }
        self.heal_run_script(ws).await;
        if !self.worktree_valid(ws) {
            // Healed here too, not only when a call comes: the run script needs its tree.
            if let Ok(_op) = live.op.try_lock() {
                let healed = self
                    .heal_locked(&ws.id, "worktree missing or invalid (found by upkeep)")
                    .await;
                if let Err(e) = healed {
                    warn!(workspace.id = %ws.id, error = %e, "restoring the worktree failed");
                }
            }
            return;
        }
        if let Some(ran) = ran_past_max(ws, now_ms()) {
            info!(workspace.id = %ws.id, live.secs = ran.as_secs(), "maximum runtime reached; stopping");
            if let Err(e) = self.kill(&ws.id, "max_runtime", no_progress()).await {
                warn!(workspace.id = %ws.id, error = %e, "stop at the maximum runtime failed");
            }
            return;
        }
        let idle = live.idle_for();
        if idle >= Duration::from_secs(ws.idle_timeout_secs) {
            self.on_idle(ws, idle).await;
            return;
        }
        if !self.baseline_due(ws) {
            return;
        }
        // Deferred, not waited for: setup and exclusive operations hold this lock.
        let Ok(_op) = live.op.try_lock() else {
            debug!(workspace.id = %ws.id, "baseline capture deferred: workspace busy");
            return;
        };
        if let Err(e) = self.capture_locked(&ws.id, "baseline", no_progress()).await {
            warn!(workspace.id = %ws.id, error = %e, "baseline refresh failed");
        }
    }

    /// Idle: suspended in place where it can be and `archive_after_secs` is not zero,
    /// archived (stopped with a snapshot) otherwise.
    async fn on_idle(&self, ws: &Workspace, idle: Duration) {
        if ws.archive_after_secs > 0 && self.can_suspend(ws) {
            info!(workspace.id = %ws.id, idle.secs = idle.as_secs(), "idle timeout; suspending");
            match self.suspend(&ws.id, "idle").await {
                Ok(_) => return,
                Err(e) => {
                    warn!(workspace.id = %ws.id, error = %e, "idle suspension failed; archiving")
                }
            }
        }
        info!(workspace.id = %ws.id, idle.secs = idle.as_secs(), "idle timeout; stopping");
        if let Err(e) = self.kill(&ws.id, "idle", no_progress()).await {
            warn!(workspace.id = %ws.id, error = %e, "idle stop failed");
        }
    }

    /// A suspended workspace is archived (thawed, then stopped with a snapshot, reason
    /// `idle`) once it has been suspended `archive_after_secs`, or at its maximum runtime.
    async fn upkeep_suspended(&self, ws: &Workspace) {
        let now = now_ms();
        let reason = if ran_past_max(ws, now).is_some() {
            "max_runtime"
        } else if suspended_past(ws, now) {
            "idle"
        } else {
            return;
        };
        info!(workspace.id = %ws.id, kill.reason = reason, "archiving a suspended workspace");
        if let Err(e) = self.kill(&ws.id, reason, no_progress()).await {
            warn!(workspace.id = %ws.id, error = %e, "archiving a suspended workspace failed");
        }
    }

    /// True when the workspace has no snapshot, or its newest is older than the limit.
    fn baseline_due(&self, ws: &Workspace) -> bool {
        let Ok(snaps) = self.store.snapshots_of(&ws.id) else {
            return false;
        };
        match snaps.first() {
            None => true,
            Some((s, _)) => {
                let age = Duration::from_millis(now_ms().saturating_sub(s.created_at_ms));
                // Stale only if something happened since: unchanged workspaces keep theirs.
                age >= self.cfg.baseline_stale_after && self.live(&ws.id).idle_for() < age
            }
        }
    }
}

/// How long `ws` has been live, when that is its maximum runtime or more.
fn ran_past_max(ws: &Workspace, now: u64) -> Option<Duration> {
    let max = Duration::from_secs(ws.max_runtime_secs?);
    let ran = Duration::from_millis(now.saturating_sub(ws.live_since_ms?));
    (ran >= max).then_some(ran)
}

/// Whether `ws` has been suspended `archive_after_secs` or more.
fn suspended_past(ws: &Workspace, now: u64) -> bool {
    ws.suspended_at_ms.is_some_and(|at| {
        Duration::from_millis(now.saturating_sub(at)) >= Duration::from_secs(ws.archive_after_secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored workspace record in `status`, as an older service wrote it (no optional keys).
    fn workspace(status: &str) -> Workspace {
        serde_json::from_value(serde_json::json!({
            "id": "w", "status": status, "uid": 1, "created_at_ms": 0, "metadata": {},
            "env": {}, "secret_names": [], "repo": null, "revision": null,
            "from_snapshot": null, "idle_timeout_secs": 600, "latest_snapshot": null,
            "setup": null, "last_recovery": null
        }))
        .expect("workspace")
    }

    #[test]
    fn the_maximum_runtime_counts_from_when_the_workspace_became_live() {
        let mut ws = workspace("running");
        // No limit, or not live: never.
        assert_eq!(ran_past_max(&ws, 10_000_000), None);
        ws.max_runtime_secs = Some(3);
        assert_eq!(ran_past_max(&ws, 10_000_000), None);
        ws.live_since_ms = Some(1_000);
        assert_eq!(ran_past_max(&ws, 3_999), None);
        assert_eq!(ran_past_max(&ws, 4_000), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_suspended_workspace_is_archived_after_its_archive_time() {
        let mut ws = workspace("suspended");
        ws.archive_after_secs = 2;
        assert!(!suspended_past(&ws, 10_000), "not suspended: never");
        ws.suspended_at_ms = Some(5_000);
        assert!(!suspended_past(&ws, 6_999));
        assert!(suspended_past(&ws, 7_000));
    }
}
