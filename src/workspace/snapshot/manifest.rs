//! The manifest: one snapshot's list of entries, with content hashes for files.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What one path in the tree is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum EntryKind {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        size: u64,
        sha256: String,
        mtime_ns: i64,
    },
    Symlink {
        target: String,
    },
}

/// One path, relative to the worktree, with `/` separators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    #[serde(flatten)]
    pub kind: EntryKind,
}

/// A complete snapshot description. Directories come before their children.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub id: String,
    pub created_at_ms: u64,
    /// Mode of the worktree root itself.
    pub root_mode: u32,
    pub entries: Vec<Entry>,
}

impl Manifest {
    /// Index of file entries by path, for incremental captures.
    pub fn file_index(&self) -> std::collections::HashMap<&str, &EntryKind> {
        self.entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::File { .. }))
            .map(|e| (e.path.as_str(), &e.kind))
            .collect()
    }
}

/// Lowercase hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Lowercase hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// True when `path` is a safe relative manifest path: no empty, `.` or `..` parts.
pub fn safe_rel_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_through_json() {
        let m = Manifest {
            version: 1,
            id: "snap-1".into(),
            created_at_ms: 5,
            root_mode: 0o755,
            entries: vec![
                Entry {
                    path: "d".into(),
                    kind: EntryKind::Dir { mode: 0o755 },
                },
                Entry {
                    path: "d/f".into(),
                    kind: EntryKind::File {
                        mode: 0o644,
                        size: 1,
                        sha256: "ab".into(),
                        mtime_ns: 1_700_000_000_123_456_789,
                    },
                },
                Entry {
                    path: "l".into(),
                    kind: EntryKind::Symlink {
                        target: "d/f".into(),
                    },
                },
            ],
        };
        let body = serde_json::to_vec(&m).expect("encodes");
        let back: Manifest = serde_json::from_slice(&body).expect("decodes");
        assert_eq!(back.entries, m.entries);
    }

    #[test]
    fn manifest_paths_that_climb_out_are_rejected() {
        assert!(safe_rel_path("a/b.txt"));
        assert!(!safe_rel_path("../etc/passwd"));
        assert!(!safe_rel_path("a/../../b"));
        assert!(!safe_rel_path("/abs"));
        assert!(!safe_rel_path("a//b"));
    }
}
