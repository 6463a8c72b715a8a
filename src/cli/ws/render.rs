//! Human-readable rendering of the service's answers for `dockwarden ws` (`--json` prints
//! them raw). Each command picks its renderer: [`render`] for the answers that carry their
//! workspace, the others for what a verb did (file operations, resize, approve, exec, connect,
//! info), so an answer without a workspace never prints an empty workspace block.

use std::fmt::Write;

use serde_json::Value;

use crate::workspace::client::calls::FileCall;

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

/// What a restore did: where from, what it could not bring back, where the damaged tree went.
fn recovery_lines(r: &Value, out: &mut String) {
    match r["restored_from"].as_str() {
        Some(from) => {
            let _ = writeln!(out, "restored from {from} ({})", s(&r["reason"]));
        }
        // A runtime restarted after a part died: nothing was restored.
        None => {
            let _ = writeln!(out, "{}", s(&r["reason"]));
        }
    }
    if let Some(list) = r["unrecovered"].as_array().filter(|l| !l.is_empty()) {
        let _ = writeln!(out, "not recovered ({}):", list.len());
        for p in list {
            let _ = writeln!(out, "  {}", s(p));
        }
    }
    if let Some(at) = r["preserved_at"].as_str() {
        let _ = writeln!(out, "the damaged worktree was kept at {at}");
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
            notes(setup, out);
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

/// `resumed` and `recovery` of a call that may start a stopped workspace first.
fn resumed_lines(v: &Value, out: &mut String) {
    if v["resumed"] == true {
        let _ = writeln!(
            out,
            "resumed: the workspace was stopped and was started first"
        );
    }
    if v["recovery"].is_object() {
        recovery_lines(&v["recovery"], out);
    }
}

/// `ws suspend`: the workspace and the snapshot taken at suspension.
pub fn suspended(v: &Value) -> String {
    let mut out = String::new();
    let _ = write!(out, "suspended: ");
    workspace(&v["workspace"], &mut out);
    match (v["snapshot_id"].as_str(), v["snapshot_error"].as_str()) {
        (Some(id), _) => {
            let _ = writeln!(out, "snapshot at suspension: {id}");
        }
        (None, Some(e)) => {
            let _ = writeln!(out, "suspended without a snapshot: {e}");
        }
        (None, None) => {
            let _ = writeln!(out, "already suspended; nothing changed");
        }
    }
    out
}

/// `ws resume`: the workspace and how long the thaw took.
pub fn thawed(v: &Value) -> String {
    let mut out = String::new();
    if v["thawed"] == true {
        let us = v["thaw_us"].as_u64().unwrap_or(0);
        let _ = write!(out, "resumed in {:.1} ms: ", us as f64 / 1000.0);
    } else {
        let _ = write!(out, "not suspended; nothing to resume: ");
    }
    workspace(&v["workspace"], &mut out);
    out
}

/// `ws connect`: the workspace, then what a restore recovered and what did not come back.
pub fn connected(v: &Value) -> String {
    let mut out = String::new();
    let _ = write!(out, "connected: ");
    workspace(&v["workspace"], &mut out);
    if v["recovery"].is_object() {
        recovery_lines(&v["recovery"], &mut out);
    }
    notes(v, &mut out);
    out
}

/// `ws info`: the workspace and its last recovery.
pub fn info(v: &Value) -> String {
    let mut out = String::new();
    workspace(v, &mut out);
    if v["last_recovery"].is_object() {
        let _ = write!(out, "last recovery: ");
        recovery_lines(&v["last_recovery"], &mut out);
    }
    out
}

/// After `ws exec`'s output (printed on stderr): a timeout, a resume, a restore.
pub fn exec_report(id: &str, r: &Value) -> String {
    let mut out = String::new();
    if r["timed_out"] == true {
        let _ = writeln!(
            out,
            "dockwarden: command timed out; its process group was killed (exit 124)"
        );
    }
    let mut lines = String::new();
    resumed_lines(r, &mut lines);
    notes(r, &mut lines);
    for l in lines.lines() {
        let _ = writeln!(out, "dockwarden: {id}: {l}");
    }
    out
}

/// `ws files write`.
pub fn file_written(path: &str, len: usize, v: &Value) -> String {
    let mut out = format!("wrote {path} ({len} bytes)\n");
    resumed_lines(v, &mut out);
    out
}

/// Every `ws files` operation but read and write.
pub fn file_op(call: &FileCall, v: &Value) -> String {
    let mut out = String::new();
    match call {
        FileCall::List { .. } => return table(v.as_array().map_or(&[][..], Vec::as_slice)),
        FileCall::Exists { path } => {
            let yes = v["exists"] == true;
            let _ = writeln!(
                out,
                "{path}: {}",
                if yes { "exists" } else { "does not exist" }
            );
            return out;
        }
        FileCall::Info { .. } => {
            let _ = writeln!(
                out,
                "{}: {}, {} bytes, mode {:o}, modified {} ms after the epoch",
                s(&v["path"]),
                s(&v["kind"]),
                v["size"],
                v["mode"].as_u64().unwrap_or(0),
                v["modified_ms"]
            );
            return out;
        }
        FileCall::Mkdir { path, parents } => {
            let with = if *parents { " (with its parents)" } else { "" };
            let _ = writeln!(out, "created directory {path}{with}");
        }
        FileCall::Rename { from, to } => {
            let _ = writeln!(out, "renamed {from} to {to}");
        }
        FileCall::Copy { from, to } => {
            let _ = writeln!(out, "copied {from} to {to}");
        }
        FileCall::Remove { path, recursive } => {
            let what = if *recursive {
                " and everything in it"
            } else {
                ""
            };
            let _ = writeln!(out, "removed {path}{what}");
        }
    }
    resumed_lines(v, &mut out);
    out
}

/// A size on one axis as the user typed it: millicores as cores, bytes in binary units.
fn amount(axis: &str, v: &Value) -> String {
    let Some(n) = v.as_u64() else {
        return "-".into();
    };
    match axis {
        "cpu" => format!("{} cores", n as f64 / 1000.0),
        "memory" | "disk" => {
            const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
            let mut i = 0;
            let mut d = n;
            while d >= 1024 && d % 1024 == 0 && i + 1 < UNITS.len() {
                d /= 1024;
                i += 1;
            }
            format!("{d} {}", UNITS[i])
        }
        _ => n.to_string(),
    }
}

/// One line per axis of a resize: what it goes from and to, and what happened to it.
fn change_lines(v: &Value, state: &str, out: &mut String) {
    for c in v["changes"].as_array().into_iter().flatten() {
        let axis = s(&c["axis"]);
        let part = match c["part"].as_str() {
            Some("burst_limit") => "burst limit",
            Some("reservation") => "reservation",
            _ => "",
        };
        let what = match (c["action"].as_str(), state) {
            (Some("apply"), "pending_approval") => "waiting for approval".to_string(),
            (Some("apply"), "applied") => "applied".to_string(),
            (Some("apply"), "rejected") => "not applied (rejected)".to_string(),
            (Some("apply"), other) => format!("not applied ({other})"),
            (Some(a), _) => match c["reason"].as_str() {
                Some(r) => format!("{a}: {r}"),
                None => a.to_string(),
            },
            (None, _) => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "  {axis} {part}: {} -> {}: {what}",
            amount(&axis, &c["from"]),
            amount(&axis, &c["to"])
        );
    }
}

/// `ws resize`: the request, its state, and each axis: applied, or waiting for approval
/// with the command that approves it.
pub fn resize(v: &Value) -> String {
    let mut out = String::new();
    let id = s(&v["request"]);
    let state = s(&v["state"]);
    let _ = writeln!(
        out,
        "resize request {id} for {}: {}",
        s(&v["workspace_id"]),
        state.replace('_', " ")
    );
    change_lines(v, &state, &mut out);
    if state == "pending_approval" {
        for why in v["approval_needed"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "approval needed: {}", s(why));
        }
        let _ = writeln!(
            out,
            "approve with `dockwarden ws approve {id}` or reject with `dockwarden ws reject {id}`"
        );
    }
    interrupted(v, &mut out);
    if let Some(e) = v["error"].as_str() {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

/// `ws approve` and `ws reject`: what the decision applied.
pub fn decided(v: &Value) -> String {
    let mut out = String::new();
    let state = s(&v["state"]);
    let verb = match state.as_str() {
        "rejected" => "rejected".to_string(),
        "applied" => "approved and applied".to_string(),
        "failed" => "approved, but applying it failed".to_string(),
        other => other.replace('_', " "),
    };
    let _ = writeln!(
        out,
        "resize request {} for {}: {verb}",
        s(&v["request"]),
        s(&v["workspace_id"])
    );
    change_lines(v, &state, &mut out);
    interrupted(v, &mut out);
    if let Some(e) = v["error"].as_str() {
        let _ = writeln!(out, "error: {e}");
    }
    out
}

fn interrupted(v: &Value, out: &mut String) {
    if v["disruptive"] == true {
        let stopped: Vec<String> = v["interrupted"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        let _ = writeln!(out, "disruptive: stopped {}", stopped.join(", "));
    }
}
