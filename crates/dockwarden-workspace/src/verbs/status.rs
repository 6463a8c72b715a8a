//! `status`: a workspace's resource model, reservation, burst limit, measured health and
//! disk, each separately, with the effective ceilings and the layers that set them, so an
//! agent can tell conditional headroom (up to the burst limit) from a hard wall (the cap,
//! and the ceiling a resize cannot pass).

use serde_json::{Value, json};

use crate::error::WsResult;
use crate::resources::layers::Bound;
use crate::resources::model::Axis;
use crate::resources::{Target, persist};
use crate::service::Service;

fn bound(b: Bound) -> Value {
    json!({ "value": b.value, "set_by": b.set_by })
}

impl Service {
    /// The resource status of `id`.
    pub fn resource_status(&self, id: &str) -> WsResult<Value> {
        let ws = self.store.require(id)?;
        let r = persist::get(&self.store, id)?.unwrap_or_default();
        let eff = self.resources.effective(&r.own);
        let wt = self.worktree(id);
        let target = Target {
            uid: ws.uid,
            worktree: &wt,
        };
        let p = &self.resources.provider;
        let s = &r.sizing;
        let usage = p.usage(&target);
        let compute = p.compute_enforced();
        let disk_on = p.disk_enforced();
        let du = p.disk_usage(&target);
        let ceilings: serde_json::Map<String, Value> = Axis::ALL
            .iter()
            .map(|a| (a.as_str().to_string(), bound(eff.ceiling(*a))))
            .collect();
        let approval: serde_json::Map<String, Value> = Axis::ALL
            .iter()
            .map(|a| (a.as_str().to_string(), bound(eff.approval(*a))))
            .collect();
        let headroom: serde_json::Map<String, Value> = [Axis::Cpu, Axis::Memory]
            .iter()
            .map(|a| {
                let (res, cap) = (s.reservation.get(*a), s.burst_limit.get(*a));
                (
                    a.as_str().to_string(),
                    json!({
                        "guaranteed": res,
                        "conditional_up_to": cap,
                        "hard_wall": cap,
                        "resizable_up_to": eff.ceiling(*a).value,
                    }),
                )
            })
            .collect();
        Ok(json!({
            "id": id,
            "provider": p.name(),
            "resource_model": s.model(),
            "reservation": s.reservation,
            "burst_limit": s.burst_limit,
            "ceilings": ceilings,
            "approval_thresholds": approval,
            "ignored_layer_values": eff.ignored,
            "headroom": headroom,
            "health": {
                "enforced": compute.is_ok(),
                "note": compute.err(),
                "cgroup": crate::resources::cgroup::name_of(ws.uid),
                "usage": usage,
            },
            "disk": {
                "enforced": disk_on.is_ok(),
                "note": disk_on.as_ref().err(),
                // With the pool, statfs of the worktree reports its project quota.
                "size_bytes": if disk_on.is_ok() { du.map(|d| d.size_bytes) } else { None },
                "used_bytes": if disk_on.is_ok() { du.map(|d| d.used_bytes) } else { None },
                "free_bytes": if disk_on.is_ok() { du.map(|d| d.free_bytes) } else { None },
                "configured_bytes": s.burst_limit.disk_bytes,
                "ceiling": bound(eff.ceiling(Axis::Disk)),
            },
        }))
    }
}
