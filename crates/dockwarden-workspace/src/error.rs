//! Typed errors of the workspace service, each with a stable machine-readable code.

use std::path::PathBuf;

use crate::status::Status;

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
    /// A symlink met while resolving `path` (the rule: no symlink is ever followed).
    #[error("{}", symlink_message(path, link))]
    Symlink { path: String, link: String },
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
    /// A part of the runtime died and could not be restarted (yet): `heal`.
    #[error(
        "the runtime of workspace `{id}` is down ({parts}) and could not be restarted: {detail}; the next try is automatic, or run `dockwarden ws restart {id}`"
    )]
    RuntimeDown {
        id: String,
        parts: String,
        detail: String,
    },
    #[error("git clone of `{repo}` failed: {detail}")]
    Clone { repo: String, detail: String },
    #[error(
        "{what} of {value} is over the ceiling {ceiling} set by layer `{layer}`; ask for at most {ceiling}, or raise the `{layer}` layer's ceiling"
    )]
    OverCeiling {
        what: String,
        value: String,
        ceiling: String,
        layer: &'static str,
    },
    #[error("resize request `{0}` not found")]
    ResizeRequestNotFound(String),
    #[error(
        "resize request `{id}` is {state}; only a `pending_approval` request can be approved or rejected"
    )]
    ResizeRequestState { id: String, state: String },
    #[error("no free uid in the configured range")]
    NoFreeUid,
    #[error("i/o error at `{path}`: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database error: {0}")]
    Db(rusqlite::Error),
    #[error("no space left on the device of `{}` ({free_bytes} bytes free); free space in the state directory or grow it", path.display())]
    NoSpace { path: PathBuf, free_bytes: u64 },
    #[error("`{0}` already exists; remove it first")]
    Exists(String),
    /// A batch that failed after part of it was done; the code is the cause's.
    #[error("{detail}; done before it: {}", done.join(", "))]
    Partial {
        detail: String,
        done: Vec<String>,
        cause: Box<WsError>,
    },
    #[error("no endpoint `{0}`; see docs/workspace-api.md")]
    NoEndpoint(String),
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
            WsError::Partial { cause, .. } => cause.code(),
            WsError::NoEndpoint(_) => "no_endpoint",
            WsError::NoSpace { .. } => "no_space",
            WsError::Exists(_) => "exists",
            WsError::OverCeiling { .. } => "over_ceiling",
            WsError::ResizeRequestState { .. } => "wrong_state",
            WsError::InvalidPath(_) | WsError::Symlink { .. } => "invalid_path",
            WsError::TooLarge { .. } => "too_large",
            WsError::Invalid(_) | WsError::Clone { .. } => "invalid",
            WsError::WrongState { .. } => "wrong_state",
            WsError::CorruptSnapshot { .. } => "corrupt_snapshot",
            WsError::RuntimeDown { .. } => "runtime_down",
            WsError::NoFreeUid | WsError::Io { .. } | WsError::Db(_) | WsError::Internal(_) => {
                "internal"
            }
        }
    }

    /// Wraps an I/O error with the path it happened at; a full disk becomes `NoSpace`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if is_no_space(&source) {
            return WsError::no_space(path);
        }
        WsError::Io { path, source }
    }

    /// `NoSpace` at `path`, with the free space of its file system now.
    pub fn no_space(path: PathBuf) -> Self {
        let free_bytes = free_bytes(&path);
        WsError::NoSpace { path, free_bytes }
    }

    /// A database error; SQLite's "database or disk is full" becomes `NoSpace` at `db`.
    pub fn db(db: &std::path::Path, e: rusqlite::Error) -> Self {
        match WsError::from(e) {
            WsError::NoSpace { .. } => WsError::no_space(db.to_path_buf()),
            other => other,
        }
    }

    /// Fills in the database path of a `NoSpace` raised by `?` on a rusqlite error.
    pub fn at_db(self, db: &std::path::Path) -> Self {
        match self {
            WsError::NoSpace { path, .. } if path.as_os_str().is_empty() => {
                WsError::no_space(db.to_path_buf())
            }
            other => other,
        }
    }

    /// A `NoSpace` at a worktree-relative path gets the free space of the worktree's disk.
    pub fn with_free_at(self, base: &std::path::Path) -> Self {
        match self {
            WsError::NoSpace { path, .. } if path.is_relative() => WsError::NoSpace {
                free_bytes: free_bytes(base),
                path,
            },
            WsError::Partial {
                detail,
                done,
                cause,
            } => WsError::Partial {
                detail,
                done,
                cause: Box::new(cause.with_free_at(base)),
            },
            other => other,
        }
    }

    /// True for a full disk, however it was reported.
    pub fn is_no_space(&self) -> bool {
        match self {
            WsError::NoSpace { .. } => true,
            WsError::Partial { cause, .. } => cause.is_no_space(),
            _ => false,
        }
    }

    /// Wraps a nix errno with the path it happened at.
    pub fn errno(path: impl Into<PathBuf>, errno: nix::errno::Errno) -> Self {
        WsError::io(path, std::io::Error::from(errno))
    }
}

impl From<rusqlite::Error> for WsError {
    fn from(e: rusqlite::Error) -> Self {
        let full = match &e {
            rusqlite::Error::SqliteFailure(f, _) => f.code == rusqlite::ErrorCode::DiskFull,
            _ => false,
        };
        if full {
            // The path is filled in by the store (`at_db`), which knows its file.
            WsError::NoSpace {
                path: PathBuf::new(),
                free_bytes: 0,
            }
        } else {
            WsError::Db(e)
        }
    }
}

fn symlink_message(path: &str, link: &str) -> String {
    if path == link {
        format!(
            "`{path}` is a symlink; file calls never follow symlinks (info, exists, remove and rename act on the link itself)"
        )
    } else {
        format!(
            "`{link}` in `{path}` is a symlink; file calls never follow symlinks, even to a directory inside the worktree"
        )
    }
}

/// ENOSPC and EDQUOT (a quota is a full disk for the one who hits it).
pub fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || e.kind() == std::io::ErrorKind::StorageFull
}

/// Free bytes (for unprivileged users) on the file system of `path` or its nearest
/// existing ancestor; 0 when unknown.
pub fn free_bytes(path: &std::path::Path) -> u64 {
    let mut cur = Some(path);
    while let Some(p) = cur {
        if let Ok(st) = nix::sys::statvfs::statvfs(p) {
            return st.blocks_available().saturating_mul(st.fragment_size());
        }
        cur = p.parent();
    }
    0
}

/// Result alias for the workspace service.
pub type WsResult<T> = Result<T, WsError>;
