//! The log output of the built binary when stderr is a file, as under systemd or a log
//! collector: no ANSI colour codes in text lines, and with `--log-format json` nothing but JSON
//! objects, fatal errors included (issue 25, point 5).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_dockwarden");

/// A proxy in front of a daemon socket that does not exist. With `--no-cgroup-budget` it logs
/// warnings and keeps going (it is serving by the `ready` line, or has failed at the pins
/// without root); without it, it fails at once at the daemon's `/info`.
fn proxy(dir: &Path, format: Option<&str>, no_budget: bool) -> Command {
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace dir");
    let mut cmd = Command::new(EXE);
    cmd.arg("proxy")
        .arg("--workspace")
        .arg(&workspace)
        .arg("--listen")
        .arg(dir.join("proxy.sock"))
        .arg("--upstream")
        .arg(dir.join("no-such-daemon.sock"))
        .arg("--pin-dir")
        .arg(dir.join("pins"))
        .arg("--audit-log")
        .arg(dir.join("audit.jsonl"))
        .arg("--dry-run");
    if let Some(format) = format {
        cmd.args(["--log-format", format]);
    }
    if no_budget {
        cmd.arg("--no-cgroup-budget");
    }
    cmd
}

/// Runs `cmd` with stderr to a file until it exits or its stderr holds `until` (then kills it),
/// and returns the exit status (None when killed) and what it wrote on stderr.
fn stderr_of(mut cmd: Command, dir: &Path, until: &str) -> (Option<i32>, String) {
    let path = dir.join("stderr.log");
    let file = std::fs::File::create(&path).expect("stderr file");
    let mut child = cmd
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .expect("start dockwarden");
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        let seen = std::fs::read_to_string(&path).unwrap_or_default();
        if seen.contains(until) || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (code, std::fs::read_to_string(&path).expect("read stderr"))
}

fn assert_no_ansi(stderr: &str) {
    assert!(
        !stderr.contains("\x1b["),
        "ANSI escape in a log written to a file:\n{stderr}"
    );
}

/// Every line is a JSON object with a `level` and a `fields.message`; returns them.
fn json_lines(stderr: &str) -> Vec<serde_json::Value> {
    assert!(!stderr.trim().is_empty(), "nothing was logged");
    stderr
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}\nin:\n{stderr}"));
            assert!(v["level"].is_string(), "no `level` in {line}");
            assert!(
                v["fields"]["message"].is_string(),
                "no `fields.message` in {line}"
            );
            v
        })
        .collect()
}

#[test]
fn proxy_text_log_to_a_file_has_no_colour_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, stderr) = stderr_of(
        proxy(dir.path(), Some("text"), true),
        dir.path(),
        "proxy ready",
    );
    assert!(stderr.contains("WARN"), "no warning was logged:\n{stderr}");
    assert!(stderr.contains("--no-cgroup-budget"), "{stderr}");
    assert_no_ansi(&stderr);
}

#[test]
fn proxy_text_is_the_default_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, stderr) = stderr_of(proxy(dir.path(), None, true), dir.path(), "proxy ready");
    assert!(
        stderr.lines().any(|l| l.contains(" WARN ")),
        "not text lines:\n{stderr}"
    );
    assert!(!stderr.trim_start().starts_with('{'), "{stderr}");
    assert_no_ansi(&stderr);
}

#[test]
fn proxy_json_log_is_one_object_a_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, stderr) = stderr_of(
        proxy(dir.path(), Some("json"), true),
        dir.path(),
        "proxy ready",
    );
    let lines = json_lines(&stderr);
    assert!(
        lines.iter().any(|v| v["level"] == "WARN"
            && v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("--no-cgroup-budget"))),
        "no budget warning among:\n{stderr}"
    );
    assert_no_ansi(&stderr);
}

#[test]
fn proxy_fatal_error_is_a_json_line_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = stderr_of(
        proxy(dir.path(), Some("json"), false),
        dir.path(),
        "proxy ready",
    );
    assert_eq!(
        code,
        Some(1),
        "the proxy must fail without a daemon:\n{stderr}"
    );
    let lines = json_lines(&stderr);
    let last = lines.last().expect("a line");
    assert_eq!(last["level"], "ERROR", "{stderr}");
    let message = last["fields"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("/info"), "cause chain missing: {message}");
}

#[test]
fn proxy_fatal_error_in_text_keeps_the_cause_chain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, stderr) = stderr_of(
        proxy(dir.path(), Some("text"), false),
        dir.path(),
        "proxy ready",
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("Error: "), "{stderr}");
    assert!(stderr.contains("Caused by:"), "{stderr}");
    assert_no_ansi(&stderr);
}

#[test]
fn serve_json_log_reports_a_refused_start_as_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(EXE);
    cmd.arg("serve")
        .arg("--socket")
        .arg(dir.path().join("ws.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--uid-count", "40000", "--log-format", "json"]);
    let (code, stderr) = stderr_of(cmd, dir.path(), "\u{0}");
    assert_eq!(code, Some(1), "{stderr}");
    let lines = json_lines(&stderr);
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(lines[0]["level"], "ERROR");
    assert!(
        lines[0]["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--uid-count 40000")),
        "{stderr}"
    );
}

#[test]
fn log_format_rejects_unknown_values() {
    let out = Command::new(EXE)
        .args(["serve", "--socket", "/x", "--state-dir", "/y"])
        .args(["--log-format", "xml"])
        .output()
        .expect("run dockwarden");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("text") && stderr.contains("json"),
        "{stderr}"
    );
}
