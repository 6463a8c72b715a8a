//! Resize, pure: a request's changes against the current sizing, the effective bounds and
//! the provider's apply modes give a plan (apply now, wait for approval, or nothing to do),
//! or a refusal naming the ceiling and the layer that set it.

use serde::{Deserialize, Serialize};

use super::layers::Effective;
use super::model::{Axis, Sizing};

/// Which value of an axis a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Reservation,
    #[serde(alias = "burstLimit")]
    BurstLimit,
}

/// How a provider applies a change of one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Values change in place; processes keep running.
    Live,
    /// The runtime restarts; running processes are stopped.
    Restart,
    Unsupported,
}

/// What a provider can do, as data the pure plan reads.
pub trait Modes {
    /// The apply mode for `axis` going `up` (or down), with why when unsupported.
    fn mode(&self, axis: Axis, up: bool) -> (Mode, Option<String>);
    /// Whether raising the reservation raises the burst limit with it.
    fn reservation_raises_burst(&self) -> bool;
}

/// One axis of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub axis: Axis,
    pub part: Part,
    pub from: Option<u64>,
    pub to: u64,
    /// `up`, `down` or `none`.
    pub direction: String,
    pub mode: Mode,
    /// `apply`, `skip` or `unsupported`.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The plan for a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Why approval is needed (empty: applies at once).
    #[serde(alias = "approvalNeeded")]
    pub approval_needed: Vec<String>,
    /// The sizing once every `apply` change is made.
    pub target: Sizing,
}

impl Plan {
    pub fn applies_anything(&self) -> bool {
        self.changes.iter().any(|c| c.action == "apply")
    }

    /// Whether applying stops processes (any change in `restart` mode).
    pub fn disruptive(&self) -> bool {
        self.changes
            .iter()
            .any(|c| c.action == "apply" && c.mode == Mode::Restart)
    }
}

/// Why a request is refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    OverCeiling {
        axis: Axis,
        value: u64,
        ceiling: u64,
        layer: &'static str,
    },
    Invalid(String),
}

fn part_of(s: &Sizing, p: Part) -> &super::model::Amounts {
    match p {
        Part::Reservation => &s.reservation,
        Part::BurstLimit => &s.burst_limit,
    }
}

/// Plans `wanted` (part, axis, value). Disk is sized by one value (`BurstLimit`).
pub fn plan(
    current: &Sizing,
    eff: &Effective,
    wanted: &[(Part, Axis, u64)],
    modes: &dyn Modes,
) -> Result<Plan, Refusal> {
    if wanted.is_empty() {
        return Err(Refusal::Invalid(
            "the request changes nothing; name at least one value".into(),
        ));
    }
    let mut target = *current;
    for (part, axis, v) in wanted {
        let c = eff.ceiling(*axis);
        if let (Some(ceiling), Some(layer)) = (c.value, c.set_by)
            && *v > ceiling
        {
            return Err(Refusal::OverCeiling {
                axis: *axis,
                value: *v,
                ceiling,
                layer: layer.as_str(),
            });
        }
        match part {
            Part::Reservation if matches!(axis, Axis::Disk | Axis::Pids) => {
                return Err(Refusal::Invalid(format!(
                    "`{}` has no reservation; size it with `burst`",
                    axis.as_str()
                )));
            }
            Part::Reservation => target.reservation.set(*axis, Some(*v)),
            Part::BurstLimit => target.burst_limit.set(*axis, Some(*v)),
        }
    }
    let mut changes = Vec::new();
    let mut approval_needed = Vec::new();
    let mut planned = *current;
    for (part, axis, to) in wanted {
        let from = part_of(current, *part).get(*axis);
        let up = from.is_none_or(|f| *to > f);
        let direction = match from {
            Some(f) if f == *to => "none",
            _ if up => "up",
            _ => "down",
        };
        let (mode, why) = modes.mode(*axis, up);
        let mut ch = Change {
            axis: *axis,
            part: *part,
            from,
            to: *to,
            direction: direction.into(),
            mode,
            action: "apply".into(),
            reason: None,
        };
        let burst = target.burst_limit.get(*axis);
        if mode == Mode::Unsupported {
            ch.action = "unsupported".into();
            ch.reason = why;
        } else if direction == "none" {
            ch.action = "skip".into();
            ch.reason = Some(format!("{} is already {}", axis.as_str(), axis.show(*to)));
        } else if *part == Part::Reservation
            && up
            && !modes.reservation_raises_burst()
            && burst.is_some_and(|b| *to > b)
        {
            ch.action = "skip".into();
            ch.reason = Some(format!(
                "adds no usable capacity: a {} reservation of {} is above the burst limit {}, which this provider does not raise with it; raise `burst` {} too, or reduce the work",
                axis.as_str(),
                axis.show(*to),
                axis.show(burst.unwrap_or(0)),
                axis.as_str()
            ));
        } else if *part == Part::BurstLimit
            && target.reservation.get(*axis).is_some_and(|r| *to < r)
        {
            return Err(Refusal::Invalid(format!(
                "a {} burst limit of {} is below its reservation; lower the reservation too",
                axis.as_str(),
                axis.show(*to)
            )));
        }
        if ch.action == "apply" {
            if !up {
                approval_needed.push(format!(
                    "{} goes down ({} -> {}): a resize down always waits for approval",
                    axis.as_str(),
                    axis.show(from.unwrap_or(0)),
                    axis.show(*to)
                ));
            } else if let (Some(t), Some(layer)) =
                (eff.approval(*axis).value, eff.approval(*axis).set_by)
                && *to > t
            {
                approval_needed.push(format!(
                    "{} {} is above the approval threshold {} set by layer `{}`",
                    axis.as_str(),
                    axis.show(*to),
                    axis.show(t),
                    layer.as_str()
                ));
            }
            match part {
                Part::Reservation => planned.reservation.set(*axis, Some(*to)),
                Part::BurstLimit => planned.burst_limit.set(*axis, Some(*to)),
            }
            if *axis == Axis::Disk {
                planned.reservation.disk_bytes = Some(*to);
            }
        }
        changes.push(ch);
    }
    Ok(Plan {
        changes,
        approval_needed,
        target: planned,
    })
}

/// The next disk size after ENOSPC: +50%, rounded up to a whole MiB, capped at `ceiling`.
/// `None` when already at (or above) the ceiling.
pub fn grown_disk(size: u64, ceiling: Option<u64>) -> Option<u64> {
    const MIB: u64 = 1 << 20;
    let grown = (size + size.div_ceil(2)).div_ceil(MIB) * MIB;
    let capped = ceiling.map_or(grown, |c| grown.min(c));
    (capped > size).then_some(capped)
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;
