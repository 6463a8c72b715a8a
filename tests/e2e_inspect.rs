//! Inspect transparency (issue 12 item 6): a client reads back the bind source it asked for,
//! not the proxy's pin, on both engines, with docker-py's own calls; `--show-pins` shows the
//! pins for reviewers. The daemon itself still mounts the pin.

mod common;
mod escapes_support;

use std::process::Command;
use std::time::Duration;

use common::{Engine, IMAGE, engines_or_skip, run_with_timeout, unique};

const PINS: &str = "/run/dockwarden/pins/";

fn docker_py(e: &Engine, p: &common::Proxy, path: &str, name: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/bind_source.py");
    let mut c = Command::new("python3");
    c.arg(script)
        .args([IMAGE, path, name])
        .env("DOCKER_HOST", p.docker_host());
    let out = run_with_timeout(&mut c, None, Duration::from_secs(120));
    let text = common::stdout(&out);
    assert!(
        out.status.success(),
        "engine {}: docker-py: {}\n{text}\nproxy log: {}",
        e.name,
        common::stderr(&out),
        p.log()
    );
    serde_json::from_str(text.lines().last().unwrap_or("")).expect("one JSON line")
}

/// docker-py's `Mounts[0]['Source'] == path` (its bind tests), `HostConfig.Binds`,
/// `HostConfig.Mounts[].Source` and the container list all show the workspace path.
#[test]
fn docker_py_reads_back_the_bind_source_it_asked_for() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let path = p.workspace.join("data").display().to_string();
        let name = unique("pysrc");
        let _c = escapes_support::Cleanup {
            engine: e.clone(),
            containers: vec![name.clone()],
            networks: Vec::new(),
        };
        let v = docker_py(&e, &p, &path, &name);
        assert_eq!(
            v["inspect_sources"],
            serde_json::json!([path, path]),
            "engine {}: {v}",
            e.name
        );
        assert_eq!(
            v["binds"],
            serde_json::json!([format!("{path}:/data:ro")]),
            "engine {}: {v}",
            e.name
        );
        assert_eq!(
            v["hc_mounts"],
            serde_json::json!([path]),
            "engine {}: {v}",
            e.name
        );
        assert_eq!(
            v["list_sources"],
            serde_json::json!([path, path]),
            "engine {}: {v}",
            e.name
        );
        assert_eq!(v["high_level"], path, "engine {}: {v}", e.name);
        eprintln!(
            "engine {}: docker-py read back {path} in inspect, Binds, Mounts and the list",
            e.name
        );
    }
}

/// With `--show-pins` the answers carry the pin, which is what the daemon really mounts.
#[test]
fn show_pins_keeps_the_pin_paths_for_reviewers() {
    for e in engines_or_skip() {
        let p = e.proxy(&["--show-pins"]);
        let path = p.workspace.join("data").display().to_string();
        let name = unique("showpins");
        let _c = escapes_support::Cleanup {
            engine: e.clone(),
            containers: vec![name.clone()],
            networks: Vec::new(),
        };
        common::ok(p.docker(&[
            "create",
            "--name",
            &name,
            "-v",
            &format!("{path}:/data"),
            IMAGE,
            "true",
        ]));
        let through = common::ok(p.docker(&[
            "inspect",
            "-f",
            "{{range .Mounts}}{{.Source}}{{end}}",
            &name,
        ]));
        let direct = e.ok(&[
            "inspect",
            "-f",
            "{{range .Mounts}}{{.Source}}{{end}}",
            &name,
        ]);
        assert!(through.starts_with(PINS), "engine {}: {through}", e.name);
        assert_eq!(through, direct, "engine {}", e.name);
        let p2 = e.proxy(&[]);
        let rewritten = common::ok(p2.docker(&[
            "inspect",
            "-f",
            "{{range .Mounts}}{{.Source}}{{end}}",
            &name,
        ]));
        // Another proxy has no record of this pin, so it cannot map it back.
        assert_eq!(rewritten, direct, "engine {}", e.name);
        eprintln!("engine {}: --show-pins shows {through}", e.name);
    }
}
