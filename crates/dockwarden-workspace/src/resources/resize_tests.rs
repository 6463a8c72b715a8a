//! Unit tests of the pure resize plan and the ENOSPC growth rule.

use super::*;
use crate::resources::layers::{Layer, LayerBounds, effective};

const MIB: u64 = 1 << 20;

struct Local;
impl Modes for Local {
    fn mode(&self, axis: Axis, up: bool) -> (Mode, Option<String>) {
        match (axis, up) {
            (Axis::Disk, false) => (Mode::Unsupported, Some("disk shrink is unsupported".into())),
            _ => (Mode::Live, None),
        }
    }
    fn reservation_raises_burst(&self) -> bool {
        false
    }
}

fn current() -> Sizing {
    let mut s = Sizing::default();
    s.reservation.cpu_millis = Some(500);
    s.burst_limit.cpu_millis = Some(1000);
    s.reservation.memory_bytes = Some(32 * MIB);
    s.burst_limit.memory_bytes = Some(64 * MIB);
    s.burst_limit.disk_bytes = Some(64 * MIB);
    s
}

fn eff() -> Effective {
    let mut plan = LayerBounds::default();
    plan.ceiling.memory_bytes = Some(512 * MIB);
    plan.ceiling.disk_bytes = Some(128 * MIB);
    plan.approval.memory_bytes = Some(256 * MIB);
    effective(&[(Layer::Plan, plan)])
}

#[test]
fn under_the_threshold_applies_at_once() {
    let p = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Memory, 128 * MIB)],
        &Local,
    )
    .expect("plans");
    assert!(p.approval_needed.is_empty());
    assert_eq!(p.changes[0].action, "apply");
    assert_eq!(p.changes[0].mode, Mode::Live);
    assert_eq!(p.target.burst_limit.memory_bytes, Some(128 * MIB));
    assert!(!p.disruptive());
}

#[test]
fn over_the_threshold_waits_and_down_always_waits() {
    let p = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Memory, 300 * MIB)],
        &Local,
    )
    .expect("plans");
    assert!(
        p.approval_needed[0].contains("layer `plan`"),
        "{:?}",
        p.approval_needed
    );
    let p = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Cpu, 700)],
        &Local,
    )
    .expect("plans");
    assert!(
        p.approval_needed[0].contains("down"),
        "{:?}",
        p.approval_needed
    );
}

#[test]
fn over_the_ceiling_is_refused_with_the_layer() {
    let r = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Memory, 1024 * MIB)],
        &Local,
    );
    assert_eq!(
        r,
        Err(Refusal::OverCeiling {
            axis: Axis::Memory,
            value: 1024 * MIB,
            ceiling: 512 * MIB,
            layer: "plan"
        })
    );
}

#[test]
fn reservation_above_burst_is_skipped_as_no_usable_capacity() {
    let p = plan(
        &current(),
        &eff(),
        &[(Part::Reservation, Axis::Cpu, 2000)],
        &Local,
    )
    .expect("plans");
    assert_eq!(p.changes[0].action, "skip");
    assert!(
        p.changes[0]
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("no usable capacity")
    );
    assert!(!p.applies_anything());
    assert_eq!(p.target, current());
    // Raised together with the burst limit, it applies.
    let p = plan(
        &current(),
        &eff(),
        &[
            (Part::BurstLimit, Axis::Cpu, 2000),
            (Part::Reservation, Axis::Cpu, 2000),
        ],
        &Local,
    )
    .expect("plans");
    assert!(p.changes.iter().all(|c| c.action == "apply"));
}

#[test]
fn disk_shrink_is_unsupported_and_claims_nothing() {
    let p = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Disk, 32 * MIB)],
        &Local,
    )
    .expect("plans");
    assert_eq!(p.changes[0].action, "unsupported");
    assert_eq!(p.changes[0].mode, Mode::Unsupported);
    assert!(!p.applies_anything());
    assert_eq!(p.target.burst_limit.disk_bytes, Some(64 * MIB));
}

#[test]
fn empty_and_unchanged_requests() {
    assert!(matches!(
        plan(&current(), &eff(), &[], &Local),
        Err(Refusal::Invalid(_))
    ));
    let p = plan(
        &current(),
        &eff(),
        &[(Part::BurstLimit, Axis::Cpu, 1000)],
        &Local,
    )
    .expect("plans");
    assert_eq!(p.changes[0].action, "skip");
    assert!(matches!(
        plan(
            &current(),
            &eff(),
            &[(Part::BurstLimit, Axis::Memory, 16 * MIB)],
            &Local
        ),
        Err(Refusal::Invalid(_))
    ));
}

#[test]
fn disk_grows_by_half_rounded_to_mib_and_capped() {
    assert_eq!(grown_disk(64 * MIB, Some(128 * MIB)), Some(96 * MIB));
    assert_eq!(grown_disk(96 * MIB, Some(128 * MIB)), Some(128 * MIB));
    assert_eq!(grown_disk(128 * MIB, Some(128 * MIB)), None);
    assert_eq!(grown_disk(MIB + 1, None), Some(2 * MIB));
    assert_eq!(grown_disk(10 * MIB + 3, None), Some(16 * MIB));
}
