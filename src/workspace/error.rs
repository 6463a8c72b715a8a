//! Typed errors of the workspace service, each with a stable machine-readable code.

use std::path::PathBuf;

use crate::workspace::status::Status;

/// Everything a workspace operation can fail with.
///
/// The `code()` of each variant is part of the API; `api::response` is the one place that
/// turns it into an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    #[error("workspace `{0}` not found")]
    NotFound(String),
    #[error("snapshot `{0}` not found")]
    SnapshotNotFound(String),
    #[error("path `{0}` escapes the worktree")]
    InvalidPath(String),
    #[error("path `{0}` does not exist")]
    NoSuchPath(String),
    #[error("file `{path}` is {size} bytes; reads are limited to {limit} bytes")]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("{0}")]
    Invalid(String),
    #[error("workspace `{id}` is {status}; cannot {verb}{hint}")]
    WrongState {
        id: String,
        status: Status,
        verb: &'static str,
        hint: &'static str,
    },
    #[error("snapshot `{id}` is corrupt: {detail}")]
    CorruptSnapshot { id: String, detail: String },
    #[error("git clone of `{repo}` failed: {detail}")]
    Clone { repo: String, detail: String },
    #[error("{what} of {value} is over the ceiling {ceiling} set by layer `{layer}`; ask for at most {ceiling}, or raise the `{layer}` layer's ceiling")]
    OverCeiling {
        what: String,
        value: String,
        ceiling: String,
        layer: &'static str,
    },
    #[error("resize request `{0}` not found")]
    ResizeRequestNotFound(String),
    #[error("resize request `{id}` is {state}; only a `pending_approval` request can be approved or rejected")]
    ResizeRequestState { id: String, state: String },
    #[error("no free uid in the configured range")]
    NoFreeUid,
    #[error("i/o error at `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("internal error: {0}")]
    Internal(String),
}

impl WsError {
    /// The stable code carried in the JSON error body.
    pub fn code(&self) -> &'static str {
        match self {
            WsError::NotFound(_)
            | WsError::SnapshotNotFound(_)
            | WsError::NoSuchPath(_)
            | WsError::ResizeRequestNotFound(_) => "not_found",
            WsError::OverCeiling { .. } => "over_ceiling",
            WsError::ResizeRequestState { .. } => "wrong_state",
            WsError::InvalidPath(_) => "invalid_path",
            WsError::TooLarge { .. } => "too_large",
            WsError::Invalid(_) | WsError::Clone { .. } => "invalid",
            WsError::WrongState { .. } => "wrong_state",
            WsError::CorruptSnapshot { .. } => "corrupt_snapshot",
            WsError::NoFreeUid | WsError::Io { .. } | WsError::Db(_) | WsError::Internal(_) => {
                "internal"
            }
        }
    }

    /// Wraps an I/O error with the path it happened at.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        WsError::Io {
            path: path.into(),
            source,
        }
    }

    /// Wraps a nix errno with the path it happened at.
    pub fn errno(path: impl Into<PathBuf>, errno: nix::errno::Errno) -> Self {
        WsError::Io {
            path: path.into(),
            source: std::io::Error::from(errno),
        }
    }
}

/// Result alias for the workspace service.
pub type WsResult<T> = Result<T, WsError>;
