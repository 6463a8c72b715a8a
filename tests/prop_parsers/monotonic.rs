//! "Adding a deny rule never turns a Deny into an Allow": a forbidden setting added to any
//! create body, allowed or not, is denied; and so is every spelling of it Go would accept.

use super::*;
use serde_json::json;

/// A create body a workspace tool might send, built as serde_json for readability.
fn benign_body() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["alpine", "busybox:1.36", "ghcr.io/x/y@sha256:00"][..]),
        prop::collection::vec("[a-z0-9 =-]{0,8}", 0..3),
        prop::option::of(prop::sample::select(&["/ws/src:/src", "/ws:/w:ro", "cache:/cache", "/data"][..])),
        prop::option::of(prop::sample::select(&["bridge", "default", "none"][..])),
        prop::option::of(0i64..(1 << 30)),
        any::<bool>(),
    )
        .prop_map(|(image, cmd, bind, net, memory, tty)| {
            let mut hc = serde_json::Map::new();
            if let Some(b) = bind {
                hc.insert("Binds".into(), json!([b]));
            }
            if let Some(n) = net {
                hc.insert("NetworkMode".into(), json!(n));
            }
            if let Some(m) = memory {
                hc.insert("Memory".into(), json!(m));
            }
            hc.insert("PortBindings".into(), json!({"80/tcp": [{"HostIp": "127.0.0.1", "HostPort": "8080"}]}));
            json!({"Image": image, "Cmd": cmd, "Tty": tty, "ExposedPorts": {"80/tcp": {}}, "HostConfig": hc})
        })
}

/// Forbidden settings, each as `(HostConfig field, value)`.
fn forbidden() -> impl Strategy<Value = (&'static str, Value)> {
    prop::sample::select(vec![
        ("Privileged", json!(true)),
        ("CapAdd", json!(["SYS_ADMIN"])),
        ("CapAdd", json!(["cap_sys_admin"])),
        ("CapAdd", json!(["ALL"])),
        ("NetworkMode", json!("host")),
        ("PidMode", json!("host")),
        ("IpcMode", json!("host")),
        ("UTSMode", json!("host")),
        ("UsernsMode", json!("host")),
        ("CgroupnsMode", json!("host")),
        (
            "Devices",
            json!([{"PathOnHost": "/dev/sda", "PathInContainer": "/dev/sda", "CgroupPermissions": "rwm"}]),
        ),
        ("DeviceCgroupRules", json!(["a *:* rwm"])),
        (
            "DeviceRequests",
            json!([{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]),
        ),
        ("SecurityOpt", json!(["seccomp=unconfined"])),
        ("SecurityOpt", json!(["apparmor:unconfined"])),
        ("SecurityOpt", json!(["systempaths=unconfined"])),
        ("MaskedPaths", json!([])),
        ("ReadonlyPaths", json!([])),
        ("Runtime", json!("io.containerd.runsc.v1")),
        ("CgroupParent", json!("/")),
        ("VolumeDriver", json!("evil")),
        ("Binds", json!(["/etc:/x"])),
        ("Binds", json!(["/:/host"])),
        ("Binds", json!(["/ws/../etc:/x"])),
        (
            "Mounts",
            json!([{"Type": "bind", "Source": "/etc", "Target": "/x"}]),
        ),
        ("Sysctls", json!({"kernel.core_pattern": "|/x"})),
        (
            "PortBindings",
            json!({"80/tcp": [{"HostIp": "10.0.0.1", "HostPort": "80"}]}),
        ),
    ])
}

/// The key as a client might spell it: any ASCII casing, maybe with a `\u` escape.
fn spelled(field: &str, mask: u64) -> String {
    field
        .chars()
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

fn set_host(body: &mut Value, field: &str, v: Value) {
    let hc = body["HostConfig"]
        .as_object_mut()
        .expect("benign bodies have a HostConfig");
    hc.retain(|k, _| !k.eq_ignore_ascii_case(field));
    hc.insert(field.to_owned(), v);
}

fn is_deny(v: &Verdict) -> bool {
    matches!(v, Verdict::Deny(_))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn adding_a_forbidden_setting_never_allows(mut body in benign_body(), (field, v) in forbidden(), mask in any::<u64>(), top in any::<bool>()) {
        let base = create_verdict(body.to_string().as_bytes());
        let key = spelled(field, mask);
        if top {
            // Engines <= 26.x read HostConfig fields at the top level when `HostConfig` is absent.
            let hc = body["HostConfig"].take();
            body.as_object_mut().expect("object").remove("HostConfig");
            for (k, val) in hc.as_object().expect("object") {
                if !k.eq_ignore_ascii_case(field) {
                    body[k.as_str()] = val.clone();
                }
            }
            body[key.as_str()] = v;
        } else {
            set_host(&mut body, &key, v);
        }
        let after = create_verdict(body.to_string().as_bytes());
        prop_assert!(is_deny(&after), "{} made allowed (base was {}): {}", field, if is_deny(&base) { "deny" } else { "allow" }, body);
    }

    #[test]
    fn benign_bodies_are_mostly_allowed_so_the_property_has_teeth(body in benign_body()) {
        // Bodies without a bind outside the workspace are allowed by the default policy.
        let v = create_verdict(body.to_string().as_bytes());
        prop_assert!(!is_deny(&v), "benign body denied: {:?} {}", v.rule_ids(), body);
    }
}
