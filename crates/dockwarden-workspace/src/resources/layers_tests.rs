//! Table tests of the layer fold: every layer tightens, none loosens, and the effective
//! values and the layers that set them are right.

use super::*;

const MIB: u64 = 1 << 20;

/// One layer's ceiling and approval on one axis.
type Row = (Layer, Option<u64>, Option<u64>);

struct Case {
    name: &'static str,
    axis: Axis,
    layers: &'static [Row],
    ceiling: (Option<u64>, Option<Layer>),
    approval: (Option<u64>, Option<Layer>),
    ignored: &'static [(Layer, &'static str)],
}

const CASES: &[Case] = &[
    Case {
        name: "no layer bounds the axis",
        axis: Axis::Cpu,
        layers: &[],
        ceiling: (None, None),
        approval: (None, None),
        ignored: &[],
    },
    Case {
        name: "platform alone",
        axis: Axis::Memory,
        layers: &[(Layer::Platform, Some(8192 * MIB), Some(2048 * MIB))],
        ceiling: (Some(8192 * MIB), Some(Layer::Platform)),
        approval: (Some(2048 * MIB), Some(Layer::Platform)),
        ignored: &[],
    },
    Case {
        name: "every layer tightens: the innermost sets it",
        axis: Axis::Cpu,
        layers: &[
            (Layer::Platform, Some(8000), Some(4000)),
            (Layer::Plan, Some(4000), Some(2000)),
            (Layer::Workspace, Some(3000), None),
            (Layer::User, Some(2000), Some(1000)),
            (Layer::Thread, Some(1000), Some(500)),
        ],
        ceiling: (Some(1000), Some(Layer::Thread)),
        approval: (Some(500), Some(Layer::Thread)),
        ignored: &[],
    },
    Case {
        name: "a looser inner layer is ignored, the outer one stays",
        axis: Axis::Disk,
        layers: &[
            (Layer::Platform, Some(1024 * MIB), None),
            (Layer::Plan, Some(128 * MIB), Some(96 * MIB)),
            (Layer::User, Some(512 * MIB), Some(256 * MIB)),
        ],
        ceiling: (Some(128 * MIB), Some(Layer::Plan)),
        approval: (Some(96 * MIB), Some(Layer::Plan)),
        ignored: &[(Layer::User, "ceiling"), (Layer::User, "approval")],
    },
    Case {
        name: "an equal value does not take over from the outer layer",
        axis: Axis::Pids,
        layers: &[
            (Layer::Plan, Some(256), None),
            (Layer::Thread, Some(256), None),
        ],
        ceiling: (Some(256), Some(Layer::Plan)),
        approval: (None, None),
        ignored: &[],
    },
    Case {
        name: "an inner layer may bound what no outer layer does",
        axis: Axis::Memory,
        layers: &[
            (Layer::Platform, None, None),
            (Layer::Workspace, Some(64 * MIB), None),
        ],
        ceiling: (Some(64 * MIB), Some(Layer::Workspace)),
        approval: (None, None),
        ignored: &[],
    },
    Case {
        name: "order of the input does not matter",
        axis: Axis::Cpu,
        layers: &[
            (Layer::Thread, Some(3000), None),
            (Layer::Platform, Some(2000), None),
        ],
        ceiling: (Some(2000), Some(Layer::Platform)),
        approval: (None, None),
        ignored: &[(Layer::Thread, "ceiling")],
    },
    Case {
        name: "loosen after tighten is ignored; a later tightening still counts",
        axis: Axis::Memory,
        layers: &[
            (Layer::Platform, Some(1000 * MIB), None),
            (Layer::Plan, Some(500 * MIB), None),
            (Layer::Workspace, Some(900 * MIB), None),
            (Layer::User, Some(400 * MIB), None),
        ],
        ceiling: (Some(400 * MIB), Some(Layer::User)),
        approval: (None, None),
        ignored: &[(Layer::Workspace, "ceiling")],
    },
];

fn build(c: &Case) -> Vec<(Layer, LayerBounds)> {
    c.layers
        .iter()
        .map(|(l, ceil, appr)| {
            let mut b = LayerBounds::default();
            b.ceiling.set(c.axis, *ceil);
            b.approval.set(c.axis, *appr);
            (*l, b)
        })
        .collect()
}

#[test]
fn layer_table() {
    for c in CASES {
        let e = effective(&build(c));
        let ceil = e.ceiling(c.axis);
        assert_eq!((ceil.value, ceil.set_by), c.ceiling, "{}: ceiling", c.name);
        let appr = e.approval(c.axis);
        assert_eq!(
            (appr.value, appr.set_by),
            c.approval,
            "{}: approval",
            c.name
        );
        let ignored: Vec<(Layer, &str)> = e.ignored.iter().map(|i| (i.layer, i.kind)).collect();
        assert_eq!(ignored, c.ignored.to_vec(), "{}: ignored", c.name);
        // Other axes are untouched by a single-axis case.
        for other in Axis::ALL.iter().filter(|a| **a != c.axis) {
            assert_eq!(e.ceiling(*other).value, None, "{}: {other:?}", c.name);
        }
    }
}

proptest::proptest! {
    /// No layer ever loosens: the effective ceiling is the minimum of the values given, and
    /// adding an inner layer never raises it.
    #[test]
    fn no_layer_loosens(vals in proptest::collection::vec(proptest::option::of(1u64..10_000), 5), extra in 1u64..10_000) {
        let layers: Vec<(Layer, LayerBounds)> = Layer::ALL.iter().zip(&vals).map(|(l, v)| {
            let mut b = LayerBounds::default();
            b.ceiling.cpu_millis = *v;
            (*l, b)
        }).collect();
        let e = effective(&layers);
        let min = vals.iter().flatten().min().copied();
        proptest::prop_assert_eq!(e.ceiling(Axis::Cpu).value, min);
        let mut more = layers.clone();
        let mut b = LayerBounds::default();
        b.ceiling.cpu_millis = Some(extra);
        more.push((Layer::Thread, b));
        let after = effective(&more).ceiling(Axis::Cpu).value;
        if let (Some(a), Some(m)) = (after, min) {
            proptest::prop_assert!(a <= m);
        }
    }
}
