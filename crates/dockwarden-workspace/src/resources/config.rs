//! The resources file (TOML): bounds per layer, the defaults of a new workspace, and the
//! disk images. The default is embedded, so no file is needed; an invalid file refuses to
//! start the service.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::layers::{Layer, LayerBounds};
use super::model::{Amounts, Axis, Sizing};

/// The embedded default file.
pub const DEFAULT_RESOURCES: &str = include_str!("default.toml");

/// Whether each worktree is its own XFS image (the disk axis enforced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskMode {
    Auto,
    On,
    Off,
}

/// The parsed file.
#[derive(Debug, Clone)]
pub struct ResourcesConfig {
    /// Layers from the file (the workspace layer here is the default for every workspace).
    pub layers: Vec<(Layer, LayerBounds)>,
    pub defaults: Sizing,
    pub disk: DiskMode,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAmounts {
    cpu: Option<toml::Value>,
    memory: Option<toml::Value>,
    disk: Option<toml::Value>,
    pids: Option<toml::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayer {
    #[serde(default)]
    ceiling: RawAmounts,
    #[serde(default)]
    approval: RawAmounts,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    #[serde(default)]
    reservation: RawAmounts,
    #[serde(default)]
    burst: RawAmounts,
    disk: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDisk {
    images: DiskMode,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    platform: RawLayer,
    #[serde(default)]
    plan: RawLayer,
    #[serde(default)]
    workspace: RawLayer,
    #[serde(default)]
    user: RawLayer,
    #[serde(default)]
    thread: RawLayer,
    #[serde(default)]
    defaults: RawDefaults,
    disk: Option<RawDisk>,
}

fn value(axis: Axis, v: &toml::Value, at: &str) -> Result<u64, String> {
    let s = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) if axis == Axis::Cpu => i.to_string(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) if axis == Axis::Cpu => f.to_string(),
        other => {
            return Err(format!(
                "`{at}.{}`: `{other}` is not an amount",
                axis.as_str()
            ));
        }
    };
    axis.parse(&s)
        .map_err(|e| format!("`{at}.{}`: {e}", axis.as_str()))
}

fn amounts(raw: &RawAmounts, at: &str) -> Result<Amounts, String> {
    let mut out = Amounts::default();
    for (axis, v) in [
        (Axis::Cpu, &raw.cpu),
        (Axis::Memory, &raw.memory),
        (Axis::Disk, &raw.disk),
        (Axis::Pids, &raw.pids),
    ] {
        if let Some(v) = v {
            out.set(axis, Some(value(axis, v, at)?));
        }
    }
    Ok(out)
}

impl ResourcesConfig {
    /// Parses a resources file; errors name the key.
    pub fn parse(text: &str) -> Result<ResourcesConfig, String> {
        let raw: RawFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut layers = Vec::new();
        for (layer, r) in [
            (Layer::Platform, &raw.platform),
            (Layer::Plan, &raw.plan),
            (Layer::Workspace, &raw.workspace),
            (Layer::User, &raw.user),
            (Layer::Thread, &raw.thread),
        ] {
            let name = layer.as_str();
            layers.push((
                layer,
                LayerBounds {
                    ceiling: amounts(&r.ceiling, &format!("{name}.ceiling"))?,
                    approval: amounts(&r.approval, &format!("{name}.approval"))?,
                },
            ));
        }
        let mut defaults = Sizing {
            reservation: amounts(&raw.defaults.reservation, "defaults.reservation")?,
            burst_limit: amounts(&raw.defaults.burst, "defaults.burst")?,
        };
        if let Some(d) = &raw.defaults.disk {
            let size = value(Axis::Disk, d, "defaults")?;
            defaults.burst_limit.disk_bytes = Some(size);
            defaults.reservation.disk_bytes = Some(size);
        }
        let disk = raw.disk.map(|d| d.images).unwrap_or(DiskMode::Off);
        Ok(ResourcesConfig {
            layers,
            defaults,
            disk,
        })
    }

    /// The embedded default.
    pub fn embedded() -> ResourcesConfig {
        // INVARIANT: the embedded file parses (unit-tested below).
        Self::parse(DEFAULT_RESOURCES).unwrap_or(ResourcesConfig {
            layers: Vec::new(),
            defaults: Sizing::default(),
            disk: DiskMode::Off,
        })
    }

    /// The file's layers with the workspace layer tightened by a create request's own.
    pub fn layers_for(&self, own: &LayerBounds) -> Vec<(Layer, LayerBounds)> {
        let mut out: BTreeMap<Layer, LayerBounds> = self.layers.iter().copied().collect();
        let ws = out.entry(Layer::Workspace).or_default();
        // Both are the workspace layer; the tighter value of the two counts.
        for a in Axis::ALL {
            for (dst, src) in [
                (&mut ws.ceiling, own.ceiling),
                (&mut ws.approval, own.approval),
            ] {
                let v = match (dst.get(a), src.get(a)) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
                dst.set(a, v);
            }
        }
        out.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let c = ResourcesConfig::parse(DEFAULT_RESOURCES).expect("default parses");
        assert_eq!(c.defaults.reservation.cpu_millis, Some(500));
        assert_eq!(c.defaults.burst_limit.memory_bytes, Some(2 << 30));
        assert_eq!(c.defaults.burst_limit.disk_bytes, Some(2 << 30));
        assert_eq!(c.disk, DiskMode::Off);
        let plan = c
            .layers
            .iter()
            .find(|(l, _)| *l == Layer::Plan)
            .expect("plan");
        assert_eq!(plan.1.ceiling.cpu_millis, Some(4000));
    }

    #[test]
    fn bad_files_are_refused_with_the_key() {
        for (text, needle) in [
            ("[plan.ceiling]\nmemory = \"lots\"\n", "plan.ceiling.memory"),
            ("[plan.ceiling]\ngpu = 1\n", "gpu"),
            ("[disk]\nimages = \"maybe\"\n", "maybe"),
            ("[thread.approval]\ncpu = -1\n", "thread.approval.cpu"),
        ] {
            let e = ResourcesConfig::parse(text).expect_err(text);
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn create_values_tighten_the_workspace_layer() {
        let c = ResourcesConfig::parse("[workspace.ceiling]\nmemory = \"1GiB\"\n").expect("parses");
        let mut own = LayerBounds::default();
        own.ceiling.memory_bytes = Some(2 << 30);
        own.ceiling.disk_bytes = Some(128 << 20);
        let layers = c.layers_for(&own);
        let ws = layers
            .iter()
            .find(|(l, _)| *l == Layer::Workspace)
            .expect("ws");
        assert_eq!(ws.1.ceiling.memory_bytes, Some(1 << 30));
        assert_eq!(ws.1.ceiling.disk_bytes, Some(128 << 20));
    }
}
