//! The daemon settings the proxy relies on but cannot enforce, read from `daemon.json` at
//! start-up: BuildKit's builder entitlements (the proxy refuses them on `/grpc`, and the daemon
//! should refuse them too: defense in depth, and the 20.10 CLI's `/session` builds are not
//! parsed) and `default-network-opts` (merged into every new network after the proxy's checks).
//! Entitlements left on are logged as errors, the rest as warnings.

use serde_json::Value;

use crate::policy::network::spec::{MASQUERADE, MTU};

/// Where dockerd reads its configuration by default.
pub const DEFAULT_PATH: &str = "/etc/docker/daemon.json";

/// One finding about the daemon's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Logged as an error (a build could reach the host if the proxy's own check failed).
    pub error: bool,
    pub text: String,
}

/// The findings for a daemon configuration file's text (`None`: the file is absent).
pub fn findings(text: Option<&str>, daemon_major: Option<u64>) -> Vec<Finding> {
    let fix = r#"set `{"builder": {"Entitlements": {"network-host": false, "security-insecure": false}}}` in daemon.json and restart dockerd"#;
    let error = |t: String| Finding {
        error: true,
        text: t,
    };
    let Some(text) = text else {
        return vec![error(format!(
            "daemon.json not found: the daemon grants BuildKit builds the host network (`network.host`) unless the proxy refuses it; {fix}"
        ))];
    };
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return vec![error(
            "daemon.json could not be parsed; the builder entitlements could not be checked"
                .to_owned(),
        )];
    };
    let mut out = Vec::new();
    let ent = field(&v, "builder").and_then(|b| field(b, "entitlements"));
    let flag = |k: &str| ent.and_then(|e| field(e, k)).and_then(Value::as_bool);
    if flag("network-host") != Some(false) {
        out.push(error(format!("builder entitlement `network-host` is not off: the daemon lets BuildKit builds use the host network unless the proxy refuses it; {fix}")));
    }
    if flag("security-insecure") == Some(true) {
        out.push(error(format!("builder entitlement `security-insecure` is on: the daemon lets BuildKit builds run privileged steps unless the proxy refuses it; {fix}")));
    }
    if daemon_major.is_some_and(|m| m >= 29) && flag("device") != Some(false) {
        out.push(error("builder entitlement `device` is not off: the daemon lets BuildKit builds use host devices unless the proxy refuses it; set `\"device\": false` too".to_owned()));
    }
    let opts = field(&v, "default-network-opts")
        .and_then(|o| field(o, "bridge"))
        .and_then(Value::as_object);
    for k in opts
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        if k != MASQUERADE && k != MTU {
            out.push(Finding { error: false, text: format!("daemon.json `default-network-opts` sets `{k}` on every new bridge network, past the proxy's network rules") });
        }
    }
    out
}

/// With the budget on: BuildKit places RUN steps under the daemon's own `cgroup-parent`
/// (`<parent>/buildkit/<id>`) wherever it ignores the `cgroup-parent` frontend attribute the
/// proxy sets: `/build?version=2` on every engine, and `/grpc` on Engine 20.10.
pub fn budget_findings(text: Option<&str>, parent: &str) -> Vec<Finding> {
    let v = text.and_then(|t| serde_json::from_str::<Value>(t).ok());
    let set = v
        .as_ref()
        .and_then(|v| field(v, "cgroup-parent"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if set == parent {
        return Vec::new();
    }
    vec![Finding {
        error: true,
        text: format!(
            "daemon.json `cgroup-parent` is not `{parent}`: BuildKit RUN steps of `/build?version=2` (and of `/grpc` on Engine 20.10) \
             run outside the shared budget; set `\"cgroup-parent\": \"{parent}\"` in daemon.json and restart dockerd"
        ),
    }]
}

/// The texts of [`findings`].
pub fn warnings(text: Option<&str>, daemon_major: Option<u64>) -> Vec<String> {
    findings(text, daemon_major)
        .into_iter()
        .map(|f| f.text)
        .collect()
}

/// Go matches JSON keys to struct fields case-insensitively; daemon.json is read that way.
fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardened_config_has_no_warnings() {
        let text =
            r#"{"builder":{"entitlements":{"network-host":false,"security-insecure":false}}}"#;
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
        let w = warnings(
            Some(
                r#"{"default-network-opts":{"bridge":{"com.docker.network.bridge.enable_icc":"false"}}}"#,
            ),
            Some(28),
        );
        assert!(w.iter().any(|m| m.contains("enable_icc")));
    }

    #[test]
    fn a_daemon_cgroup_parent_other_than_the_budget_is_an_error() {
        assert!(
            budget_findings(Some(r#"{"cgroup-parent":"/dockwarden"}"#), "/dockwarden").is_empty()
        );
        assert!(budget_findings(Some("{}"), "/dockwarden")[0].error);
        assert_eq!(budget_findings(None, "/dockwarden").len(), 1);
    }

    #[test]
    fn entitlements_left_on_are_errors_and_network_options_warnings() {
        let f = findings(
            Some(
                r#"{"default-network-opts":{"bridge":{"com.docker.network.bridge.enable_icc":"false"}}}"#,
            ),
            Some(26),
        );
        assert!(f.iter().any(|x| x.error && x.text.contains("network-host")));
        assert!(f.iter().any(|x| !x.error && x.text.contains("enable_icc")));
        assert!(findings(None, Some(26)).iter().all(|x| x.error));
        let on = r#"{"builder":{"entitlements":{"network-host":false,"security-insecure":true}}}"#;
        assert_eq!(
            findings(Some(on), Some(26))
                .iter()
                .filter(|x| x.error)
                .count(),
            1
        );
    }
}
