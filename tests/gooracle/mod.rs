//! The Go oracle: builds `fixtures/gojson` with the machine's `go` and asks it how Go's
//! `encoding/json` decodes bodies into Docker-shaped structs. Shared by the differential test
//! and the property tests; see `docs/decoder.md`.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod generate;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use dockwarden::api::json::{self, Json};
use dockwarden::api::model_view::{CreateShape, create_view};
use serde_json::Value;

/// Go's verdicts on one body, one per create shape.
#[derive(Debug, Clone, PartialEq)]
pub struct GoViews {
    pub modern: Value,
    pub legacy: Value,
}

impl GoViews {
    pub fn get(&self, shape: CreateShape) -> &Value {
        match shape {
            CreateShape::Modern => &self.modern,
            CreateShape::Legacy => &self.legacy,
        }
    }
}

/// True when Go refused the body (syntax or type error).
pub fn is_error(v: &Value) -> bool {
    v.get("error").is_some()
}

/// Our view of a body in one shape, or the type error our accessors report.
pub type ShapeView = (CreateShape, Result<Value, json::DecodeError>);

/// Our side of the comparison: `Err` when the strict reader refuses the body, else the view
/// (or type error) per shape.
pub fn rust_views(body: &[u8]) -> Result<[ShapeView; 2], json::DecodeError> {
    let j: Json = json::parse(body)?;
    Ok([CreateShape::Modern, CreateShape::Legacy].map(|s| (s, create_view(&j, s))))
}

/// Builds the oracle once per test binary. `Err` carries the reason to skip (no `go`).
pub fn oracle() -> Result<&'static PathBuf, String> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(build).as_ref().map_err(Clone::clone)
}

fn build() -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/gojson");
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let bin = out_dir.join("gojson");
    // Build under a per-process name and rename, so two test binaries never race on one file.
    let tmp = out_dir.join(format!("gojson.{}", std::process::id()));
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(&src)
        // Hermetic: no network, no toolchain download, caches under target/ (CI may lack $HOME).
        .env("GOCACHE", out_dir.join("gocache"))
        .env("GOPATH", out_dir.join("gopath"))
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .status();
    match status {
        Err(e) => Err(format!(
            "`go` is not available ({e}); install golang-go to run the Go oracle"
        )),
        Ok(s) if !s.success() => panic!("`go build` of fixtures/gojson failed: {s}"),
        Ok(_) => {
            std::fs::rename(&tmp, &bin).map_err(|e| format!("cannot place the oracle: {e}"))?;
            Ok(bin)
        }
    }
}

/// Decodes every body with Go, in one process run.
pub fn go_views(bin: &PathBuf, bodies: &[Vec<u8>]) -> Vec<GoViews> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the Go oracle");
    let mut stdin = child.stdin.take().expect("oracle stdin");
    let input: String = bodies.iter().map(|b| hex(b) + "\n").collect();
    let writer =
        std::thread::spawn(move || stdin.write_all(input.as_bytes()).expect("feed the oracle"));
    let stdout = BufReader::new(child.stdout.take().expect("oracle stdout"));
    let mut out = Vec::with_capacity(bodies.len());
    for line in stdout.lines() {
        let v: Value =
            serde_json::from_str(&line.expect("oracle output")).expect("oracle prints JSON");
        out.push(GoViews {
            modern: v["modern"].clone(),
            legacy: v["legacy"].clone(),
        });
    }
    writer.join().expect("oracle feeder");
    assert!(
        child.wait().expect("oracle exit").success(),
        "the Go oracle failed"
    );
    assert_eq!(out.len(), bodies.len(), "one oracle answer per body");
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
