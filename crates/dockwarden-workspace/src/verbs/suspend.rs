//! `suspend` and `resume`: freeze a live workspace's cgroup in place (its processes, the
//! run script's servers, a docker-compose workspace's daemons and containers), snapshot it,
//! and thaw it again. Every other verb thaws a suspended workspace first (`prologue`).

use std::time::{Duration, Instant};

use dockwarden_sys::cgroupfs::{Freezer, Hierarchy};
use dockwarden_sys::poll::{Probe, poll_until};
use tracing::{info, warn};

use crate::error::{WsError, WsResult};
use crate::model::{Suspended, Thawed, Workspace, now_ms};
use crate::resources::cgroup::name_of;
use crate::service::{Service, no_progress};
use crate::status::{Status, Verb};
use crate::store;

/// How long the kernel may take to stop every task (a task in uninterruptible sleep delays
/// it); past it the freeze is undone and the suspension refused.
const FREEZE_WITHIN: Duration = Duration::from_secs(5);

/// The workspace's freezable cgroup, if this machine and workspace have one.
fn freezer_of(ws: &Workspace) -> Option<(Hierarchy, String)> {
    let h = Hierarchy::detect()?;
    let name = name_of(ws.uid);
    h.can_freeze(&name).then_some((h, name))
}

impl Service {
    /// Whether `ws` can be suspended here (it has a cgroup with a freezer).
    pub(crate) fn can_suspend(&self, ws: &Workspace) -> bool {
        freezer_of(ws).is_some()
    }

    /// Freezes a live workspace, then snapshots it; a suspended one is left as is.
    pub async fn suspend(&self, id: &str, reason: &str) -> WsResult<Suspended> {
        let (_op, mut ws) = self.exclusive(id, Verb::Suspend).await?;
        if ws.status == Status::Suspended {
            return Ok(Suspended {
                workspace: ws,
                snapshot_id: None,
                snapshot_error: None,
            });
        }
        let Some((h, name)) = freezer_of(&ws) else {
            return Err(WsError::Invalid(format!(
                "workspace `{id}` cannot be suspended: it has no cgroup freezer (the service runs without root or without cgroups); `kill` stops it instead"
            )));
        };
        freeze(&h, &name).await?;
        // Frozen processes write nothing: the capture sees a quiescent tree.
        let (snapshot_id, snapshot_error) = if self.worktree_valid(&ws) {
            match self.capture_locked(id, "suspend", no_progress()).await {
                Ok(s) => (Some(s.id), None),
                Err(e) => {
                    warn!(workspace.id = %id, error = %e, "snapshot at suspension failed; suspended without it");
                    (None, Some(format!("could not snapshot: {e}")))
                }
            }
        } else {
            (
                None,
                Some("could not snapshot: the worktree is missing or invalid".into()),
            )
        };
        ws = self.store.require(id)?;
        ws.status = Status::Suspended;
        ws.suspended_at_ms = Some(now_ms());
        if let Err(e) = self.store.tx(|tx| store::put_ws(tx, &ws)) {
            // Not recorded as suspended: nothing would ever thaw it.
            let _ = h.thaw(&name);
            return Err(e);
        }
        info!(workspace.id = %id, suspend.reason = reason, "workspace suspended");
        Ok(Suspended {
            workspace: ws,
            snapshot_id,
            snapshot_error,
        })
    }

    /// Thaws a suspended workspace (a no-op for any other) and counts the thaw as activity.
    pub async fn resume(&self, id: &str) -> WsResult<Thawed> {
        let live = self.live(id);
        let _op = live.op.lock().await;
        let mut ws = self.store.require(id)?;
        if ws.status != Status::Suspended {
            return Ok(Thawed {
                workspace: ws,
                thawed: false,
                thaw_us: 0,
            });
        }
        let t0 = Instant::now();
        if let Some((h, name)) = freezer_of(&ws) {
            h.thaw(&name)
                .map_err(|e| WsError::Internal(format!("thawing `{id}`: {e}")))?;
        }
        let thaw_us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
        ws.status = Status::Running;
        ws.suspended_at_ms = None;
        self.store.tx(|tx| store::put_ws(tx, &ws))?;
        live.touch();
        info!(workspace.id = %id, thaw.us = thaw_us, "workspace resumed");
        Ok(Thawed {
            workspace: ws,
            thawed: true,
            thaw_us,
        })
    }

    /// For the prologue of every verb but `suspend`: thaws `id` first if it is suspended.
    pub(crate) async fn thaw_if_suspended(&self, id: &str) -> WsResult<()> {
        if self
            .store
            .get(id)?
            .is_some_and(|w| w.status == Status::Suspended)
        {
            self.resume(id).await?;
        }
        Ok(())
    }
}

/// Freezes cgroup `name` and waits until every task has stopped; thaws it again and fails
/// if that takes longer than [`FREEZE_WITHIN`].
async fn freeze(h: &Hierarchy, name: &str) -> WsResult<()> {
    let err = |e: std::io::Error| WsError::Internal(format!("freezing cgroup `{name}`: {e}"));
    h.freeze(name).map_err(err)?;
    let frozen = poll_until(FREEZE_WITHIN, Duration::from_millis(5), || {
        std::future::ready(match h.freezer(name) {
            Ok(Freezer::Frozen) => Probe::Done,
            _ => Probe::Retry,
        })
    })
    .await;
    if frozen.is_done() {
        return Ok(());
    }
    let _ = h.thaw(name);
    Err(WsError::Internal(format!(
        "cgroup `{name}` did not freeze within {} s (a task in uninterruptible sleep?); left running",
        FREEZE_WITHIN.as_secs()
    )))
}
