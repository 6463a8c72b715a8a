//! The resource model: axes, amounts per axis, and a workspace's reservation and burst limit.
//!
//! CPU is counted in millicores, memory and disk in bytes, pids as a count. Every amount
//! is optional: `None` means "not bounded here".

use serde::{Deserialize, Serialize};

/// One axis a workspace is sized on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    Cpu,
    Memory,
    Disk,
    Pids,
}

impl Axis {
    pub const ALL: [Axis; 4] = [Axis::Cpu, Axis::Memory, Axis::Disk, Axis::Pids];

    pub fn as_str(self) -> &'static str {
        match self {
            Axis::Cpu => "cpu",
            Axis::Memory => "memory",
            Axis::Disk => "disk",
            Axis::Pids => "pids",
        }
    }

    /// Renders an amount of this axis for messages (`0.5 CPU`, `64 MiB`, `100 pids`).
    pub fn show(self, v: u64) -> String {
        match self {
            Axis::Cpu => format!("{} CPU", v as f64 / 1000.0),
            Axis::Memory | Axis::Disk if v.is_multiple_of(1 << 20) => format!("{} MiB", v >> 20),
            Axis::Memory | Axis::Disk => format!("{v} bytes"),
            Axis::Pids => format!("{v} pids"),
        }
    }

    /// Parses a value of this axis: CPUs as a number (`0.5`) or millicores (`500m`);
    /// memory and disk as bytes or with a binary unit (`64MiB`, `1g`); pids as a count.
    pub fn parse(self, s: &str) -> Result<u64, String> {
        let s = s.trim();
        let v = match self {
            Axis::Cpu => match s.strip_suffix('m') {
                Some(m) => m.parse::<u64>().ok(),
                None => s
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f > 0.0 && *f < 1e6)
                    .map(|f| (f * 1000.0).round() as u64),
            },
            Axis::Memory | Axis::Disk => match dockwarden_proxy::limits::Amount::parse(s) {
                Ok(dockwarden_proxy::limits::Amount::Absolute(n)) => Some(n),
                _ => None,
            },
            Axis::Pids => s.parse::<u64>().ok(),
        };
        v.filter(|v| *v > 0).ok_or_else(|| {
            format!(
                "`{s}` is not a {} amount (e.g. {})",
                self.as_str(),
                match self {
                    Axis::Cpu => "`0.5` or `500m`",
                    Axis::Memory | Axis::Disk => "`64MiB`",
                    Axis::Pids => "`256`",
                }
            )
        })
    }
}

/// An amount per axis; `None` means unbounded (or unchanged, in a request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Amounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "cpuMillis")]
    pub cpu_millis: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "memoryBytes")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "diskBytes")]
    pub disk_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Amounts {
    pub fn get(&self, a: Axis) -> Option<u64> {
        match a {
            Axis::Cpu => self.cpu_millis,
            Axis::Memory => self.memory_bytes,
            Axis::Disk => self.disk_bytes,
            Axis::Pids => self.pids,
        }
    }

    pub fn set(&mut self, a: Axis, v: Option<u64>) {
        match a {
            Axis::Cpu => self.cpu_millis = v,
            Axis::Memory => self.memory_bytes = v,
            Axis::Disk => self.disk_bytes = v,
            Axis::Pids => self.pids = v,
        }
    }

    /// Values of `over` where it has one, else ours.
    pub fn overlay(&self, over: &Amounts) -> Amounts {
        let mut out = *self;
        for a in Axis::ALL {
            if let Some(v) = over.get(a) {
                out.set(a, Some(v));
            }
        }
        out
    }
}

/// What a workspace is sized to. The reservation is a floor, the burst limit a cap; disk
/// has one hard size (kept in `burst.disk_bytes`, mirrored in the reservation) and pids only
/// a cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizing {
    pub reservation: Amounts,
    #[serde(alias = "burstLimit")]
    pub burst_limit: Amounts,
}

impl Sizing {
    /// `burstable` when some cap is above its floor, else `fixed`.
    pub fn model(&self) -> &'static str {
        let above = [Axis::Cpu, Axis::Memory].iter().any(|a| {
            match (self.reservation.get(*a), self.burst_limit.get(*a)) {
                (Some(r), Some(b)) => b > r,
                (None, _) => true,
                (Some(_), None) => true,
            }
        });
        if above { "burstable" } else { "fixed" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_axis_values() {
        assert_eq!(Axis::Cpu.parse("0.5"), Ok(500));
        assert_eq!(Axis::Cpu.parse("250m"), Ok(250));
        assert_eq!(Axis::Memory.parse("64MiB"), Ok(64 << 20));
        assert_eq!(Axis::Disk.parse("1g"), Ok(1 << 30));
        assert_eq!(Axis::Pids.parse("128"), Ok(128));
        for (a, bad) in [
            (Axis::Cpu, "0"),
            (Axis::Cpu, "-1"),
            (Axis::Cpu, "NaN"),
            (Axis::Memory, "0.5"),
            (Axis::Memory, "lots"),
            (Axis::Pids, "1.5"),
        ] {
            assert!(a.parse(bad).is_err(), "{a:?} {bad}");
        }
    }

    #[test]
    fn burstable_when_a_cap_is_above_its_floor() {
        let mut s = Sizing::default();
        s.reservation.cpu_millis = Some(500);
        s.burst_limit.cpu_millis = Some(500);
        s.reservation.memory_bytes = Some(64);
        s.burst_limit.memory_bytes = Some(64);
        assert_eq!(s.model(), "fixed");
        s.burst_limit.memory_bytes = Some(128);
        assert_eq!(s.model(), "burstable");
    }
}
