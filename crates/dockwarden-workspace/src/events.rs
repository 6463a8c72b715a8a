//! Records of what happened to a workspace outside the caller's view (a stop, a command cut
//! off by the service ending) and the `resumed` marker of calls that started it again.

use serde::Serialize;

// The stop and interruption records are plain data of the workspace model.
pub use crate::model::{Interruption, StopRecord};

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
