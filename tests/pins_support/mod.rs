//! Cleanup for tests that make pins: whatever happens in the test, no container that uses a
//! pin and no pin mount outlives it.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use dockwarden::sys::mountinfo;

/// Pin mounts plus pin targets in `pins` (the state file aside).
pub fn pins_left(pins: &Path) -> usize {
    let targets = std::fs::read_dir(pins)
        .map(|rd| {
            rd.flatten()
                .filter(|e| !e.file_name().to_string_lossy().starts_with("state.json"))
                .count()
        })
        .unwrap_or(0);
    mounted(pins).len() + targets
}

/// Mount points directly inside `pins`.
pub fn mounted(pins: &Path) -> Vec<String> {
    mountinfo::at_or_beneath(&mountinfo::own(), pins)
        .into_iter()
        .filter(|m| m != pins)
        .map(|m| m.display().to_string())
        .collect()
}

/// Declare it as the first field (or local) so it runs while the proxy still lives: removes
/// every container of `host` that mounts a pin from `pins`, gives the proxy a moment to
/// release them, then unmounts whatever is left.
pub struct PinGuard {
    pub pins: PathBuf,
    pub host: String,
}

impl PinGuard {
    fn cli(&self, args: &[&str]) -> String {
        let cli = if Path::new("/usr/local/bin/docker").exists() {
            "/usr/local/bin/docker"
        } else {
            "/usr/bin/docker"
        };
        let out = Command::new(cli)
            .env("DOCKER_HOST", &self.host)
            .args(args)
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        let prefix = format!("{}/", self.pins.display());
        let ids = self.cli(&["ps", "-aq", "--no-trunc"]);
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if !ids.is_empty() {
            let mut args = vec![
                "inspect",
                "-f",
                "{{.Id}} {{range .Mounts}}{{.Source}} {{end}}",
            ];
            args.extend(ids.iter().copied());
            for line in self.cli(&args).lines() {
                let mut it = line.split_whitespace();
                let id = it.next().unwrap_or_default();
                if it.any(|s| s.starts_with(&prefix)) {
                    self.cli(&["rm", "-f", "-v", id]);
                }
            }
        }
        super::common::poll_until(Duration::from_secs(5), || pins_left(&self.pins) == 0);
        for m in mounted(&self.pins) {
            let _ = nix::mount::umount2(Path::new(&m), nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_dir(&m).or_else(|_| std::fs::remove_file(&m));
        }
    }
}
