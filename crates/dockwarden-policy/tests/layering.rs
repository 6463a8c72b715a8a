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
