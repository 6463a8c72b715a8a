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
    assert_eq!(v.to_bytes(), br#"{"B":[1,"x",null,{"c":true}],"A":-3}"#.to_vec());
    assert_eq!(parse(&v.to_bytes()), Ok(v));
}

#[test]
fn rejects_fold_equal_duplicates_in_large_objects() {
    // Past the linear-scan threshold the check switches to a hash set; both halves must agree.
    for n in [LINEAR_DUP_CHECK - 1, LINEAR_DUP_CHECK, LINEAR_DUP_CHECK + 1, 200] {
        let keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
        let ok = format!("{{{}}}", keys.join(","));
        assert!(parse(ok.as_bytes()).is_ok(), "{n} distinct keys");
        for dup_of in [0, n / 2, n - 1] {
            let bad = format!("{{{}, \"K{dup_of}\": 0}}", keys.join(","));
            assert!(parse(bad.as_bytes()).is_err(), "{n} keys, duplicate of k{dup_of}");
        }
    }
}
