//! The stat index: like git's index, what each file of a worktree looked like (device,
//! inode, mode, size, mtime, ctime) when its content hash was last known, so the next
//! capture can reuse the hash without reading the file.
//!
//! One index per worktree, named by the device and inode of the worktree's root directory
//! (they survive the rename that puts a restored tree in place). It is a cache: a missing,
//! torn or stale index only costs re-hashing. Written by every capture and every restore.
//!
//! Racy entries (git's "racily clean"): a file changed in the same filesystem clock tick
//! as its stat was recorded can keep the same stat data. So an entry is trusted only if
//! both its mtime and its ctime are older than the moment the index was recorded, minus
//! [`RACY_MARGIN_NS`] (2 s on filesystems without sub-second timestamps); any later
//! change of content moves the ctime into a newer tick. Racy entries are re-hashed.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::codec::{Malformed, R, Reader, Writer, hex32, unhex32};

/// More than any filesystem timestamp granularity below one second (ext4, XFS, btrfs use
/// the kernel's coarse clock: one jiffy, at most 10 ms).
pub const RACY_MARGIN_NS: i64 = 50_000_000;
/// For filesystems whose timestamps have whole seconds (or two: FAT).
const COARSE_MARGIN_NS: i64 = 2_000_000_000;
const MAGIC: &[u8; 4] = b"DWI\x01";

/// The stat data that decides whether a file is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    /// Full `st_mode`, type bits included.
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Stat {
    /// From the fields of a `stat`.
    pub fn from_parts(
        dev: u64,
        ino: u64,
        mode: u32,
        size: u64,
        m: (i64, i64),
        c: (i64, i64),
    ) -> Stat {
        let ns = |(s, n): (i64, i64)| s.saturating_mul(1_000_000_000).saturating_add(n);
        Stat {
            dev,
            ino,
            mode,
            size,
            mtime_ns: ns(m),
            ctime_ns: ns(c),
        }
    }
}

/// Whether `recorded` (taken at `recorded_at_ns`) may stand for a file whose stat is now
/// `now`: the stat data is identical and the record is not racy. Pure.
pub fn trusted(recorded: &Stat, now: &Stat, recorded_at_ns: i64) -> bool {
    let coarse = recorded.mtime_ns % 1_000_000_000 == 0 && recorded.ctime_ns % 1_000_000_000 == 0;
    let margin = if coarse {
        COARSE_MARGIN_NS
    } else {
        RACY_MARGIN_NS
    };
    let before = recorded_at_ns.saturating_sub(margin);
    recorded == now && recorded.mtime_ns < before && recorded.ctime_ns < before
}

/// One worktree's index.
#[derive(Debug, Default)]
pub struct Index {
    /// When the stat data was recorded: no change to the tree happened before this moment
    /// without being seen (a capture's start, or a restore's publication).
    pub recorded_at_ns: i64,
    pub files: HashMap<String, (Stat, String)>,
}

impl Index {
    /// The hash of `path` if its recorded stat still holds.
    pub fn lookup(&self, path: &str, now: &Stat) -> Option<&str> {
        let (st, hash) = self.files.get(path)?;
        trusted(st, now, self.recorded_at_ns).then_some(hash.as_str())
    }

    fn encode(&self) -> Vec<u8> {
        let mut files: Vec<(&str, &Stat, &str)> = self
            .files
            .iter()
            .map(|(p, (st, h))| (p.as_str(), st, h.as_str()))
            .collect();
        files.sort_unstable_by(|a, b| a.0.cmp(b.0));
        encode_sorted(self.recorded_at_ns, &files)
    }

    fn decode(body: &[u8]) -> R<Index> {
        let (data, sum) = body
            .split_at_checked(body.len().checked_sub(32).ok_or(Malformed)?)
            .ok_or(Malformed)?;
        if blake3::hash(data).as_bytes() != sum || !data.starts_with(MAGIC) {
            return Err(Malformed);
        }
        let mut r = Reader::new(&data[MAGIC.len()..]);
        let recorded_at_ns = r.i64()?;
        let n = r.usize()?;
        let mut files = HashMap::with_capacity(n.min(data.len()));
        for _ in 0..n {
            let path = r.path()?;
            let st = Stat {
                dev: r.varint()?,
                ino: r.varint()?,
                mode: r.u32()?,
                size: r.varint()?,
                mtime_ns: r.i64()?,
                ctime_ns: r.i64()?,
            };
            let h: [u8; 32] = r.take(32)?.try_into().map_err(|_| Malformed)?;
            files.insert(path, (st, hex32(&h)));
        }
        if !r.done() {
            return Err(Malformed);
        }
        Ok(Index {
            recorded_at_ns,
            files,
        })
    }

    /// Every hash the index names.
    pub fn hashes(&self) -> impl Iterator<Item = &str> {
        self.files.values().map(|(_, h)| h.as_str())
    }
}

/// Where the index of the tree whose root has `(dev, ino)` lives.
pub fn path_for(dir: &Path, dev: u64, ino: u64) -> PathBuf {
    dir.join(format!("{dev}-{ino}"))
}

/// Loads an index; anything unreadable or torn is no index.
pub fn load(path: &Path) -> Option<Index> {
    let body = fs::read(path).ok()?;
    Index::decode(&body).ok()
}

/// The encoding of an index whose entries are sorted by path (each path once). Pure.
fn encode_sorted<P: AsRef<str>, H: AsRef<str>>(
    recorded_at_ns: i64,
    files: &[(P, &Stat, H)],
) -> Vec<u8> {
    // About 60 bytes an entry: one allocation for a whole tree.
    let mut w = Writer::default();
    w.buf.reserve(64 + files.len() * 64);
    w.raw(MAGIC);
    w.i64(recorded_at_ns);
    w.varint(files.len() as u64);
    for (p, st, hash) in files {
        w.path(p.as_ref());
        w.varint(st.dev);
        w.varint(st.ino);
        w.varint(u64::from(st.mode));
        w.varint(st.size);
        w.i64(st.mtime_ns);
        w.i64(st.ctime_ns);
        w.raw(&unhex32(hash.as_ref()).unwrap_or([0; 32]));
    }
    let sum = blake3::hash(&w.buf);
    w.raw(sum.as_bytes());
    w.buf
}

/// Writes an index with temp + rename (no fsync: it is a cache, and a torn one fails its
/// checksum and is ignored).
pub fn store(path: &Path, index: &Index) -> std::io::Result<()> {
    write_body(path, &index.encode())
}

/// Writes the index of a capture straight from its `(path, stat, hash)` list, without
/// building the map a lookup needs: sorts it by path (a path listed twice keeps its last
/// entry, as a map would).
pub fn store_entries(
    path: &Path,
    recorded_at_ns: i64,
    files: &mut Vec<(String, Stat, String)>,
) -> std::io::Result<()> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    dedup_keep_last(files);
    let view: Vec<(&str, &Stat, &str)> = files
        .iter()
        .map(|(p, st, h)| (p.as_str(), st, h.as_str()))
        .collect();
    write_body(path, &encode_sorted(recorded_at_ns, &view))
}

/// Of runs of equal paths in a sorted list, keeps the last.
fn dedup_keep_last(files: &mut Vec<(String, Stat, String)>) {
    files.reverse();
    files.dedup_by(|later, kept| later.0 == kept.0);
    files.reverse();
}

fn write_body(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp)?;
    f.write_all(body)?;
    drop(f);
    fs::rename(&tmp, path)
}

/// The current wall clock in nanoseconds since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(mtime_ns: i64, ctime_ns: i64) -> Stat {
        Stat {
            dev: 1,
            ino: 2,
            mode: 0o100644,
            size: 4,
            mtime_ns,
            ctime_ns,
        }
    }

    #[test]
    fn only_identical_and_settled_stat_data_is_trusted() {
        let t = 1_000_000_000_000_000_123;
        let old = st(t - 5_000_000_000, t - 4_000_000_000);
        assert!(trusted(&old, &old, t));
        assert!(!trusted(&old, &Stat { size: 5, ..old }, t), "size");
        assert!(!trusted(&old, &Stat { ino: 9, ..old }, t), "inode");
        assert!(
            !trusted(
                &old,
                &Stat {
                    mode: 0o100755,
                    ..old
                },
                t
            ),
            "mode"
        );
        assert!(
            !trusted(
                &old,
                &Stat {
                    ctime_ns: old.ctime_ns + 1,
                    ..old
                },
                t
            ),
            "ctime"
        );
        assert!(
            !trusted(
                &old,
                &Stat {
                    mtime_ns: old.mtime_ns + 1,
                    ..old
                },
                t
            ),
            "mtime"
        );
        // Same tick as the recording: a rewrite of the same size could keep this stat.
        let racy = st(t - 5_000_000_000, t - 1_000);
        assert!(!trusted(&racy, &racy, t), "racy ctime");
        let racy = st(t, t - 5_000_000_000);
        assert!(!trusted(&racy, &racy, t), "racy (or future) mtime");
        // Whole-second timestamps get a wider margin.
        let coarse = st(
            t - t % 1_000_000_000 - 1_000_000_000,
            t - t % 1_000_000_000 - 1_000_000_000,
        );
        assert!(!trusted(&coarse, &coarse, t));
    }

    #[test]
    fn indexes_round_trip_and_torn_ones_are_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut idx = Index {
            recorded_at_ns: 42,
            ..Default::default()
        };
        idx.files.insert("a/b".into(), (st(1, 2), "cd".repeat(32)));
        idx.files.insert("a/c".into(), (st(3, 4), "ef".repeat(32)));
        let p = path_for(dir.path(), 1, 2);
        store(&p, &idx).expect("stores");
        let back = load(&p).expect("loads");
        assert_eq!(back.recorded_at_ns, 42);
        assert_eq!(back.files, idx.files);
        let body = fs::read(&p).expect("reads");
        fs::write(&p, &body[..body.len() - 3]).expect("writes");
        assert!(load(&p).is_none());
    }

    #[test]
    fn an_index_written_from_a_capture_list_equals_the_map_encoding() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut idx = Index {
            recorded_at_ns: 7,
            ..Default::default()
        };
        // Out of order, with one path listed twice (the later entry wins, as in a map).
        let mut list = vec![
            ("b/c".to_string(), st(5, 6), "01".repeat(32)),
            ("a".to_string(), st(1, 2), "23".repeat(32)),
            ("b".to_string(), st(9, 9), "45".repeat(32)),
            ("b".to_string(), st(3, 4), "67".repeat(32)),
        ];
        for (p, s, h) in &list {
            idx.files.insert(p.clone(), (*s, h.clone()));
        }
        let p = path_for(dir.path(), 3, 4);
        store_entries(&p, 7, &mut list).expect("stores");
        assert_eq!(fs::read(&p).expect("reads"), idx.encode());
        let back = load(&p).expect("loads");
        assert_eq!(back.files, idx.files);
        assert_eq!(back.files["b"].1, "67".repeat(32));
    }
}
