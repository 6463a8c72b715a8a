//! The daemon settings the proxy relies on but cannot enforce, read from `daemon.json` so the
//! proxy can warn at start-up: BuildKit's builder entitlements (`/grpc` carries HTTP/2 the proxy
//! does not inspect, so `network-host` and `security-insecure` must be off in the daemon) and
//! `default-network-opts` (merged into every new network after the proxy's checks).

use serde_json::Value;

use crate::policy::network::spec::{MASQUERADE, MTU};

/// Where dockerd reads its configuration by default.
pub const DEFAULT_PATH: &str = "/etc/docker/daemon.json";

/// The warnings for a daemon configuration file's text (`None`: the file is absent).
pub fn warnings(text: Option<&str>, daemon_major: Option<u64>) -> Vec<String> {
    let fix = r#"set `{"builder": {"Entitlements": {"network-host": false, "security-insecure": false}}}` in daemon.json and restart dockerd"#;
    let Some(text) = text else {
        return vec![format!("daemon.json not found: BuildKit builds through `/grpc` may use the host network; {fix}")];
    };
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return vec!["daemon.json could not be parsed; the builder entitlements could not be checked".to_owned()];
    };
    let mut out = Vec::new();
    let ent = field(&v, "builder").and_then(|b| field(b, "entitlements"));
    let flag = |k: &str| ent.and_then(|e| field(e, k)).and_then(Value::as_bool);
    if flag("network-host") != Some(false) {
        out.push(format!("builder entitlement `network-host` is not off: BuildKit builds may use the host network; {fix}"));
    }
    if flag("security-insecure") == Some(true) {
        out.push(format!("builder entitlement `security-insecure` is on: BuildKit builds may run privileged steps; {fix}"));
    }
    if daemon_major.is_some_and(|m| m >= 29) && flag("device") != Some(false) {
        out.push("builder entitlement `device` is not off: BuildKit builds may use host devices; set `\"device\": false` too".to_owned());
    }
    let opts = field(&v, "default-network-opts").and_then(|o| field(o, "bridge")).and_then(Value::as_object);
    for k in opts.map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
        if k != MASQUERADE && k != MTU {
            out.push(format!("daemon.json `default-network-opts` sets `{k}` on every new bridge network, past the proxy's network rules"));
        }
    }
    out
}

/// Go matches JSON keys to struct fields case-insensitively; daemon.json is read that way.
fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardened_config_has_no_warnings() {
        let text = r#"{"builder":{"entitlements":{"network-host":false,"security-insecure":false}}}"#;
        assert!(warnings(Some(text), Some(20)).is_empty());
    }

    #[test]
    fn the_packaged_daemon_json_has_no_warnings() {
        let text = include_str!("../../packaging/daemon.json");
        assert_eq!(warnings(Some(text), Some(28)), Vec::<String>::new());
    }

    #[test]
    fn default_config_warns_about_host_network_builds() {
        assert_eq!(warnings(None, Some(20)).len(), 1);
        assert!(warnings(Some("{}"), Some(20))[0].contains("network-host"));
        let w = warnings(Some(r#"{"default-network-opts":{"bridge":{"com.docker.network.bridge.enable_icc":"false"}}}"#), Some(28));
        assert!(w.iter().any(|m| m.contains("enable_icc")));
    }
}
