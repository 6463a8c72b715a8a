//! The policy core stays pure: no async runtime, HTTP stack or system-call wrapper reaches it
//! through its normal dependencies. The same check as `scripts/check-layering.sh`, run by
//! `cargo test` so a dependency that pulls one in fails here first.

use std::process::Command;

/// Crates whose presence would mean the core can do I/O on its own.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "mio",
    "nix",
    "libc",
    "rustix",
    "socket2",
];

#[test]
fn the_policy_crate_depends_on_no_tokio_nix_or_libc() {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "--offline", "-p", "dockwarden-policy"])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"dockwarden-policy"),
        "the tree names the crate itself: {stdout}"
    );
    let found: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| FORBIDDEN.contains(n) || n.starts_with("tokio-") || n.starts_with("hyper-"))
        .collect();
    assert!(
        found.is_empty(),
        "dockwarden-policy depends on {found:?} (see `cargo tree -p dockwarden-policy -e normal -i <name>`)"
    );
}

/// The dockwarden crates each crate may depend on (normal dependencies, however deep): the
/// arrows of ARCHITECTURE.md's picture, pointing one way. Cargo refuses a cycle; this refuses
/// an arrow that points up, such as the proxy reaching into the workspace service.
const MAY_USE: &[(&str, &[&str])] = &[
    ("dockwarden-policy", &[]),
    ("dockwarden-sys", &[]),
    ("dockwarden-proxy", &["dockwarden-policy", "dockwarden-sys"]),
    (
        "dockwarden-workspace",
        &["dockwarden-policy", "dockwarden-sys", "dockwarden-proxy"],
    ),
];

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    for (krate, allowed) in MAY_USE {
        let out = Command::new(env!("CARGO"))
            .args(["tree", "--locked", "--offline", "-p", krate])
            .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "cargo tree -p {krate} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let ours: std::collections::BTreeSet<&str> = stdout
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("dockwarden") && n != krate)
            .collect();
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("{krate} "))),
            "the tree names {krate} itself: {stdout}"
        );
        let up: Vec<&&str> = ours.iter().filter(|n| !allowed.contains(n)).collect();
        assert!(
            up.is_empty(),
            "{krate} depends on {up:?}, not among the crates below it"
        );
    }
}
