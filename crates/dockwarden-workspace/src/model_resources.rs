//! The resources part of the data model: what a caller asks for (JSON amounts with units),
//! the layer a bound comes from, and what a full disk did. Plain serde types; parsing and
//! the rules are in `resources` (`input`, `layers`, `resize`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a bound comes from, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Platform,
    Plan,
    Workspace,
    User,
    Thread,
}

impl Layer {
    pub const ALL: [Layer; 5] = [
        Layer::Platform,
        Layer::Plan,
        Layer::Workspace,
        Layer::User,
        Layer::Thread,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Platform => "platform",
            Layer::Plan => "plan",
            Layer::Workspace => "workspace",
            Layer::User => "user",
            Layer::Thread => "thread",
        }
    }
}

/// `{"cpu": 0.5, "memory": "64MiB", "disk": "1GiB", "pids": 100}`; every key optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmountsInput {
    pub cpu: Option<Value>,
    pub memory: Option<Value>,
    pub disk: Option<Value>,
    pub pids: Option<Value>,
}

/// Resources of a create request: the starting sizing and the workspace layer's bounds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceRequest {
    pub reservation: AmountsInput,
    pub burst: AmountsInput,
    /// The disk size.
    pub disk: Option<Value>,
    /// The workspace layer's ceiling (may only tighten the layers above).
    pub ceiling: AmountsInput,
    pub approval: AmountsInput,
}

/// What an ENOSPC did to the disk, reported in the command's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskEvent {
    /// The worktree's filesystem was full when the command failed.
    pub full: bool,
    pub grew: bool,
    #[serde(alias = "fromBytes")]
    pub from_bytes: u64,
    #[serde(alias = "toBytes")]
    pub to_bytes: u64,
    #[serde(alias = "ceilingBytes")]
    pub ceiling_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "ceilingSetBy")]
    pub ceiling_set_by: Option<Layer>,
    /// Whether the command was run again (setup only, once).
    pub retried: bool,
    pub note: String,
}
