//! Decoder tests: each case is a known differential between Go and a naive JSON reader.

use super::*;

fn obj(s: &str) -> Object {
    match parse(s.as_bytes()) {
        Ok(Json::Object(o)) => o,
        other => panic!("expected an object, got {other:?}"),
    }
}

#[test]
fn matches_fields_case_insensitively_like_go() {
    let o = obj(r#"{"privileged": true}"#);
    assert_eq!(o.bool("Privileged"), Ok(Some(true)));
    let o = obj(r#"{"\u0050rivileged": true}"#);
    assert_eq!(o.bool("Privileged"), Ok(Some(true)));
}

#[test]
fn rejects_fold_equal_duplicate_keys_at_any_depth() {
    assert!(parse(br#"{"Privileged": false, "privileged": true}"#).is_err());
    assert!(parse(br#"{"HostConfig": {"Binds": [], "BINDS": ["/:/h"]}}"#).is_err());
    assert!(parse(br#"{"a": [{"x": 1, "X": 2}]}"#).is_err());
}

#[test]
fn rejects_keys_with_runes_go_folds_to_ascii() {
    assert!(parse("{\"Privileged\u{017F}\": true}".as_bytes()).is_err());
    assert!(parse("{\"\u{212A}ernelMemory\": 1}".as_bytes()).is_err());
}

#[test]
fn rejects_trailing_data_invalid_utf8_nul_and_lone_surrogates() {
    assert!(parse(br#"{"a":1} {"b":2}"#).is_err());
    assert!(parse(br#"{"a":1}]"#).is_err());
    assert!(parse(b"{\"a\":\"\xff\"}").is_err());
    assert!(parse(br#"{"a":"x\u0000y"}"#).is_err());
    assert!(parse(br#"{"a":"\ud800"}"#).is_err());
    assert!(parse(b"{\"a\":1}  \n").is_ok());
}

#[test]
fn null_is_absent_for_scalars_but_empty_list_is_not() {
    let o = obj(r#"{"Privileged": null, "MaskedPaths": [], "ReadonlyPaths": null}"#);
    assert_eq!(o.bool("Privileged"), Ok(None));
    assert_eq!(o.str_list("MaskedPaths"), Ok(Some(vec![])));
    assert_eq!(o.str_list("ReadonlyPaths"), Ok(None));
}

#[test]
fn type_mismatches_are_errors_as_in_go() {
    let o = obj(r#"{"Privileged": "true", "Memory": 1.0, "N": 1e3, "Binds": "/:/h"}"#);
    assert!(o.bool("Privileged").is_err());
    assert!(o.int("Memory").is_err());
    assert!(o.int("N").is_err());
    assert!(o.str_list("Binds").is_err());
}

#[test]
fn canonical_bytes_round_trip() {
    let v = parse(br#"{"B":[1,"x",null,{"c":true}],"A":-3}"#).expect("valid");
    assert_eq!(
        v.to_bytes(),
        br#"{"B":[1,"x",null,{"c":true}],"A":-3}"#.to_vec()
    );
    assert_eq!(parse(&v.to_bytes()), Ok(v));
}

#[test]
fn rejects_fold_equal_duplicates_in_large_objects() {
    // Past the linear-scan threshold the check switches to a hash set; both halves must agree.
    for n in [
        LINEAR_DUP_CHECK - 1,
        LINEAR_DUP_CHECK,
        LINEAR_DUP_CHECK + 1,
        200,
    ] {
        let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
        let ok = format!("{{{}}}", keys.join(","));
        assert!(parse(ok.as_bytes()).is_ok(), "{n} distinct keys");
        for dup_of in [0, n / 2, n - 1] {
            let bad = format!("{{{}, \"K{dup_of}\": 0}}", keys.join(","));
            assert!(
                parse(bad.as_bytes()).is_err(),
                "{n} keys, duplicate of k{dup_of}"
            );
        }
    }
}

/// Found by tests/go_differential.rs: Go reads `"Memory": -0` as 0, serde_json hands us -0.0.
/// We refuse it (never a wrong value), since `-0.0` — which Go refuses — looks the same.
#[test]
fn differential_negative_zero_integer_is_refused() {
    let o = obj(r#"{"Memory": -0, "Zero": 0, "Neg": -1, "NegFloatZero": -0.0}"#);
    assert!(o.int("Memory").is_err());
    assert!(o.int("NegFloatZero").is_err());
    assert_eq!(o.int("Zero"), Ok(Some(0)));
    assert_eq!(o.int("Neg"), Ok(Some(-1)));
}

/// Found by tests/prop_parsers.rs (canonical_bytes_parse_back_to_the_same_value): without
/// serde_json's `float_roundtrip`, `-132849664048.86275` came back one ulp off, so the body
/// the proxy forwards would not carry the client's number (Go parses floats exactly).
#[test]
fn differential_canonical_bytes_keep_floats_exact() {
    for text in [
        "-132849664048.86275",
        "0.1",
        "1e-7",
        "123456789.12345679",
        "5e-324",
    ] {
        let v = parse(text.as_bytes()).expect("valid");
        let expect: f64 = text.parse().expect("float");
        assert_eq!(
            v,
            Json::Number(serde_json::Number::from_f64(expect).expect("finite")),
            "{text}"
        );
        assert_eq!(parse(&v.to_bytes()), Ok(v));
    }
}
