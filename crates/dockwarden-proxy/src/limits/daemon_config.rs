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

/// What the proxy could learn of the daemon's settings at start-up ([`read`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonSettings {
    /// Where they were read, for messages (`dockerd 1941, /etc/docker/daemon.json`).
    pub source: String,
    /// The configuration file's text; `None`: absent or unreadable.
    pub text: Option<String>,
    /// `--cgroup-parent` on dockerd's command line.
    pub cgroup_parent_flag: Option<String>,
    /// dockerd's command line was read. Without it a flag could set what the file leaves unset.
    pub cmdline_seen: bool,
}

/// `--config-file` and `--cgroup-parent` on a dockerd command line (pflag's `--k v` and
/// `--k=v`; the last one wins, as in pflag).
pub fn parse_cmdline(args: &[String]) -> (Option<String>, Option<String>) {
    let (mut config, mut parent) = (None, None);
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        for (flag, slot) in [
            ("--config-file", &mut config),
            ("--cgroup-parent", &mut parent),
        ] {
            if a == flag {
                *slot = it.next().cloned();
            } else if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                *slot = Some(v.to_owned());
            }
        }
    }
    (config, parent)
}

/// The daemon's own cgroup parent (where BuildKit puts a step that names none):
/// `Some("")` when it is known to be unset (dockerd's default, `docker` or `system.slice`),
/// `None` when it cannot be told. dockerd refuses to start with both the flag and the file's key.
pub fn cgroup_parent(s: &DaemonSettings) -> Option<String> {
    if let Some(f) = &s.cgroup_parent_flag {
        return Some(f.clone());
    }
    let v = s.text.as_deref().map(serde_json::from_str::<Value>);
    let in_file = match &v {
        Some(Ok(v)) => field(v, "cgroup-parent").and_then(Value::as_str),
        // A file dockerd could not have parsed either: nothing is known.
        Some(Err(_)) => return None,
        None => None,
    };
    match in_file {
        Some(p) => Some(p.to_owned()),
        None if s.cmdline_seen => Some(String::new()),
        None => None,
    }
}

/// Whether the daemon's cgroup parent `daemon` is the budget's parent `ours` or beneath it.
/// cgroupfs: BuildKit joins the parent to `/` (`/dockwarden`, `dockwarden` and `/dockwarden/`
/// are one place); a `..` is never inside. systemd: `dockwarden-x.slice` is in `dockwarden.slice`.
pub fn within(daemon: &str, ours: &str) -> bool {
    if let (Some(d), Some(o)) = (daemon.strip_suffix(".slice"), ours.strip_suffix(".slice")) {
        return !o.is_empty() && (d == o || d.strip_prefix(o).is_some_and(|r| r.starts_with('-')));
    }
    let parts = |p: &str| -> Option<Vec<String>> {
        let v: Vec<String> = p
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_owned)
            .collect();
        (!v.iter().any(|c| c == "..")).then_some(v)
    };
    match (parts(daemon), parts(ours)) {
        (Some(d), Some(o)) => !o.is_empty() && d.len() >= o.len() && d[..o.len()] == o[..],
        _ => false,
    }
}

/// Where BuildKit steps land, from the daemon's settings: inside the budget `parent` or not,
/// and the start-up finding when not.
pub fn build_placement(s: &DaemonSettings, parent: &str) -> (bool, Option<Finding>) {
    let fix = format!(
        "set `\"cgroup-parent\": \"{parent}\"` in daemon.json (packaging/daemon.json) and restart dockerd"
    );
    let what = "BuildKit builds the proxy cannot place itself (`/build?version=2`, image frontends, and `/grpc` on Engine 20.10) are refused with rule `limits.build_budget`";
    let text = match cgroup_parent(s) {
        Some(p) if within(&p, parent) => return (true, None),
        Some(p) if p.is_empty() => format!(
            "the daemon ({}) has no `cgroup-parent`: {what}; {fix}",
            s.source
        ),
        Some(p) => format!(
            "the daemon's `cgroup-parent` is `{p}` ({}), outside the budget `{parent}`: {what}; {fix}",
            s.source
        ),
        None => format!(
            "the daemon's `cgroup-parent` could not be read ({}: its process is not visible and the file does not set it): {what}; {fix}",
            s.source
        ),
    };
    (false, Some(Finding { error: false, text }))
}

/// Reads the settings of the daemon behind `upstream`: its process is the peer of a connection
/// (`SO_PEERCRED`), its flags are on its command line, and its configuration file (its
/// `--config-file`, else [`DEFAULT_PATH`]) is read through `/proc/<pid>/root`, so a proxy in a
/// sidecar container with the host's PID namespace reads the host's file. When the process is
/// not visible (another PID namespace, a socket-activated daemon), `fallback` is read instead.
pub fn read(upstream: &std::path::Path, fallback: &std::path::Path) -> DaemonSettings {
    let from_fallback = |why: String| DaemonSettings {
        source: format!("{}; {why}", fallback.display()),
        text: std::fs::read_to_string(fallback).ok(),
        cgroup_parent_flag: None,
        cmdline_seen: false,
    };
    let pid = match peer_pid(upstream) {
        Ok(pid) => pid,
        Err(e) => return from_fallback(format!("the daemon's process: {e}")),
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if comm.trim() != "dockerd" || cmdline.is_empty() {
        return from_fallback(format!(
            "the socket's peer, pid {pid} (`{}`), is not a dockerd",
            comm.trim()
        ));
    }
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let (config, flag) = parse_cmdline(&args);
    let path = config.unwrap_or_else(|| DEFAULT_PATH.to_owned());
    let inside = if path.starts_with('/') {
        format!("/proc/{pid}/root{path}")
    } else {
        format!("/proc/{pid}/cwd/{path}")
    };
    DaemonSettings {
        source: format!("dockerd {pid}, {path}"),
        text: std::fs::read_to_string(inside).ok(),
        cgroup_parent_flag: flag,
        cmdline_seen: true,
    }
}

fn peer_pid(upstream: &std::path::Path) -> Result<i32, String> {
    let s = std::os::unix::net::UnixStream::connect(upstream)
        .map_err(|e| format!("connecting to {}: {e}", upstream.display()))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| format!("SO_PEERCRED: {e}"))?;
    match cred.pid() {
        0 => Err("its pid is not visible in this PID namespace".into()),
        pid => Ok(pid),
    }
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
        let text = include_str!("../../../../packaging/daemon.json");
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

    fn settings(text: Option<&str>, flag: Option<&str>, seen: bool) -> DaemonSettings {
        DaemonSettings {
            source: "test".into(),
            text: text.map(str::to_owned),
            cgroup_parent_flag: flag.map(str::to_owned),
            cmdline_seen: seen,
        }
    }

    #[test]
    fn the_daemon_cgroup_parent_comes_from_its_flag_else_its_file_else_is_unknown() {
        let p = |t, f, seen| cgroup_parent(&settings(t, f, seen));
        assert_eq!(
            p(Some(r#"{"cgroup-parent":"/dockwarden"}"#), None, false).as_deref(),
            Some("/dockwarden")
        );
        // Go reads daemon.json keys case-insensitively.
        assert_eq!(
            p(Some(r#"{"Cgroup-Parent":"/x"}"#), None, true).as_deref(),
            Some("/x")
        );
        assert_eq!(p(Some("{}"), Some("/f"), true).as_deref(), Some("/f"));
        assert_eq!(p(Some("{}"), None, true).as_deref(), Some(""));
        assert_eq!(p(None, None, true).as_deref(), Some(""));
        // Without the command line, a flag may have set what the file does not.
        assert_eq!(p(Some("{}"), None, false), None);
        assert_eq!(p(None, None, false), None);
        assert_eq!(p(Some("{not json"), None, true), None);
    }

    #[test]
    fn dockerd_flags_are_read_in_both_spellings() {
        let a = |v: &[&str]| parse_cmdline(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(a(&["dockerd"]), (None, None));
        assert_eq!(
            a(&["dockerd", "--config-file", "/c.json", "--cgroup-parent=/p"]),
            (Some("/c.json".into()), Some("/p".into()))
        );
        assert_eq!(
            a(&[
                "dockerd",
                "--config-file=/a",
                "--cgroup-parent",
                "/q",
                "--config-file",
                "/b"
            ]),
            (Some("/b".into()), Some("/q".into()))
        );
        // A flag's value is not read as a flag.
        assert_eq!(
            a(&["dockerd", "--data-root", "--cgroup-parent=/x"])
                .1
                .as_deref(),
            Some("/x")
        );
    }

    #[test]
    fn within_the_budget_means_the_same_cgroup_or_beneath_it() {
        for (d, o) in [
            ("/dockwarden", "/dockwarden"),
            ("dockwarden", "/dockwarden"),
            ("/dockwarden/", "/dockwarden"),
            ("/dockwarden/builds", "/dockwarden"),
            ("//dockwarden/./b", "/dockwarden"),
            ("dockwarden.slice", "dockwarden.slice"),
            ("dockwarden-builds.slice", "dockwarden.slice"),
        ] {
            assert!(within(d, o), "{d} in {o}");
        }
        for (d, o) in [
            ("", "/dockwarden"),
            ("/", "/dockwarden"),
            ("docker", "/dockwarden"),
            ("/dockwarden2", "/dockwarden"),
            ("/dockwarden/../x", "/dockwarden"),
            ("/a", "/"),
            ("system.slice", "dockwarden.slice"),
            ("dockwardenx.slice", "dockwarden.slice"),
            ("/dockwarden", "dockwarden.slice"),
        ] {
            assert!(!within(d, o), "{d} not in {o}");
        }
    }

    #[test]
    fn a_daemon_cgroup_parent_other_than_the_budget_is_said_with_its_fix() {
        let (inside, f) = build_placement(
            &settings(Some(r#"{"cgroup-parent":"/dockwarden"}"#), None, true),
            "/dockwarden",
        );
        assert!(inside && f.is_none());
        let (inside, f) = build_placement(&settings(Some("{}"), None, true), "/dockwarden");
        let t = f.expect("finding").text;
        assert!(
            !inside
                && t.contains("no `cgroup-parent`")
                && t.contains("limits.build_budget")
                && t.contains("\"cgroup-parent\": \"/dockwarden\""),
            "{t}"
        );
        let (inside, f) = build_placement(&settings(None, Some("/other"), true), "/dockwarden");
        assert!(!inside && f.expect("finding").text.contains("`/other`"));
        let (inside, f) = build_placement(&settings(None, None, false), "/dockwarden");
        assert!(!inside && f.expect("finding").text.contains("could not be read"));
    }

    #[test]
    fn the_peer_of_a_socket_is_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        assert_eq!(peer_pid(&path), Ok(std::process::id() as i32));
        // This test binary is not a dockerd: the fallback file is read, and flags are unknown.
        let fallback = dir.path().join("daemon.json");
        std::fs::write(&fallback, r#"{"cgroup-parent":"/fb"}"#).expect("write");
        let s = read(&path, &fallback);
        assert!(
            !s.cmdline_seen && s.source.contains("is not a dockerd"),
            "{s:?}"
        );
        assert_eq!(cgroup_parent(&s).as_deref(), Some("/fb"));
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
