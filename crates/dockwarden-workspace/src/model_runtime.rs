//! The runtime part of the data model: which runtime a workspace runs on and why. Plain
//! serde types; the selection rules that make a [`Selection`] are in `runtime::select`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The runtime a workspace runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    /// Local processes on this machine (the runtime that exists without Docker).
    Standard,
    /// A private dockerd behind its own dockwarden proxy.
    DockerCompose,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Standard => "standard",
            RuntimeKind::DockerCompose => "docker-compose",
        }
    }
}

impl fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A runtime name that is neither `standard` nor `docker-compose`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRuntime(pub String);

impl fmt::Display for UnknownRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown runtime `{}`: expected `standard` or `docker-compose`",
            self.0
        )
    }
}

impl std::error::Error for UnknownRuntime {}

impl FromStr for RuntimeKind {
    type Err = UnknownRuntime;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "standard" => Ok(RuntimeKind::Standard),
            "docker-compose" => Ok(RuntimeKind::DockerCompose),
            other => Err(UnknownRuntime(other.to_string())),
        }
    }
}

/// Why the runtime is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The create call or `.dockwarden/settings.json` named it.
    Explicit,
    /// Decisive Docker evidence in the repository.
    Evidence,
    /// Nothing decided it: the standard runtime.
    Default,
}

/// One piece of Docker evidence: the repository file and what in it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub file: String,
    pub reason: String,
}

/// The outcome of a selection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub runtime: RuntimeKind,
    pub source: Source,
    /// Docker evidence found, in inspection order. Also filled when an explicit setting won,
    /// so `ws info` can show what the setting overrode.
    pub evidence: Vec<Evidence>,
    /// Where an explicit runtime came from: `create` or `.dockwarden/settings.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// A cap cut the inspection short (listing, files, bytes, depth) or a file could not be
    /// read; evidence beyond the cut was not looked for.
    pub truncated: bool,
}

/// The selection of a record made before runtimes existed.
pub fn standard_selection() -> Selection {
    Selection {
        runtime: RuntimeKind::Standard,
        source: Source::Default,
        evidence: Vec::new(),
        setting: None,
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_names_round_trip_and_unknown_ones_say_what_is_expected() {
        for k in [RuntimeKind::Standard, RuntimeKind::DockerCompose] {
            assert_eq!(k.as_str().parse::<RuntimeKind>(), Ok(k));
            assert_eq!(
                serde_json::to_string(&k).ok(),
                Some(format!("\"{}\"", k.as_str()))
            );
        }
        let err = "podman".parse::<RuntimeKind>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("unknown runtime `podman`: expected `standard` or `docker-compose`")
        );
    }
}
