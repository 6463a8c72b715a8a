//! Resource values as callers send them (JSON): numbers or strings with units, per axis.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::layers::LayerBounds;
use super::model::{Amounts, Axis, Sizing};
use super::resize::Part;
use crate::error::{WsError, WsResult};

// What a create request sends is plain data of the workspace model; parsed here.
pub use crate::model_resources::{AmountsInput, ResourceRequest};

fn one(axis: Axis, v: &Value, at: &str) -> WsResult<u64> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(WsError::Invalid(format!(
                "`{at}.{}`: `{other}` is not an amount",
                axis.as_str()
            )));
        }
    };
    axis.parse(&s)
        .map_err(|e| WsError::Invalid(format!("`{at}.{}`: {e}", axis.as_str())))
}

impl AmountsInput {
    pub fn parse(&self, at: &str) -> WsResult<Amounts> {
        let mut out = Amounts::default();
        for (axis, v) in [
            (Axis::Cpu, &self.cpu),
            (Axis::Memory, &self.memory),
            (Axis::Disk, &self.disk),
            (Axis::Pids, &self.pids),
        ] {
            if let Some(v) = v {
                out.set(axis, Some(one(axis, v, at)?));
            }
        }
        Ok(out)
    }
}

impl ResourceRequest {
    pub fn sizing(&self) -> WsResult<Sizing> {
        let mut s = Sizing {
            reservation: self.reservation.parse("reservation")?,
            burst_limit: self.burst.parse("burst")?,
        };
        if s.reservation.disk_bytes.is_some() || s.reservation.pids.is_some() {
            return Err(WsError::Invalid(
                "disk and pids have no reservation; give `disk` and `burst.pids`".into(),
            ));
        }
        if let Some(d) = &self.disk {
            s.burst_limit.disk_bytes = Some(one(Axis::Disk, d, "resources")?);
        }
        Ok(s)
    }

    pub fn own_layer(&self) -> WsResult<LayerBounds> {
        Ok(LayerBounds {
            ceiling: self.ceiling.parse("ceiling")?,
            approval: self.approval.parse("approval")?,
        })
    }
}

/// A resize request: `{"reservation": {...}, "burst": {...}, "disk": "96MiB"}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResizeInput {
    pub reservation: AmountsInput,
    pub burst: AmountsInput,
    pub disk: Option<Value>,
}

impl ResizeInput {
    /// The changes it asks for, as (part, axis, value).
    pub fn wanted(&self) -> WsResult<Vec<(Part, Axis, u64)>> {
        let r = ResourceRequest {
            reservation: self.reservation.clone(),
            burst: self.burst.clone(),
            disk: self.disk.clone(),
            ..Default::default()
        }
        .sizing()?;
        let mut out = Vec::new();
        // Burst first, so a raise of both applies the cap before the floor.
        for axis in Axis::ALL {
            if let Some(v) = r.burst_limit.get(axis) {
                out.push((Part::BurstLimit, axis, v));
            }
        }
        for axis in [Axis::Cpu, Axis::Memory] {
            if let Some(v) = r.reservation.get(axis) {
                out.push((Part::Reservation, axis, v));
            }
        }
        Ok(out)
    }
}
