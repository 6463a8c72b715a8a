//! The repository's `.dockwarden/settings.json`: setup, run and archive scripts.

use serde::Deserialize;

use crate::error::{WsError, WsResult};
use crate::runtime::RuntimeKind;

/// Path of the settings file inside the worktree.
pub const SETTINGS_PATH: &str = ".dockwarden/settings.json";

/// A script: one shell string, or a list of commands run in order, stopping at the first failure.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Script {
    One(String),
    Many(Vec<String>),
}

impl Script {
    /// The text handed to `/bin/sh -c`.
    pub fn to_shell(&self) -> String {
        match self {
            Script::One(s) => s.clone(),
            Script::Many(lines) => format!("set -e\n{}", lines.join("\n")),
        }
    }
}

/// The scripts a repository declares.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scripts {
    pub setup: Option<Script>,
    pub run: Option<Script>,
    pub archive: Option<Script>,
}

/// The whole settings file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub scripts: Scripts,
    /// Time limit for the setup script, in seconds (default 1800).
    pub setup_timeout_secs: Option<u64>,
    /// Idle timeout for workspaces of this repository, unless the caller sets one.
    pub idle_timeout_secs: Option<u64>,
    /// Maximum runtime for workspaces of this repository, unless the caller sets one.
    pub max_runtime_secs: Option<u64>,
    /// Seconds from suspension to archive for workspaces of this repository (`0`: idle
    /// archives without suspending), unless the caller sets it.
    pub archive_after_secs: Option<u64>,
    /// When a setup script or a command fails for want of a Docker daemon in a `standard`
    /// workspace, reprovision it to `docker-compose` once (`hints`). Off by default.
    #[serde(default)]
    pub auto_reprovision: bool,
    /// `standard` or `docker-compose`: wins over evidence (the create request wins over it).
    pub runtime: Option<RuntimeKind>,
}

impl Settings {
    /// Parses the file; an invalid file is an error, never silently ignored.
    pub fn parse(data: &[u8]) -> WsResult<Settings> {
        serde_json::from_slice(data)
            .map_err(|e| WsError::Invalid(format!("`{SETTINGS_PATH}` is invalid: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_string_and_list_scripts() {
        let s = Settings::parse(br#"{"scripts":{"setup":["a","b"],"run":"c"}}"#).expect("valid");
        assert_eq!(
            s.scripts.setup.map(|x| x.to_shell()).as_deref(),
            Some("set -e\na\nb")
        );
        assert_eq!(s.scripts.run.map(|x| x.to_shell()).as_deref(), Some("c"));
        assert!(Settings::parse(br#"{"scripts":{"setpu":"x"}}"#).is_err());
        let d = Settings::parse(br#"{"runtime":"docker-compose"}"#).expect("valid");
        assert_eq!(d.runtime, Some(RuntimeKind::DockerCompose));
        assert!(Settings::parse(br#"{"runtime":"docker"}"#).is_err());
    }
}
