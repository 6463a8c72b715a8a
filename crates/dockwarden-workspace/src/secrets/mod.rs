//! Workspace secrets sealed at rest: each row's secrets are sealed under a key kept outside
//! the state directory (`keyfile`), bound to the row (`row_ad`), in a versioned form (`seal`).
//! Start-up (`unlock`) finds the key or refuses; `rotate` re-seals under a new key.
//!
//! INVARIANT: `state.db` holds secret values only sealed; plain rows from older versions
//! are sealed in place at start, after which the WAL is truncated.
//! INVARIANT: a start that refuses (missing, unsafe or wrong key; a form it cannot read)
//! refuses before it writes anything to the database.

pub mod keyfile;
pub mod rotate;
pub mod seal;
#[cfg(test)]
mod testing;
mod unlock;

use std::path::PathBuf;

pub use seal::{SealError, SealKey};
pub use unlock::{Inspection, settle, unlock};

/// Associated data of a workspace row's secrets: a value copied to another row won't open.
pub fn row_ad(workspace_id: &str) -> Vec<u8> {
    let mut ad = b"dockwarden/workspace-secrets/v1\0".to_vec();
    ad.extend_from_slice(workspace_id.as_bytes());
    ad
}

/// The `meta` row that proves a key is the database's: a known value sealed at key creation.
pub const CANARY_ROW: &str = "secrets.key-check";
const CANARY_AD: &[u8] = b"dockwarden/secrets-key-check/v1";
const CANARY_VALUE: &[u8] = b"dockwarden secrets key check";

/// Why secrets cannot be unlocked, rotated or read.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("secrets key `{}` is missing, but `{}` holds secrets sealed under a key; give its path with `--secrets-key`, or, if it is lost, drop every secret (nothing else) with `dockwarden secrets forget --state-dir {} --yes`", path.display(), db.display(), state_hint(db))]
    Missing { path: PathBuf, db: PathBuf },
    #[error("secrets key `{}` {problem}", path.display())]
    BadFile { path: PathBuf, problem: String },
    #[error("secrets key `{}` does not open the secrets in `{}`: it is not the key they were sealed under; give the right `--secrets-key` (after a rotation, the new key)", path.display(), db.display())]
    WrongKey { path: PathBuf, db: PathBuf },
    #[error("secrets key `{}` is inside the state directory `{}`: a copy of the state would carry its key; keep it elsewhere (default `{}`)", path.display(), state.display(), keyfile::DEFAULT_PATH)]
    InsideState { path: PathBuf, state: PathBuf },
    #[error("the secrets of workspace `{id}` in `{}` are stored as `{tag}`, which this version cannot read (written by a later dockwarden?)", db.display())]
    UnknownForm {
        id: String,
        tag: String,
        db: PathBuf,
    },
    #[error("the secrets of workspace `{id}` do not open: {source}")]
    Row { id: String, source: SealError },
    #[error("i/o error at `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database `{}`: {source}", path.display())]
    Db {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{0}")]
    Seal(#[from] SealError),
}

fn state_hint(db: &std::path::Path) -> String {
    db.parent()
        .map_or_else(|| ".".into(), |p| p.display().to_string())
}

impl From<SecretsError> for crate::WsError {
    fn from(e: SecretsError) -> Self {
        use crate::WsError;
        match e {
            SecretsError::Io { path, source } => WsError::Io { path, source },
            SecretsError::Row { .. } | SecretsError::Seal(_) => WsError::Internal(e.to_string()),
            other => WsError::Invalid(other.to_string()),
        }
    }
}
