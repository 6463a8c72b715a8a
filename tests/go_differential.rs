//! Differential test against Go itself: every body our strict reader accepts must decode, in
//! Go's `encoding/json`, to the same security-relevant view (for both the >= 27.0 and the
//! <= 26.x create shapes), and so must the canonical bytes the proxy forwards in its place.
//! Refusing is allowed (we are stricter), but ordinary bodies must not be refused.

mod gooracle;

use dockwarden::api::json;
use dockwarden::api::model_view::CreateShape;
use gooracle::generate::Gen;
use gooracle::{GoViews, go_views, is_error, oracle, rust_views};
use serde_json::{Value, json};

#[derive(Default, Debug)]
struct Tally {
    bodies: usize,
    refused: usize,
    same_view: usize,
    both_type_error: usize,
    /// Our accessors refuse a value Go decodes (allowed: stricter, but listed).
    stricter_type: Vec<(Vec<u8>, String)>,
    /// A few refusals with their reasons, for the report.
    refusals: Vec<String>,
    diffs: Vec<String>,
}

impl Tally {
    fn refusal_rate(&self) -> f64 {
        self.refused as f64 / self.bodies.max(1) as f64
    }
}

/// Runs bodies through both decoders. Go also decodes each accepted body's canonical bytes.
fn compare(bin: &std::path::PathBuf, bodies: &[Vec<u8>]) -> (Tally, Vec<GoViews>) {
    let canonical: Vec<Vec<u8>> = bodies
        .iter()
        .map(|b| json::parse(b).map(|j| j.to_bytes()).unwrap_or_default())
        .collect();
    let all: Vec<Vec<u8>> = bodies.iter().chain(canonical.iter()).cloned().collect();
    let go = go_views(bin, &all);
    let (go_orig, go_canon) = go.split_at(bodies.len());
    let mut t = Tally {
        bodies: bodies.len(),
        ..Tally::default()
    };
    for (i, body) in bodies.iter().enumerate() {
        let views = match rust_views(body) {
            Ok(v) => v,
            Err(e) => {
                t.refused += 1;
                t.refusals
                    .push(format!("{e}: {:?}", String::from_utf8_lossy(body)));
                continue;
            }
        };
        for (shape, ours) in views {
            let theirs = go_orig[i].get(shape);
            let forwarded = go_canon[i].get(shape);
            let show = || format!("{shape:?} body {:?}", String::from_utf8_lossy(body));
            match ours {
                Ok(v) if &v == theirs && &v == forwarded => t.same_view += 1,
                Ok(v) => t.diffs.push(format!(
                    "{}\n  ours: {v}\n  go:   {theirs}\n  go(canonical): {forwarded}",
                    show()
                )),
                Err(_) if is_error(theirs) && is_error(forwarded) => t.both_type_error += 1,
                Err(e) => t.stricter_type.push((
                    body.clone(),
                    format!("{}\n  ours: error {e}\n  go: {theirs}", show()),
                )),
            }
        }
    }
    (t, go_orig.to_vec())
}

fn report(name: &str, t: &Tally) {
    eprintln!(
        "go_differential[{name}]: {} bodies, {} refused by dockwarden ({:.2}%), {} views equal, {} type errors in both, {} stricter type errors, {} differentials",
        t.bodies,
        t.refused,
        100.0 * t.refusal_rate(),
        t.same_view,
        t.both_type_error,
        t.stricter_type.len(),
        t.diffs.len()
    );
    for d in t.diffs.iter().take(15) {
        eprintln!("DIFF {d}");
    }
    for (_, d) in t.stricter_type.iter().take(5) {
        eprintln!("STRICTER {d}");
    }
    for d in t.refusals.iter().take(8) {
        eprintln!("REFUSED {d}");
    }
}

/// Our accessors may refuse what Go decodes only for a `null` body (the policy wants an
/// object; dockerd answers "config cannot be empty").
fn assert_only_null_bodies_are_stricter(t: &Tally) {
    for (body, why) in &t.stricter_type {
        assert_eq!(
            json::parse(body),
            Ok(json::Json::Null),
            "accessor stricter than Go: {why}"
        );
    }
}

macro_rules! oracle_or_skip {
    () => {
        match oracle() {
            Ok(bin) => bin,
            Err(why) => {
                eprintln!("SKIPPED: {why}");
                return;
            }
        }
    };
}

#[test]
fn generated_ordinary_bodies_decode_as_in_go_and_are_not_refused() {
    let bin = oracle_or_skip!();
    let mut g = Gen::new(0x5EED_0001, false);
    let bodies: Vec<Vec<u8>> = (0..3000).map(|_| g.body()).collect();
    let (t, go) = compare(bin, &bodies);
    report("ordinary", &t);
    assert!(
        t.diffs.is_empty(),
        "dockwarden accepted bodies Go decodes differently"
    );
    assert_only_null_bodies_are_stricter(&t);
    // Clean bodies (no duplicates, no ſ/K, NUL, bad UTF-8 or trailing data) are only refused
    // for Go-legal JSON serde cannot hold (none expected from this generator).
    assert!(
        t.refusal_rate() < 0.01,
        "ordinary bodies refused: {:.2}%",
        100.0 * t.refusal_rate()
    );
    // The corpus must exercise what matters: Go saw privileged and host-bind settings.
    let privileged = go
        .iter()
        .filter(|v| v.legacy["HostConfig"]["Privileged"] == json!(true))
        .count();
    assert!(
        privileged > 100,
        "too few privileged bodies generated: {privileged}"
    );
    assert!(
        t.same_view > 2000 && t.both_type_error > 200,
        "corpus too narrow: {t:?}"
    );
}

#[test]
fn generated_odd_bodies_are_refused_or_decode_as_in_go() {
    let bin = oracle_or_skip!();
    let mut g = Gen::new(0x5EED_0002, true);
    let bodies: Vec<Vec<u8>> = (0..3000).map(|_| g.body()).collect();
    let (t, _) = compare(bin, &bodies);
    report("odd", &t);
    assert!(
        t.diffs.is_empty(),
        "dockwarden accepted bodies Go decodes differently"
    );
    assert_only_null_bodies_are_stricter(&t);
    assert!(
        t.refused > 300,
        "the odd generator should produce many refusals: {t:?}"
    );
}

enum Expect {
    /// Our reader refuses the body.
    Refused,
    /// Our reader accepts it (and `compare` checks Go agrees).
    Accepted,
}

/// A corner case: name, body, our verdict, and where to look in Go's view for what value.
type Corner = (
    &'static str,
    &'static [u8],
    Expect,
    CreateShape,
    &'static str,
    Value,
);

/// Hand-written corner cases: what Go does with each (checked against the oracle, so this
/// file documents Go's behaviour) and whether we refuse it.
fn corners() -> Vec<Corner> {
    use CreateShape::{Legacy, Modern};
    use Expect::*;
    vec![
        (
            "long s folds to s",
            "{\"HostConfig\":{\"Bind\u{17f}\":[\"/:/h\"]}}".as_bytes(),
            Refused,
            Modern,
            "/HostConfig/Binds",
            json!(["/:/h"]),
        ),
        (
            "kelvin sign folds to k",
            "{\"HostConfig\":{\"Mas\u{212a}edPaths\":[]}}".as_bytes(),
            Refused,
            Modern,
            "/HostConfig/MaskedPaths",
            json!([]),
        ),
        (
            "escaped long s in HostConfig key",
            br#"{"Ho\u017ftConfig":{"Privileged":true}}"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "null after true is a no-op",
            br#"{"HostConfig":{"Privileged":true,"privileged":null}}"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "repeated HostConfig merges",
            br#"{"HostConfig":{"Privileged":true},"hostconfig":{"Memory":1}}"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "repeated map merges",
            br#"{"HostConfig":{"Sysctls":{"a":"1"},"SYSCTLS":{"b":"2"}}}"#,
            Refused,
            Modern,
            "/HostConfig/Sysctls",
            json!({"a":"1","b":"2"}),
        ),
        (
            "repeated slice replaces",
            br#"{"HostConfig":{"Binds":["/etc:/e"],"binds":["/w:/w"]}}"#,
            Refused,
            Modern,
            "/HostConfig/Binds",
            json!(["/w:/w"]),
        ),
        (
            "null HostConfig after one",
            br#"{"HostConfig":{"Privileged":true},"HostConfig":null}"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(false),
        ),
        (
            "trailing data ignored by Decode",
            br#"{"HostConfig":{"Privileged":true}} x"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "trailing bracket",
            br#"{"HostConfig":{"Privileged":true}}]"#,
            Refused,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "invalid UTF-8 becomes U+FFFD",
            b"{\"HostConfig\":{\"Binds\":[\"/e\xfftc:/x\"]}}",
            Refused,
            Modern,
            "/HostConfig/Binds/0",
            json!("/e\u{fffd}tc:/x"),
        ),
        (
            "lone surrogate becomes U+FFFD",
            br#"{"HostConfig":{"Binds":["\ud800:/x"]}}"#,
            Refused,
            Modern,
            "/HostConfig/Binds/0",
            json!("\u{fffd}:/x"),
        ),
        (
            "NUL is an ordinary byte in Go",
            br#"{"HostConfig":{"Binds":["/ws\u0000/../etc:/x"]}}"#,
            Refused,
            Modern,
            "/HostConfig/Binds/0",
            json!("/ws\u{0}/../etc:/x"),
        ),
        (
            "escaped key matches",
            br#"{"HostConfig":{"\u0050rivileged":true}}"#,
            Accepted,
            Modern,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "lower-case key matches",
            br#"{"hostconfig":{"privileged":true,"capadd":["ALL"]}}"#,
            Accepted,
            Modern,
            "/HostConfig/CapAdd",
            json!(["ALL"]),
        ),
        (
            "dotless i does not fold",
            "{\"HostConfig\":{\"Pr\u{131}vileged\":true}}".as_bytes(),
            Accepted,
            Modern,
            "/HostConfig/Privileged",
            json!(false),
        ),
        (
            "top-level HostConfig fields, legacy",
            br#"{"Image":"a","Privileged":true,"Binds":["/:/h"]}"#,
            Accepted,
            Legacy,
            "/HostConfig/Privileged",
            json!(true),
        ),
        (
            "top-level HostConfig fields, modern",
            br#"{"Image":"a","Privileged":true}"#,
            Accepted,
            Modern,
            "/HostConfig/Privileged",
            json!(false),
        ),
        (
            "nested wins over top-level",
            br#"{"HostConfig":{},"Privileged":true}"#,
            Accepted,
            Legacy,
            "/HostConfig/Privileged",
            json!(false),
        ),
        (
            "null nested falls back to top-level",
            br#"{"HostConfig":null,"NetworkMode":"host"}"#,
            Accepted,
            Legacy,
            "/HostConfig/NetworkMode",
            json!("host"),
        ),
        (
            "VolumeDriver copied from the top",
            br#"{"HostConfig":{},"VolumeDriver":"evil"}"#,
            Accepted,
            Legacy,
            "/HostConfig/VolumeDriver",
            json!("evil"),
        ),
        (
            "Resources key is unknown",
            br#"{"HostConfig":{"Resources":{"Devices":[{"PathOnHost":"/dev/sda"}]}}}"#,
            Accepted,
            Modern,
            "/HostConfig/Devices",
            Value::Null,
        ),
        (
            "empty MaskedPaths is not nil",
            br#"{"HostConfig":{"MaskedPaths":[],"ReadonlyPaths":null}}"#,
            Accepted,
            Modern,
            "/HostConfig/MaskedPaths",
            json!([]),
        ),
        (
            "null binding list is kept",
            br#"{"HostConfig":{"PortBindings":{"80/tcp":null,"81":[]}}}"#,
            Accepted,
            Modern,
            "/HostConfig/PortBindings",
            json!({"80/tcp":null,"81":[]}),
        ),
        (
            "null list element is zero",
            br#"{"HostConfig":{"Mounts":[null],"Binds":[null]}}"#,
            Accepted,
            Modern,
            "/HostConfig/Binds",
            json!([""]),
        ),
        (
            "string for bool is an error",
            br#"{"HostConfig":{"Privileged":"true"}}"#,
            Accepted,
            Modern,
            "/error",
            Value::Null,
        ),
        (
            "1.0 for an integer is an error",
            br#"{"HostConfig":{"Memory":1.0}}"#,
            Accepted,
            Modern,
            "/error",
            Value::Null,
        ),
        (
            "-0 is zero in Go",
            br#"{"HostConfig":{"Memory":-0}}"#,
            Accepted,
            Modern,
            "/HostConfig/Memory",
            json!(0),
        ),
        (
            "null body",
            b"null",
            Accepted,
            Modern,
            "/HostConfig/Privileged",
            json!(false),
        ),
    ]
}

#[test]
fn hand_written_corner_cases_match_go_or_are_refused() {
    let bin = oracle_or_skip!();
    let cases = corners();
    let bodies: Vec<Vec<u8>> = cases.iter().map(|c| c.1.to_vec()).collect();
    let (t, go) = compare(bin, &bodies);
    report("corners", &t);
    for ((name, body, expect, shape, pointer, want), go) in cases.iter().zip(&go) {
        let accepted = json::parse(body).is_ok();
        match expect {
            Expect::Refused => assert!(!accepted, "{name}: dockwarden must refuse"),
            Expect::Accepted => assert!(accepted, "{name}: dockwarden must accept"),
        }
        let got = go.get(*shape).pointer(pointer);
        if *pointer == "/error" {
            assert!(
                got.is_some(),
                "{name}: Go should refuse, got {}",
                go.get(*shape)
            );
        } else {
            assert_eq!(
                got,
                Some(want),
                "{name}: Go decodes differently than documented: {}",
                go.get(*shape)
            );
        }
    }
    assert!(
        t.diffs.is_empty(),
        "dockwarden accepted corner cases Go decodes differently"
    );
    // Known and intended: serde_json reads `-0` as the float -0.0, so `int()` refuses it
    // where Go reads 0 (see json::tests::differential_negative_zero_integer_is_refused).
    let stricter: Vec<&[u8]> = t.stricter_type.iter().map(|(b, _)| b.as_slice()).collect();
    assert_eq!(
        stricter,
        [
            &br#"{"HostConfig":{"Memory":-0}}"#[..],
            br#"{"HostConfig":{"Memory":-0}}"#,
            b"null",
            b"null"
        ]
    );
}
