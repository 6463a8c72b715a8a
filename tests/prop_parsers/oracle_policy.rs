//! The Go oracle labels bodies: whatever Go decodes to a forbidden setting (in the >= 27.0 or
//! the <= 26.x shape) must never be allowed by `policy::decide`, and the body the proxy
//! forwards for an allowed request must not decode, in Go, to a forbidden setting either.

use super::*;
use gooracle::{go_views, is_error, oracle};

/// Why Go's view of a body is forbidden, if it is.
fn forbidden_reason(view: &Value) -> Option<String> {
    if is_error(view) {
        return None;
    }
    let hc = &view["HostConfig"];
    let strs = |f: &str| -> Vec<String> {
        hc[f]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    if hc["Privileged"] == Value::Bool(true) {
        return Some("Privileged".into());
    }
    if strs("CapAdd").iter().any(|c| !c.is_empty()) {
        return Some(format!("CapAdd {:?}", strs("CapAdd")));
    }
    for ns in [
        "NetworkMode",
        "PidMode",
        "IpcMode",
        "UTSMode",
        "UsernsMode",
        "CgroupnsMode",
    ] {
        if hc[ns] == "host" {
            return Some(format!("{ns} host"));
        }
    }
    if let Some(b) = strs("Binds").iter().find(|b| {
        b.starts_with("/etc") || b.starts_with("/:") || b.starts_with("/var/run/docker.sock:/s:")
    }) {
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
    for (seed, odd, n) in [(0x0AC1_E001, false, 5000), (0x0AC1_E002, true, 2500)] {
        let mut g = Gen::new(seed, odd);
        bodies.extend((0..n).map(|_| g.body()));
    }
    let views = go_views(bin, &bodies);
    let (mut labelled, mut parsed, mut allowed, mut forwarded) = (0, 0, Vec::new(), Vec::new());
    for (body, v) in bodies.iter().zip(&views) {
        let verdict = create_verdict(body);
        if let Verdict::Allow(p) = &verdict {
            // What the daemon will read: the policy's rewritten body, else the canonical bytes.
            let out = p
                .body()
                .cloned()
                .or_else(|| json::parse(body).ok())
                .map(|j| j.to_bytes());
            forwarded.push((body.clone(), out.unwrap_or_default()));
        }
        let Some(why) = forbidden_reason(&v.modern).or_else(|| forbidden_reason(&v.legacy)) else {
            continue;
        };
        labelled += 1;
        parsed += usize::from(json::parse(body).is_ok());
        if let Verdict::Allow(p) = verdict {
            allowed.push(format!(
                "{why}: {:?} (rules {:?})",
                String::from_utf8_lossy(body),
                p.rules()
            ));
        }
    }
    let sent: Vec<Vec<u8>> = forwarded.iter().map(|(_, out)| out.clone()).collect();
    let mut daemon_rejects = 0;
    for ((body, out), v) in forwarded.iter().zip(go_views(bin, &sent)) {
        daemon_rejects += usize::from(is_error(&v.modern));
        let (body, out_text) = (String::from_utf8_lossy(body), String::from_utf8_lossy(out));
        if let Some(why) = forbidden_reason(&v.modern).or_else(|| forbidden_reason(&v.legacy)) {
            allowed.push(format!(
                "forwarded body decodes to {why}: {body:?} sent as {out_text:?}"
            ));
        }
        // The forwarded body is itself unambiguous, and Go reads it as our accessors do.
        match gooracle::rust_views(out) {
            Err(e) => allowed.push(format!(
                "forwarded body refused by our own reader ({e}): {out_text:?}"
            )),
            Ok(views) => {
                for (shape, ours) in views {
                    // A type error the policy did not care about (e.g. `"Labels": true`) is
                    // an error for Go too: the daemon refuses the request.
                    let agree = match &ours {
                        Ok(view) => view == v.get(shape),
                        Err(_) => is_error(v.get(shape)),
                    };
                    if !agree {
                        allowed.push(format!(
                            "forwarded body read differently by Go ({shape:?}): {out_text:?}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!(
        "oracle_policy: {} bodies, {labelled} forbidden per Go, {parsed} of those accepted by the reader and judged, {} allowed bodies re-checked as forwarded ({daemon_rejects} of them type errors for Go in fields the policy ignores), {} violations, {:?}",
        bodies.len(),
        forwarded.len(),
        allowed.len(),
        started.elapsed()
    );
    for a in allowed.iter().take(10) {
        eprintln!("ALLOWED {a}");
    }
    assert!(
        allowed.is_empty(),
        "{} bodies Go decodes to a forbidden setting were allowed",
        allowed.len()
    );
    assert!(
        parsed > 800,
        "too few forbidden bodies reached the policy: {parsed}"
    );
    assert!(
        forwarded.len() > 1000,
        "too few allowed bodies to re-check: {}",
        forwarded.len()
    );
}
