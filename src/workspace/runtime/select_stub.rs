//! PLACEHOLDER until `select.rs` (the pure selector) lands: the selection types and an
//! explicit-or-default choice. Deleted when the real selector is merged.

use serde::{Deserialize, Serialize};

/// Which runtime a workspace uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    #[default]
    Standard,
    DockerCompose,
}

/// Where the choice came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Explicit,
    Evidence,
    #[default]
    Default,
}

/// One piece of evidence: the file and why it counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub file: String,
    pub reason: String,
}

/// The selector's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Selection {
    pub runtime: RuntimeKind,
    pub source: Source,
    pub evidence: Vec<Evidence>,
}

/// Explicit setting or the standard runtime (no evidence rules yet).
pub fn select_explicit(explicit: Option<RuntimeKind>) -> Selection {
    match explicit {
        Some(runtime) => Selection {
            runtime,
            source: Source::Explicit,
            evidence: Vec::new(),
        },
        None => Selection::default(),
    }
}
