//! Human-readable rendering of API answers for `dockwarden ws` (`--json` prints them raw).

use std::fmt::Write;

use serde_json::Value;

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn meta(v: &Value) -> String {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", s(v)))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn snapshot_line(v: &Value) -> String {
    format!(
        "snapshot {}: {} files, {} bytes ({} new)",
        s(&v["id"]),
        v["files"],
        v["bytes"],
        v["new_bytes"]
    )
}

fn recovery_lines(r: &Value, out: &mut String) {
    let _ = writeln!(
        out,
        "restored from {} ({})",
        s(&r["restored_from"]),
        s(&r["reason"])
    );
    if let Some(list) = r["unrecovered"].as_array().filter(|l| !l.is_empty()) {
        let _ = writeln!(out, "not recovered ({}):", list.len());
        for p in list {
            let _ = writeln!(out, "  {}", s(p));
        }
    }
    let _ = writeln!(out, "note: {}", s(&r["note"]));
}

fn table(rows: &[Value]) -> String {
    let mut out = String::new();
    let first = rows.first().cloned().unwrap_or_default();
    if first.get("live").is_some() {
        let _ = writeln!(
            out,
            "{:<24} {:<9} {:<5} {:<22} METADATA",
            "ID", "STATUS", "LIVE", "LATEST SNAPSHOT"
        );
        for r in rows {
            let live = if r["live"] == true { "yes" } else { "no" };
            let _ = writeln!(
                out,
                "{:<24} {:<9} {:<5} {:<22} {}",
                s(&r["id"]),
                s(&r["status"]),
                live,
                s(&r["latest_snapshot"]),
                meta(&r["metadata"])
            );
        }
    } else if first.get("reason").is_some() {
        for r in rows {
            let _ = writeln!(out, "{} ({})", snapshot_line(r), s(&r["reason"]));
        }
    } else if first.get("kind").is_some() {
        for r in rows {
            let _ = writeln!(
                out,
                "{:<8} {:>10} {}",
                s(&r["kind"]),
                r["size"],
                s(&r["path"])
            );
        }
    } else {
        for r in rows {
            let _ = writeln!(out, "{}", s(r));
        }
    }
    out
}

fn workspace(w: &Value, out: &mut String) {
    let _ = writeln!(
        out,
        "{} ({}, uid {})",
        s(&w["id"]),
        s(&w["status"]),
        w["uid"]
    );
    let _ = writeln!(out, "  metadata: {}", meta(&w["metadata"]));
    let _ = writeln!(out, "  latest snapshot: {}", s(&w["latest_snapshot"]));
    let _ = writeln!(out, "  idle timeout: {}s", w["idle_timeout_secs"]);
    let rt = &w["runtime"];
    if !rt.is_null() {
        let _ = writeln!(
            out,
            "  runtime: {} ({})",
            s(&rt["runtime"]),
            s(&rt["source"])
        );
        for e in rt["evidence"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "    evidence: {}: {}", s(&e["file"]), s(&e["reason"]));
        }
    }
    if let Some(h) = w["docker_host"].as_str() {
        let _ = writeln!(out, "  DOCKER_HOST={h}");
    }
}

fn notes(v: &Value, out: &mut String) {
    for n in v["notes"].as_array().into_iter().flatten() {
        let _ = writeln!(out, "note: {}", s(n));
    }
}

fn created_lines(v: &Value, created: bool, out: &mut String) {
    let _ = write!(out, "{} ", if created { "created" } else { "exists:" });
    workspace(&v["workspace"], out);
    let setup = &v["workspace"]["setup"];
    match setup.get("ran") {
        Some(Value::Bool(true)) => {
            let timed_out = if setup["timed_out"] == true {
                " (timed out)"
            } else {
                ""
            };
            let _ = writeln!(out, "setup script exited {}{timed_out}", setup["exit_code"]);
            if setup["exit_code"] != 0 {
                let _ = writeln!(out, "{}", s(&setup["stderr"]));
            }
        }
        Some(_) => {
            let _ = writeln!(out, "no setup script");
        }
        None => {
            let from = s(&v["workspace"]["from_snapshot"]);
            let _ = writeln!(out, "setup not run: forked from snapshot {from}");
        }
    }
}

/// Renders any answer of the API for a terminal.
pub fn render(v: &Value) -> String {
    let mut out = String::new();
    if let Some(rows) = v.as_array() {
        return table(rows);
    }
    if let Some(created) = v.get("created") {
        created_lines(v, created == true, &mut out);
        notes(v, &mut out);
    } else if v.get("disruptive").is_some() {
        workspace(&v["workspace"], &mut out);
        if let Some(p) = v.get("previous") {
            let _ = writeln!(out, "previous runtime: {}", s(&p["runtime"]));
        }
        let stopped: Vec<String> = v["stopped"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        let _ = writeln!(
            out,
            "disruptive: stopped {}",
            if stopped.is_empty() {
                "nothing".into()
            } else {
                stopped.join(", ")
            }
        );
        notes(v, &mut out);
    } else if v.get("recovery").is_some() {
        workspace(&v["workspace"], &mut out);
        if !v["recovery"].is_null() {
            recovery_lines(&v["recovery"], &mut out);
        }
        notes(v, &mut out);
    } else if v.get("snapshot").is_some() && v.get("workspace").is_some() {
        workspace(&v["workspace"], &mut out);
        if !v["snapshot"].is_null() {
            let _ = writeln!(out, "{}", snapshot_line(&v["snapshot"]));
        }
        if let Some(e) = v.get("snapshot_error").and_then(Value::as_str) {
            let _ = writeln!(out, "stopped without a snapshot: {e}");
        }
    } else if v.get("reason").is_some() && v.get("files").is_some() {
        let _ = writeln!(out, "{}", snapshot_line(v));
    } else if let Some(d) = v.get("deleted").and_then(Value::as_array)
        && d.is_empty()
    {
        let _ = writeln!(out, "no workspace matched");
    } else if let Some(d) = v.get("deleted").and_then(Value::as_array) {
        let _ = writeln!(
            out,
            "deleted {}",
            d.iter().map(s).collect::<Vec<_>>().join(", ")
        );
    } else if let Some(e) = v.get("exists") {
        let _ = writeln!(out, "{e}");
    } else if v.get("uid").is_some() {
        workspace(v, &mut out);
    } else if v.get("ok").is_none() {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(v).unwrap_or_default()
        );
    }
    out
}
