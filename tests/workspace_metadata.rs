//! `list` and `delete` by metadata subset match; `list` tells live from stopped.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use serde_json::{Value, json};
use workspace_support::Svc;

fn ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn list_and_delete_by_metadata_subset() {
    let svc = Svc::start(24000, &[], &[]);
    for (id, meta) in [
        ("ada", json!({ "conversation": "42", "user": "ada" })),
        ("bob", json!({ "conversation": "42", "user": "bob" })),
        ("other", json!({ "conversation": "7", "user": "ada" })),
    ] {
        svc.ok(
            "POST",
            "/v1/workspaces",
            Some(json!({ "id": id, "metadata": meta })),
        );
    }
    assert_eq!(
        ids(&svc.ok("GET", "/v1/workspaces?meta.conversation=42", None)),
        ["ada", "bob"]
    );
    assert_eq!(
        ids(&svc.ok("GET", "/v1/workspaces?meta.user=ada", None)),
        ["ada", "other"]
    );
    assert_eq!(
        ids(&svc.ok(
            "GET",
            "/v1/workspaces?meta.conversation=42&meta.user=bob",
            None
        )),
        ["bob"]
    );
    assert_eq!(
        ids(&svc.ok("GET", "/v1/workspaces?meta.conversation=4", None)),
        Vec::<String>::new()
    );

    svc.ok("POST", "/v1/workspaces/bob/kill", None);
    let listed = svc.ok("GET", "/v1/workspaces?meta.conversation=42", None);
    let live: Vec<(String, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_string(),
                e["live"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        live,
        vec![("ada".to_string(), true), ("bob".to_string(), false)]
    );
    let out = svc.cli(&["list", "--meta", "conversation=42"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("bob") && l.contains("stopped") && l.contains(" no ")),
        "{text}"
    );

    let shared_before = std::fs::read_dir(svc.state.join("snapshots/manifests"))
        .unwrap()
        .count();
    assert_eq!(shared_before, 4, "three baselines and bob's kill snapshot");
    let (status, v) = svc.api("DELETE", "/v1/workspaces", None);
    assert_eq!(
        (status, v["code"].as_str()),
        (400, Some("invalid")),
        "an empty filter never deletes everything"
    );
    let deleted = svc.ok("DELETE", "/v1/workspaces?meta.conversation=42", None);
    let mut d: Vec<String> = serde_json::from_value(deleted["deleted"].clone()).unwrap();
    d.sort();
    assert_eq!(d, ["ada", "bob"]);
    assert_eq!(ids(&svc.ok("GET", "/v1/workspaces", None)), ["other"]);
    assert!(!svc.worktree("ada").exists() && !svc.worktree("bob").exists());
    assert_eq!(
        std::fs::read_dir(svc.state.join("snapshots/manifests"))
            .unwrap()
            .count(),
        1,
        "their snapshots are gone"
    );
    assert_eq!(svc.api("GET", "/v1/workspaces/ada", None).0, 404);

    let out = svc.cli(&["delete", "--meta", "user=ada"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("deleted other"),
        "{out:?}"
    );
    assert_eq!(
        ids(&svc.ok("GET", "/v1/workspaces", None)),
        Vec::<String>::new()
    );
    let blobs: usize = std::fs::read_dir(svc.state.join("snapshots/blobs"))
        .unwrap()
        .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
        .sum();
    assert_eq!(blobs, 0, "unreferenced blobs are collected");
    let packs = std::fs::read_dir(svc.state.join("snapshots/packs"))
        .unwrap()
        .count();
    assert_eq!(packs, 0, "packs of unreferenced small files are collected");
}
