//! A git repository with a given `.dockwarden/settings.json`, for the fault suites.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A git repository whose `.dockwarden/settings.json` is `settings`.
pub fn repo_with(dir: &Path, name: &str, settings: &Value) -> PathBuf {
    let repo = dir.join(name);
    std::fs::create_dir_all(repo.join(".dockwarden")).unwrap();
    std::fs::write(repo.join(".dockwarden/settings.json"), settings.to_string()).unwrap();
    std::fs::write(repo.join("README.md"), "fixture\n").unwrap();
    let git = |args: &[&str]| {
        let st = Command::new("git")
            .args(["-c", "user.email=t@t", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main", "."]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "fixture"]);
    repo
}
