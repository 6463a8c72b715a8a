//! The manifest: one snapshot's list of entries, with content hashes for files.

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::codec::Writer;
use super::codec::{Malformed, R, Reader};
use super::digest::{self, Digest};

/// Manifests written now: a root of tree objects (`tree.rs`), BLAKE3 content hashes.
/// Version 2 was one binary file per snapshot, version 1 JSON; both still load.
pub const VERSION: u32 = 3;
/// The first version whose content hashes are BLAKE3 (a capture may reuse them).
pub const BLAKE3_FROM: u32 = 2;
const MAGIC: &[u8; 4] = b"DWM\x02";
/// Entry tags: 0 (dir), 1 (file) and 2 (symlink) without mtimes are still read; dirs and
/// symlinks are written with their mtimes.
const TAG_DIR: u8 = 3;
const TAG_SYMLINK: u8 = 4;

/// What one path in the tree is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum EntryKind {
    Dir {
        mode: u32,
        /// 0 when not recorded (manifests before directory mtimes were kept).
        #[serde(default)]
        mtime_ns: i64,
    },
    File {
        mode: u32,
        size: u64,
        /// Content hash: SHA-256 in version 1 manifests, BLAKE3 from version 2 on (hex in
        /// JSON).
        #[serde(rename = "sha256", with = "digest::serde_hex")]
        hash: Digest,
        mtime_ns: i64,
    },
    Symlink {
        target: String,
        /// 0 when not recorded.
        #[serde(default)]
        mtime_ns: i64,
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

impl Manifest {
    /// The binary encoding of version 2 (written before trees; kept to test that such
    /// manifests still load).
    #[cfg(test)]
    pub(super) fn encode_v2(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.raw(MAGIC);
        w.bytes(self.id.as_bytes());
        w.varint(self.created_at_ms);
        w.varint(u64::from(self.root_mode));
        w.varint(self.entries.len() as u64);
        for e in &self.entries {
            w.path(&e.path);
            match &e.kind {
                EntryKind::Dir { mode, mtime_ns } => {
                    w.u8(TAG_DIR);
                    w.varint(u64::from(*mode));
                    w.i64(*mtime_ns);
                }
                leaf => write_leaf(&mut w, leaf, 1, TAG_SYMLINK),
            }
        }
        w.buf
    }

    /// Decodes a binary (version 2) or JSON (version 1) manifest; version 3 (trees) needs
    /// the store's packs (`tree_io.rs`).
    pub(super) fn decode(body: &[u8]) -> Result<Manifest, String> {
        if body.starts_with(MAGIC) {
            return Self::decode_v2(&body[MAGIC.len()..]).map_err(|Malformed| "malformed".into());
        }
        let m: Manifest = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        if m.version != 1 {
            return Err(format!("unknown version {}", m.version));
        }
        Ok(m)
    }

    fn decode_v2(body: &[u8]) -> R<Manifest> {
        let mut r = Reader::new(body);
        let id = r.string()?;
        let created_at_ms = r.varint()?;
        let root_mode = r.u32()?;
        let n = r.usize()?;
        let mut entries = Vec::with_capacity(n.min(body.len()));
        for _ in 0..n {
            let path = r.path()?;
            let kind = match r.u8()? {
                0 => EntryKind::Dir {
                    mode: r.u32()?,
                    mtime_ns: 0,
                },
                TAG_DIR => EntryKind::Dir {
                    mode: r.u32()?,
                    mtime_ns: r.i64()?,
                },
                1 => {
                    let mode = r.u32()?;
                    let size = r.varint()?;
                    let mtime_ns = r.i64()?;
                    EntryKind::File {
                        mode,
                        size,
                        hash: r.digest()?,
                        mtime_ns,
                    }
                }
                2 => EntryKind::Symlink {
                    target: r.string()?,
                    mtime_ns: 0,
                },
                TAG_SYMLINK => EntryKind::Symlink {
                    target: r.string()?,
                    mtime_ns: r.i64()?,
                },
                _ => return Err(Malformed),
            };
            entries.push(Entry { path, kind });
        }
        if !r.done() {
            return Err(Malformed);
        }
        Ok(Manifest {
            version: 2,
            id,
            created_at_ms,
            root_mode,
            entries,
        })
    }
}

/// Lowercase hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    crate::hex::encode(&Sha256::digest(data))
}

/// Writes a file's or a symlink's tag and fields, the same in manifests and in trees (each
/// with its own tags). Directories are the caller's: the two formats differ there.
pub(super) fn write_leaf(w: &mut Writer, kind: &EntryKind, file_tag: u8, symlink_tag: u8) {
    match kind {
        EntryKind::Dir { .. } => {}
        EntryKind::File {
            mode,
            size,
            hash,
            mtime_ns,
        } => {
            w.u8(file_tag);
            w.varint(u64::from(*mode));
            w.varint(*size);
            w.i64(*mtime_ns);
            w.raw(hash);
        }
        EntryKind::Symlink { target, mtime_ns } => {
            w.u8(symlink_tag);
            w.bytes(target.as_bytes());
            w.i64(*mtime_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dockwarden_policy::path_clean::is_clean_relative;

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
                    kind: EntryKind::Dir {
                        mode: 0o755,
                        mtime_ns: 7,
                    },
                },
                Entry {
                    path: "d/f".into(),
                    kind: EntryKind::File {
                        mode: 0o644,
                        size: 1,
                        hash: [0xab; 32],
                        mtime_ns: 1_700_000_000_123_456_789,
                    },
                },
                Entry {
                    path: "l".into(),
                    kind: EntryKind::Symlink {
                        target: "d/f".into(),
                        mtime_ns: 0,
                    },
                },
            ],
        };
        let body = serde_json::to_vec(&m).expect("encodes");
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.contains(&format!("\"sha256\":\"{}\"", "ab".repeat(32))),
            "{text}"
        );
        let bad = text.replace(&"ab".repeat(32), "ab");
        assert!(
            Manifest::decode(bad.as_bytes()).is_err(),
            "a short hash is refused"
        );
        let back: Manifest = serde_json::from_slice(&body).expect("decodes");
        assert_eq!(back.entries, m.entries);
        assert!(Manifest::decode(&body).is_ok(), "version 1 is JSON");
    }

    #[test]
    fn manifests_round_trip_through_the_binary_encoding() {
        let h = [0xcd; 32];
        let m = Manifest {
            version: 2,
            id: "snap-2".into(),
            created_at_ms: 5,
            root_mode: 0o755,
            entries: vec![
                Entry {
                    path: "d".into(),
                    kind: EntryKind::Dir {
                        mode: 0o755,
                        mtime_ns: 7,
                    },
                },
                Entry {
                    path: "d/f".into(),
                    kind: EntryKind::File {
                        mode: 0o644,
                        size: 1 << 40,
                        hash: h,
                        mtime_ns: -3,
                    },
                },
                Entry {
                    path: "d/g".into(),
                    kind: EntryKind::Symlink {
                        target: "f".into(),
                        mtime_ns: 1_700_000_000_000_000_001,
                    },
                },
            ],
        };
        let body = m.encode_v2();
        let back = Manifest::decode(&body).expect("decodes");
        assert_eq!(back.entries, m.entries);
        assert_eq!((back.id.as_str(), back.root_mode), ("snap-2", 0o755));
        for cut in [5, body.len() / 2, body.len() - 1] {
            assert!(Manifest::decode(&body[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn manifest_paths_that_climb_out_are_rejected() {
        assert!(is_clean_relative("a/b.txt"));
        assert!(!is_clean_relative("../etc/passwd"));
        assert!(!is_clean_relative("a/../../b"));
        assert!(!is_clean_relative("/abs"));
        assert!(!is_clean_relative("a//b"));
    }
}
