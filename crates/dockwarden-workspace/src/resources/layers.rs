//! Layered ceilings, pure: platform > plan > workspace > user > thread. Each layer may only
//! tighten what the layers above it allow; a looser value is ignored and reported.
//!
//! The same fold gives the effective ceiling (which bounds the reservation and the burst
//! limit) and the effective approval threshold (a resize up to a value above it waits for
//! approval).

use serde::{Deserialize, Serialize};

use super::model::{Amounts, Axis};

/// Where a bound comes from (plain data of the workspace model).
pub use crate::model_resources::Layer;

/// The bounds one layer sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerBounds {
    #[serde(default)]
    pub ceiling: Amounts,
    #[serde(default)]
    pub approval: Amounts,
}

/// One effective bound and the layer that set it (`None`: no layer bounds the axis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bound {
    pub value: Option<u64>,
    #[serde(alias = "setBy")]
    pub set_by: Option<Layer>,
}

/// A layer's value that would have loosened the bound above it, so it was ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ignored {
    pub layer: Layer,
    pub axis: Axis,
    pub kind: &'static str,
    pub value: u64,
    pub bound: u64,
    #[serde(alias = "boundSetBy")]
    pub bound_set_by: Layer,
}

/// Effective bounds per axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub ceiling: [(Axis, Bound); 4],
    pub approval: [(Axis, Bound); 4],
    pub ignored: Vec<Ignored>,
}

impl Effective {
    pub fn ceiling(&self, a: Axis) -> Bound {
        pick(&self.ceiling, a)
    }

    pub fn approval(&self, a: Axis) -> Bound {
        pick(&self.approval, a)
    }
}

fn pick(list: &[(Axis, Bound); 4], a: Axis) -> Bound {
    list.iter()
        .find(|(x, _)| *x == a)
        .map(|(_, b)| *b)
        .unwrap_or(Bound {
            value: None,
            set_by: None,
        })
}

/// Folds one kind of bound over the layers, outermost first.
fn fold(
    layers: &[(Layer, LayerBounds)],
    kind: &'static str,
    get: impl Fn(&LayerBounds) -> Amounts,
    ignored: &mut Vec<Ignored>,
) -> [(Axis, Bound); 4] {
    Axis::ALL.map(|axis| {
        let mut bound = Bound {
            value: None,
            set_by: None,
        };
        for (layer, b) in layers {
            let Some(v) = get(b).get(axis) else { continue };
            match (bound.value, bound.set_by) {
                // INVARIANT: a layer only ever lowers the bound; equal values keep the outer
                // layer as the one that set it.
                (Some(cur), Some(by)) if v > cur => ignored.push(Ignored {
                    layer: *layer,
                    axis,
                    kind,
                    value: v,
                    bound: cur,
                    bound_set_by: by,
                }),
                (Some(cur), _) if v == cur => {}
                _ => {
                    bound = Bound {
                        value: Some(v),
                        set_by: Some(*layer),
                    }
                }
            }
        }
        (axis, bound)
    })
}

/// The effective ceilings and approval thresholds. `layers` may come in any order; they are
/// applied platform first.
pub fn effective(layers: &[(Layer, LayerBounds)]) -> Effective {
    let mut sorted = layers.to_vec();
    sorted.sort_by_key(|(l, _)| *l);
    let mut ignored = Vec::new();
    let ceiling = fold(&sorted, "ceiling", |b| b.ceiling, &mut ignored);
    let approval = fold(&sorted, "approval", |b| b.approval, &mut ignored);
    Effective {
        ceiling,
        approval,
        ignored,
    }
}

#[cfg(test)]
#[path = "layers_tests.rs"]
mod tests;
