//! Records of what happened to a workspace outside the caller's view (a stop, a command cut
//! off by the service ending) and the `resumed` marker of calls that started it again.

use serde::{Deserialize, Serialize};

/// The last stop of a workspace, shown by `info`: by `kill` or by the idle timeout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopRecord {
    pub at_ms: u64,
    /// `kill`, `idle`, ...
    pub reason: String,
    /// The snapshot taken at the stop, if one could be written.
    pub snapshot_id: Option<String>,
    /// Why no snapshot was taken (a full disk, a damaged worktree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_error: Option<String>,
}

/// Commands of a workspace that the service did not see to their end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interruption {
    pub at_ms: u64,
    /// `service stopped (SIGTERM)`, `service restarted after a crash`.
    pub reason: String,
    /// Processes found and stopped.
    pub processes: u32,
    pub note: String,
}

/// A result of an exec, a file write or a snapshot, with whether the call had to start a
/// stopped workspace first (with the same restore rules as `connect`).
#[derive(Debug, Clone, Serialize)]
pub struct Resumed<T> {
    #[serde(flatten)]
    pub result: T,
    pub resumed: bool,
    /// A restore that the resume needed, as `connect` reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<crate::model::RecoveryReport>,
}

impl<T> Resumed<T> {
    pub fn not(result: T) -> Self {
        Resumed {
            result,
            resumed: false,
            recovery: None,
        }
    }
}

/// The answer of `snapshot`: the snapshot, and its id under the name kill and idle stop use.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotTaken {
    #[serde(flatten)]
    pub info: crate::model::SnapshotInfo,
    pub snapshot_id: String,
}
