//! The Go oracle labels bodies: whatever Go decodes to a forbidden setting (in the >= 27.0 or
//! the <= 26.x shape) must never be allowed by `policy::decide`.

use super::*;
use gooracle::{go_views, is_error, oracle};

/// Why Go's view of a body is forbidden, if it is.
fn forbidden_reason(view: &Value) -> Option<String> {
    if is_error(view) {
        return None;
    }
    let hc = &view["HostConfig"];
    let strs = |f: &str| -> Vec<String> {
        hc[f].as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
    };
    if hc["Privileged"] == Value::Bool(true) {
        return Some("Privileged".into());
    }
    if strs("CapAdd").iter().any(|c| !c.is_empty()) {
        return Some(format!("CapAdd {:?}", strs("CapAdd")));
    }
    for ns in ["NetworkMode", "PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode"] {
        if hc[ns] == "host" {
            return Some(format!("{ns} host"));
        }
    }
    if let Some(b) = strs("Binds").iter().find(|b| b.starts_with("/etc") || b.starts_with("/:") || b.starts_with("/var/run/docker.sock:/s:")) {
        return Some(format!("Binds {b}"));
    }
    let devices = hc["Devices"].as_array().map_or(0, Vec::len);
    (devices > 0).then(|| "Devices".into())
}

#[test]
fn bodies_go_decodes_to_forbidden_settings_are_never_allowed() {
    let bin = match oracle() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let started = std::time::Instant::now();
    let mut bodies = Vec::new();
    for (seed, odd) in [(0x0AC1_E001, false), (0x0AC1_E002, true)] {
        let mut g = Gen::new(seed, odd);
        bodies.extend((0..2500).map(|_| g.body()));
    }
    let views = go_views(bin, &bodies);
    let (mut labelled, mut parsed, mut allowed) = (0, 0, Vec::new());
    for (body, v) in bodies.iter().zip(&views) {
        let Some(why) = forbidden_reason(&v.modern).or_else(|| forbidden_reason(&v.legacy)) else { continue };
        labelled += 1;
        parsed += usize::from(json::parse(body).is_ok());
        if let Verdict::Allow(p) = create_verdict(body) {
            allowed.push(format!("{why}: {:?} (rules {:?})", String::from_utf8_lossy(body), p.rules()));
        }
    }
    eprintln!(
        "oracle_policy: {} bodies, {labelled} forbidden per Go, {parsed} of those accepted by the reader and judged, {} allowed, {:?}",
        bodies.len(),
        allowed.len(),
        started.elapsed()
    );
    for a in allowed.iter().take(10) {
        eprintln!("ALLOWED {a}");
    }
    assert!(allowed.is_empty(), "{} bodies Go decodes to a forbidden setting were allowed", allowed.len());
    assert!(parsed > 500, "too few forbidden bodies reached the policy: {parsed}");
}
