//! Resource hooks of the lifecycle: sizing at create, applying it again at start, removing
//! it at delete, and growing the disk when a command failed on a full worktree.

use tracing::{info, warn};

use crate::error::WsResult;
use crate::model::Workspace;
use crate::model::{now_ms, random_hex};
use crate::resources::input::ResourceRequest;
use crate::resources::layers::Layer;
use crate::resources::model::Axis;
use crate::resources::persist::{self, RequestRecord};
use crate::resources::resize::{Change, Mode, Part, Plan, grown_disk};
use crate::resources::{DiskEvent, Target};
use crate::service::Service;

impl Service {
    /// Sizes a new workspace (its worktree exists): persists the sizing and applies it.
    pub(crate) fn prepare_resources(
        &self,
        ws: &Workspace,
        req: Option<&ResourceRequest>,
    ) -> WsResult<()> {
        let r = self.resources.initial(req)?;
        self.store.tx(|tx| persist::put(tx, &ws.id, &r))?;
        self.resources
            .apply(ws.uid, &self.worktree(&ws.id), &r.sizing)
    }

    /// Applies every workspace's stored sizing again (after a service or machine restart,
    /// cgroups may be gone).
    pub fn reapply_resources(&self) {
        let Ok(all) = self.store.list() else { return };
        for ws in all {
            match persist::get(&self.store, &ws.id) {
                Ok(Some(r)) => {
                    if let Err(e) = self
                        .resources
                        .apply(ws.uid, &self.worktree(&ws.id), &r.sizing)
                    {
                        warn!(workspace.id = %ws.id, error = %e, "resources not applied");
                    }
                }
                Ok(None) => {}
                Err(e) => warn!(workspace.id = %ws.id, error = %e, "resources unreadable"),
            }
        }
    }

    /// Removes the workspace's cgroup and quota and its rows (its processes are gone).
    pub(crate) fn remove_resources(&self, ws: &Workspace) {
        let wt = self.worktree(&ws.id);
        self.resources.provider.remove(&Target {
            uid: ws.uid,
            worktree: &wt,
        });
        if let Err(e) = persist::delete(&self.store, &ws.id) {
            warn!(workspace.id = %ws.id, error = %e, "resource rows not removed");
        }
    }

    /// After a failed command: when the worktree's filesystem is full, grows the disk by
    /// 50% (whole MiB, capped at the effective ceiling). `None` when the disk was not full.
    pub(crate) fn grow_if_full(&self, ws: &Workspace) -> Option<DiskEvent> {
        let wt = self.worktree(&ws.id);
        let target = Target {
            uid: ws.uid,
            worktree: &wt,
        };
        if !self.resources.provider.disk_full(&target) {
            return None;
        }
        let _g = self.resources.guard().ok()?;
        let mut r = persist::get(&self.store, &ws.id).ok()??;
        let eff = self.resources.effective(&r.own);
        let ceiling = eff.ceiling(Axis::Disk);
        let from = r.sizing.burst_limit.disk_bytes?;
        let mut ev = DiskEvent {
            full: true,
            grew: false,
            from_bytes: from,
            to_bytes: from,
            ceiling_bytes: ceiling.value,
            ceiling_set_by: ceiling.set_by,
            retried: false,
            note: String::new(),
        };
        let Some(to) = grown_disk(from, ceiling.value) else {
            ev.note = format!(
                "the disk is full and no growth is possible: it is at its ceiling {} set by layer `{}`",
                Axis::Disk.show(from),
                ceiling.set_by.map(Layer::as_str).unwrap_or("none")
            );
            return Some(ev);
        };
        r.sizing.burst_limit.disk_bytes = Some(to);
        r.sizing.reservation.disk_bytes = Some(to);
        if let Err(e) = self.resources.apply(ws.uid, &wt, &r.sizing) {
            ev.note = format!(
                "the disk is full; growing it to {} failed: {e}",
                Axis::Disk.show(to)
            );
            return Some(ev);
        }
        let record = RequestRecord {
            id: format!("rr-{}", random_hex(6)),
            workspace_id: ws.id.clone(),
            state: "applied".into(),
            created_at_ms: now_ms(),
            plan: Plan {
                changes: vec![Change {
                    axis: Axis::Disk,
                    part: Part::BurstLimit,
                    from: Some(from),
                    to,
                    direction: "up".into(),
                    mode: Mode::Live,
                    action: "apply".into(),
                    reason: Some("ENOSPC: grown by 50%".into()),
                }],
                approval_needed: Vec::new(),
                target: r.sizing,
            },
            error: None,
        };
        let saved = self.store.tx(|tx| {
            persist::put(tx, &ws.id, &r)?;
            persist::put_request(tx, &record)
        });
        if let Err(e) = saved {
            warn!(workspace.id = %ws.id, error = %e, "grown disk not recorded");
        }
        info!(workspace.id = %ws.id, disk.from = from, disk.to = to, "disk full: grown");
        ev.grew = true;
        ev.to_bytes = to;
        ev.note = format!(
            "the disk was full and grew from {} to {} (ceiling {})",
            Axis::Disk.show(from),
            Axis::Disk.show(to),
            ceiling
                .value
                .map(|c| Axis::Disk.show(c))
                .unwrap_or_else(|| "none".into())
        );
        Some(ev)
    }
}
