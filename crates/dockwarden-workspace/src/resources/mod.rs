//! Resources of a workspace: a reservation (floor) and a burst limit (cap) for CPU, memory
//! and pids, a disk size that grows online, ceilings layered platform > plan > workspace >
//! user > thread, resize with approval, and ENOSPC growth. `docs/resources.md` has the model.
//!
//! Pure parts: `layers` (the fold), `resize` (the plan), `cgroup::files_for`, `config`.
//! Side effects go through `provider::Provider` (`LocalProvider`: cgroups and per-worktree XFS images).

pub mod cgroup;
pub mod config;
pub mod disk;
pub mod disk_clone;
pub mod idmap;
pub mod input;
pub mod layers;
pub mod model;
pub mod persist;
pub mod provider;
pub mod resize;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// What an ENOSPC did to the disk (plain data of the workspace model).
pub use crate::model_resources::DiskEvent;
pub use config::ResourcesConfig;
use layers::{Effective, LayerBounds};
use model::{Axis, Sizing};
pub use provider::{LocalProvider, Provider, Target};

use crate::error::{WsError, WsResult};

/// The resources side of the service: the file's layers and defaults, and the provider.
pub struct Manager {
    pub cfg: ResourcesConfig,
    pub provider: Arc<dyn Provider>,
    /// Serialises read-modify-write of a workspace's sizing (resize, approve, growth).
    lock: Mutex<()>,
}

impl Manager {
    pub fn new(cfg: ResourcesConfig, provider: Arc<dyn Provider>) -> Manager {
        Manager {
            cfg,
            provider,
            lock: Mutex::new(()),
        }
    }

    /// The embedded defaults with nothing enforced (before `serve` wires the real provider).
    pub fn unenforced() -> Manager {
        let disk = disk::Disk::NotEnforced {
            reason: "not configured".into(),
        };
        Manager::new(
            ResourcesConfig::embedded(),
            Arc::new(LocalProvider { cgroup: None, disk }),
        )
    }

    pub fn guard(&self) -> WsResult<MutexGuard<'_, ()>> {
        self.lock
            .lock()
            .map_err(|_| WsError::Internal("resources lock poisoned".into()))
    }

    /// Effective bounds for a workspace whose own layer is `own`.
    pub fn effective(&self, own: &LayerBounds) -> Effective {
        layers::effective(&self.cfg.layers_for(own))
    }

    /// The sizing a new workspace starts with: the defaults under the create request's
    /// values, each within its effective ceiling (a value over one is refused; a default
    /// over one is lowered to it).
    pub fn initial(&self, req: Option<&input::ResourceRequest>) -> WsResult<persist::WsResources> {
        let (own, asked) = match req {
            Some(r) => (r.own_layer()?, r.sizing()?),
            None => (LayerBounds::default(), Sizing::default()),
        };
        let eff = self.effective(&own);
        for (part, a) in [
            (&asked.reservation, "reservation"),
            (&asked.burst_limit, "burst"),
        ] {
            for axis in Axis::ALL {
                let b = eff.ceiling(axis);
                if let (Some(v), Some(c), Some(layer)) = (part.get(axis), b.value, b.set_by)
                    && v > c
                {
                    return Err(WsError::OverCeiling {
                        what: format!("{a} {}", axis.as_str()),
                        value: axis.show(v),
                        ceiling: axis.show(c),
                        layer: layer.as_str(),
                    });
                }
            }
        }
        let mut sizing = Sizing {
            reservation: self.cfg.defaults.reservation.overlay(&asked.reservation),
            burst_limit: self.cfg.defaults.burst_limit.overlay(&asked.burst_limit),
        };
        for axis in Axis::ALL {
            if let Some(c) = eff.ceiling(axis).value {
                for part in [&mut sizing.reservation, &mut sizing.burst_limit] {
                    part.set(axis, part.get(axis).map(|v| v.min(c)));
                }
            }
            // A floor above its cap guarantees nothing the cap allows.
            if let (Some(r), Some(b)) = (sizing.reservation.get(axis), sizing.burst_limit.get(axis))
                && r > b
            {
                sizing.reservation.set(axis, Some(b));
            }
        }
        sizing.reservation.disk_bytes = sizing.burst_limit.disk_bytes;
        sizing.reservation.pids = None;
        Ok(persist::WsResources { sizing, own })
    }

    /// Applies a sizing through the provider.
    pub fn apply(&self, uid: u32, worktree: &Path, s: &Sizing) -> WsResult<()> {
        self.provider
            .apply(&Target { uid, worktree }, s)
            .map_err(WsError::Internal)
    }
}
