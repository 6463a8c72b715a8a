//! Unit tests of the container rules: helpers, and a property test that no mix of forbidden
//! settings, in any key casing and at either level of the body, is ever allowed.

use proptest::prelude::*;

use super::*;
use crate::api::json::{self, Json};
use crate::api::path::CanonicalPath;
use crate::api::query::Query;
use crate::api::route;

fn create(body: &str) -> Request {
    let path = CanonicalPath::parse("/v1.41/containers/create").expect("path");
    Request {
        method: "POST".into(),
        route: route::classify("POST", &path),
        query: Query::default(),
        body: Some(json::parse(body.as_bytes()).expect("json")),
        has_body: true,
    }
}

fn decide(body: &str) -> Result<Permitted, Denial> {
    decide_create(&create(body), &Facts::default(), &Policy::default_policy())
}

#[test]
fn capabilities_are_refused_in_any_spelling() {
    assert!(privilege::tmpfs_option_ok("size=1m"));
    assert!(
        decide(r#"{"HostConfig":{"CapAdd":[]}}"#).is_ok(),
        "an empty list adds nothing"
    );
    assert!(
        decide(r#"{"HostConfig":{"CapDrop":["ALL"]}}"#).is_ok(),
        "dropping is always fine"
    );
    for bad in [
        "CHOWN",
        "chown",
        "CAP_KILL",
        "SYS_ADMIN",
        "ALL",
        "all",
        "CAP_ALL",
        "",
        "cap_\u{17f}y\u{17f}_admin",
        "NET_ADMIN",
    ] {
        let d = decide(&format!(r#"{{"HostConfig":{{"CapAdd":["{bad}"]}}}}"#)).expect_err(bad);
        assert_eq!(d.rule, "container.capabilities");
    }
}

#[test]
fn top_level_fields_move_into_host_config_or_refuse_next_to_it() {
    let p = decide(r#"{"Image":"x","Memory":5}"#).expect("allowed");
    let Some(Json::Object(b)) = p.body() else {
        panic!("no body")
    };
    assert!(b.get("Memory").is_none());
    assert_eq!(
        b.object("HostConfig")
            .expect("hc")
            .and_then(|h| h.int("Memory").ok().flatten()),
        Some(5)
    );
    assert_eq!(
        decide(r#"{"Image":"x","Memory":5,"HostConfig":{}}"#)
            .expect_err("mixed")
            .rule,
        "container.legacy_hostconfig"
    );
}

/// Forbidden settings, and the rule each must trip (when several are set, any of them may trip
/// first).
const FORBIDDEN: &[(&str, &str, &str)] = &[
    ("Privileged", "true", "container.privileged"),
    ("NetworkMode", r#""host""#, "container.namespace.host"),
    ("PidMode", r#""host""#, "container.namespace.host"),
    ("CapAdd", r#"["SYS_ADMIN"]"#, "container.capabilities"),
    (
        "Devices",
        r#"[{"PathOnHost":"/dev/mem"}]"#,
        "container.devices",
    ),
    (
        "SecurityOpt",
        r#"["seccomp:unconfined"]"#,
        "container.security_opt",
    ),
    ("MaskedPaths", "[]", "container.masked_paths"),
    ("CgroupParent", r#""/""#, "container.cgroup_parent"),
    ("Runtime", r#""kata""#, "container.runtime"),
    ("Binds", r#"["/:/host"]"#, "container.bind.outside"),
    (
        "Mounts",
        r#"[{"Type":"bind","Source":"/etc","Target":"/x"}]"#,
        "container.bind.outside",
    ),
    (
        "PortBindings",
        r#"{"80/tcp":[{"HostIp":"192.0.2.1"}]}"#,
        "container.ports.host_ip",
    ),
];

/// The facts the forbidden binds and mounts need: their sources are outside the workspace.
fn outside_facts() -> Facts {
    let mut facts = Facts::default();
    for p in ["/", "/etc"] {
        facts
            .host_paths
            .insert(p.into(), crate::policy::facts::HostPathFact::Outside);
    }
    facts
}

#[test]
fn each_forbidden_setting_alone_trips_its_rule() {
    for &(key, value, rule) in FORBIDDEN {
        for body in [
            format!(r#"{{"Image":"x","{key}":{value}}}"#),
            format!(r#"{{"Image":"x","HostConfig":{{"{key}":{value}}}}}"#),
        ] {
            let d = decide_create(&create(&body), &outside_facts(), &Policy::default_policy())
                .expect_err(&body);
            assert_eq!(d.rule, rule, "{body}: {}", d.message);
        }
    }
}

fn recase(key: &str, mask: u64) -> String {
    key.chars()
        .enumerate()
        .map(|(i, c)| {
            if mask >> (i % 64) & 1 == 1 {
                c.to_ascii_lowercase()
            } else {
                c.to_ascii_uppercase()
            }
        })
        .collect()
}

proptest! {
    #[test]
    fn no_forbidden_setting_is_ever_allowed(picks in proptest::collection::btree_set(0..FORBIDDEN.len(), 1..4), mask in any::<u64>(), top in any::<bool>()) {
        let fields: Vec<String> = picks.iter().map(|&i| format!(r#""{}":{}"#, recase(FORBIDDEN[i].0, mask), FORBIDDEN[i].1)).collect();
        let body = if top {
            format!(r#"{{"Image":"x",{}}}"#, fields.join(","))
        } else {
            format!(r#"{{"Image":"x","hostCONFIG":{{{}}}}}"#, fields.join(","))
        };
        let verdict = decide_create(&create(&body), &outside_facts(), &Policy::default_policy());
        let picked: Vec<&str> = picks.iter().map(|&i| FORBIDDEN[i].2).collect();
        match verdict {
            Ok(_) => prop_assert!(false, "allowed: {}", body),
            Err(d) => prop_assert!(picked.contains(&d.rule), "{} denied by `{}`, not one of {:?}: {}", body, d.rule, picked, d.message),
        }
    }
}
