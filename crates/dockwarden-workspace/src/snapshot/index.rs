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

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::codec::{Malformed, R, Reader, Writer};
use super::digest::Digest;

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

/// One file of an index: where its path is in the arena, its stat data and hash.
#[derive(Debug, Clone, Copy)]
struct Rec {
    start: usize,
    len: u32,
    stat: Stat,
    hash: Digest,
}

/// One worktree's index: every path in one buffer, records sorted by path (each path
/// once), so loading it allocates twice, not twice per file, and a lookup is a search in
/// sorted order.
#[derive(Debug, Default)]
pub struct Index {
    /// When the stat data was recorded: no change to the tree happened before this moment
    /// without being seen (a capture's start, or a restore's publication).
    pub recorded_at_ns: i64,
    paths: Vec<u8>,
    // INVARIANT: sorted by path, strictly (`decode` refuses anything else).
    files: Vec<Rec>,
}

impl Index {
    fn path(&self, i: usize) -> &[u8] {
        let r = &self.files[i];
        &self.paths[r.start..r.start + r.len as usize]
    }

    /// The first record in `lo..hi` whose path is not below `key`.
    fn lower_bound(&self, mut lo: usize, mut hi: usize, key: &[u8]) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.path(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn trusted_at(&self, i: usize, key: &[u8], now: &Stat) -> Option<Digest> {
        let r = self.files.get(i)?;
        (self.path(i) == key && trusted(&r.stat, now, self.recorded_at_ns)).then_some(r.hash)
    }

    #[cfg(test)]
    /// The hash of `path` if its recorded stat still holds.
    pub fn lookup(&self, path: &str, now: &Stat) -> Option<Digest> {
        let i = self.lower_bound(0, self.files.len(), path.as_bytes());
        self.trusted_at(i, path.as_bytes(), now)
    }

    /// A cursor for lookups in increasing path order (one directory's files): each search
    /// starts where the last one ended, so neighbours cost a comparison or two.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor {
            index: self,
            pos: None,
        }
    }

    #[cfg(test)]
    /// Every record: path, stat data, hash, in path order.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &Stat, &Digest)> {
        (0..self.files.len()).map(|i| (self.path(i), &self.files[i].stat, &self.files[i].hash))
    }

    /// How many files the index records.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Every hash the index names.
    pub fn hashes(&self) -> impl Iterator<Item = &Digest> {
        self.files.iter().map(|r| &r.hash)
    }

    #[cfg(test)]
    /// An index of `files` (any order; a path listed twice keeps its last entry).
    pub fn from_entries(recorded_at_ns: i64, mut files: Vec<(String, Stat, Digest)>) -> Index {
        sort_dedup(&mut files);
        let mut idx = Index {
            recorded_at_ns,
            paths: Vec::new(),
            files: Vec::with_capacity(files.len()),
        };
        for (p, stat, hash) in files {
            idx.push(p.as_bytes(), stat, hash);
        }
        idx
    }

    #[cfg(test)]
    fn push(&mut self, path: &[u8], stat: Stat, hash: Digest) -> bool {
        let Ok(len) = u32::try_from(path.len()) else {
            return false;
        };
        let start = self.paths.len();
        self.paths.extend_from_slice(path);
        self.files.push(Rec {
            start,
            len,
            stat,
            hash,
        });
        true
    }

    #[cfg(test)]
    fn encode(&self) -> Vec<u8> {
        let view: Vec<_> = self.entries().collect();
        encode_sorted(self.recorded_at_ns, &view)
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
        let mut idx = Index {
            recorded_at_ns,
            // Paths are prefix-compressed: the arena is a few times the body's size.
            paths: Vec::with_capacity(data.len().saturating_mul(2)),
            files: Vec::with_capacity(n.min(data.len() / 40)),
        };
        for _ in 0..n {
            let path = r.path_bytes()?;
            let prev = idx.files.len().checked_sub(1).map(|i| idx.path(i));
            if prev.is_some_and(|p| p >= path) {
                return Err(Malformed);
            }
            // A borrow of the reader ends here: copy the path before reading on.
            let start = idx.paths.len();
            idx.paths.extend_from_slice(path);
            let stat = Stat {
                dev: r.varint()?,
                ino: r.varint()?,
                mode: r.u32()?,
                size: r.varint()?,
                mtime_ns: r.i64()?,
                ctime_ns: r.i64()?,
            };
            let len = u32::try_from(idx.paths.len() - start).map_err(|_| Malformed)?;
            let hash = r.digest()?;
            idx.files.push(Rec {
                start,
                len,
                stat,
                hash,
            });
        }
        if !r.done() {
            return Err(Malformed);
        }
        Ok(idx)
    }
}

/// Lookups in increasing path order; see [`Index::cursor`].
pub struct Cursor<'a> {
    index: &'a Index,
    /// Where the last search ended; `None` before the first.
    pos: Option<usize>,
}

impl Cursor<'_> {
    /// The hash of `path` if its recorded stat still holds. Paths given in increasing order
    /// are found by a galloping search forward; any other order still finds them.
    pub fn lookup(&mut self, path: &str, now: &Stat) -> Option<Digest> {
        let idx = self.index;
        let key = path.as_bytes();
        let n = idx.files.len();
        let i = match self.pos {
            Some(from) if from == 0 || idx.path(from - 1) < key => {
                // Every record before `lo` is below `key`; probe 1, 2, 4, ... ahead.
                let (mut lo, mut hi, mut step) = (from, from, 1);
                while hi < n && idx.path(hi) < key {
                    lo = hi + 1;
                    hi += step;
                    step *= 2;
                }
                idx.lower_bound(lo, hi.min(n), key)
            }
            _ => idx.lower_bound(0, n, key),
        };
        self.pos = Some(i);
        idx.trusted_at(i, key, now)
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
fn encode_sorted(recorded_at_ns: i64, files: &[(&[u8], &Stat, &Digest)]) -> Vec<u8> {
    // About 60 bytes an entry: one allocation for a whole tree.
    let mut w = Writer::default();
    w.buf.reserve(64 + files.len() * 64);
    w.raw(MAGIC);
    w.i64(recorded_at_ns);
    w.varint(files.len() as u64);
    for (p, st, hash) in files {
        w.path_bytes(p);
        w.varint(st.dev);
        w.varint(st.ino);
        w.varint(u64::from(st.mode));
        w.varint(st.size);
        w.i64(st.mtime_ns);
        w.i64(st.ctime_ns);
        w.raw(&hash[..]);
    }
    let sum = blake3::hash(&w.buf);
    w.raw(sum.as_bytes());
    w.buf
}

#[cfg(test)]
/// Writes an index with temp + rename (no fsync: it is a cache, and a torn one fails its
/// checksum and is ignored).
pub fn store(path: &Path, index: &Index) -> std::io::Result<()> {
    write_body(path, &index.encode())
}

/// Writes an index straight from a `(path, stat, hash)` list, without building the index
/// a lookup needs: sorts it by path (a path listed twice keeps its last entry).
pub fn store_entries(
    path: &Path,
    recorded_at_ns: i64,
    files: &mut Vec<(String, Stat, Digest)>,
) -> std::io::Result<()> {
    sort_dedup(files);
    let view: Vec<(&[u8], &Stat, &Digest)> = files
        .iter()
        .map(|(p, st, h)| (p.as_bytes(), st, h))
        .collect();
    write_body(path, &encode_sorted(recorded_at_ns, &view))
}

/// Writes the index of a capture from its entries, already in path order, and their stat
/// data (`None`: not to be trusted next time, or not a file). Copies no path.
pub fn store_walked(
    path: &Path,
    recorded_at_ns: i64,
    entries: &[super::manifest::Entry],
    stats: &[Option<Stat>],
) -> std::io::Result<()> {
    use super::manifest::EntryKind;
    let mut view: Vec<(&[u8], &Stat, &Digest)> = Vec::with_capacity(entries.len());
    for (e, st) in entries.iter().zip(stats) {
        if let (EntryKind::File { hash, .. }, Some(st)) = (&e.kind, st) {
            // INVARIANT: `entries` is sorted; equal neighbours keep the later one.
            if view.last().is_some_and(|(p, _, _)| *p == e.path.as_bytes()) {
                view.pop();
            }
            view.push((e.path.as_bytes(), st, hash));
        }
    }
    if !view.is_sorted_by(|a, b| a.0 < b.0) {
        view.sort_by(|a, b| a.0.cmp(b.0));
        view.reverse();
        view.dedup_by(|later, kept| later.0 == kept.0);
        view.reverse();
    }
    write_body(path, &encode_sorted(recorded_at_ns, &view))
}

/// Copies the index of the tree whose root is `from` (`(dev, ino)`) to the tree `to`, a
/// block-level clone of the same filesystem (a whole-image `FICLONE`: the same inodes,
/// timestamps and contents, another device): every record's device becomes `to`'s, and
/// `recorded_at` is lowered to `recorded_before_ns` (the moment the clone was frozen, when
/// that is earlier). False if `from` has no (valid) index. The racy rule holds across the
/// clone: a change on either side after the freeze moves that file's ctime past it.
pub fn carry(
    dir: &Path,
    from: (u64, u64),
    to: (u64, u64),
    recorded_before_ns: i64,
) -> std::io::Result<bool> {
    let (src, dst) = (path_for(dir, from.0, from.1), path_for(dir, to.0, to.1));
    Ok(copy_to(&src, &dst, to.0, recorded_before_ns, |_, _, _| true)?.is_some())
}

/// Copies the index at `from` to `to` (as [`carry`] does between two roots, or to and from
/// the file kept beside a snapshot's image clone): every record's device becomes `dev` and
/// `recorded_at` is lowered to `recorded_before_ns`. Every record must pass `check` (path,
/// stat, hash), else nothing is written. `None` when `from` has no valid index or a record
/// failed `check`; else the number of files.
pub fn copy_to(
    from: &Path,
    to: &Path,
    dev: u64,
    recorded_before_ns: i64,
    check: impl Fn(&[u8], &Stat, &Digest) -> bool,
) -> std::io::Result<Option<usize>> {
    let Some(idx) = load(from) else {
        return Ok(None);
    };
    let stats: Vec<Stat> = idx.files.iter().map(|r| Stat { dev, ..r.stat }).collect();
    let view: Vec<(&[u8], &Stat, &Digest)> = (0..idx.files.len())
        .map(|i| (idx.path(i), &stats[i], &idx.files[i].hash))
        .collect();
    if !view.iter().all(|(p, st, h)| check(p, st, h)) {
        return Ok(None);
    }
    let at = idx.recorded_at_ns.min(recorded_before_ns);
    write_body(to, &encode_sorted(at, &view))?;
    Ok(Some(view.len()))
}

/// True if a capture's index would record exactly what the loaded one (`index_files`
/// records) does: no file was hashed, so every file's stat data and hash came from a
/// trusted record of it, every file is settled, and there are as many as before (so none
/// is gone). Only the recording time would differ, and keeping the older one only makes
/// the next capture trust less. Pure.
pub fn unchanged(
    index_files: Option<usize>,
    hashed: u64,
    entries: &[super::manifest::Entry],
    stats: &[Option<Stat>],
) -> bool {
    use super::manifest::EntryKind;
    let Some(index_files) = index_files else {
        return false;
    };
    if hashed != 0 {
        return false;
    }
    let mut files = 0;
    for (e, st) in entries.iter().zip(stats) {
        if matches!(e.kind, EntryKind::File { .. }) {
            if st.is_none() {
                return false;
            }
            files += 1;
        }
    }
    files == index_files
}

/// Sorts by path; of runs of equal paths keeps the last.
fn sort_dedup(files: &mut Vec<(String, Stat, Digest)>) {
    files.sort_by(|a, b| a.0.cmp(&b.0));
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

/// Sleeps until the racy margin has passed since the latest change (`ctime`) among
/// `changed`, plus a millisecond, so a capture after it trusts every one of those entries.
/// For a writer (a restore, an adoption) that alone touched the tree before this moment.
pub fn settle_racy<'a>(changed: impl IntoIterator<Item = &'a Stat>) {
    let last = changed.into_iter().map(|st| st.ctime_ns).max().unwrap_or(0);
    let wait = last + RACY_MARGIN_NS + 1_000_000 - now_ns();
    if wait > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(wait.unsigned_abs()));
    }
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

    fn list(idx: &Index) -> Vec<(String, Stat, Digest)> {
        idx.entries()
            .map(|(p, st, h)| (String::from_utf8_lossy(p).into_owned(), *st, *h))
            .collect()
    }

    #[test]
    fn indexes_round_trip_and_torn_or_unsorted_ones_are_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = Index::from_entries(
            42,
            vec![
                ("a/c".into(), st(3, 4), [0xef; 32]),
                ("a/b".into(), st(1, 2), [0xcd; 32]),
            ],
        );
        let p = path_for(dir.path(), 1, 2);
        store(&p, &idx).expect("stores");
        let back = load(&p).expect("loads");
        assert_eq!(back.recorded_at_ns, 42);
        assert_eq!(list(&back), list(&idx));
        assert_eq!(list(&back)[0].0, "a/b", "sorted by path");
        let body = fs::read(&p).expect("reads");
        fs::write(&p, &body[..body.len() - 3]).expect("writes");
        assert!(load(&p).is_none());
        // A well-formed body whose paths are out of order is no index either.
        let (a, b) = (st(1, 2), st(3, 4));
        let unsorted = encode_sorted(1, &[(b"b", &a, &[1; 32]), (b"a", &b, &[2; 32])]);
        assert!(Index::decode(&unsorted).is_err());
        let twice = encode_sorted(1, &[(b"a", &a, &[1; 32]), (b"a", &b, &[2; 32])]);
        assert!(Index::decode(&twice).is_err());
    }

    #[test]
    fn lookups_find_every_path_in_any_order_and_only_trusted_stat_data() {
        let t = 1_000_000_000_000_000_123;
        let old = st(t - 5_000_000_000, t - 4_000_000_000);
        let names: Vec<String> = (0..300)
            .map(|i| format!("d{}/{}{i}", i % 7, ["a", "b-", "b/", "b0", "c.d"][i % 5]))
            .collect();
        let files = names
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), old, [i as u8; 32]))
            .collect();
        let idx = Index::from_entries(t, files);
        let mut sorted = names.clone();
        sorted.sort();
        let mut cur = idx.cursor();
        for p in &sorted {
            let want = names.iter().position(|n| n == p).map(|i| [i as u8; 32]);
            assert_eq!(idx.lookup(p, &old), want, "{p}");
            assert_eq!(cur.lookup(p, &old), want, "cursor, in order: {p}");
        }
        // Backwards, skipping, and absent paths between present ones.
        let mut cur = idx.cursor();
        for p in sorted.iter().rev().step_by(3) {
            assert!(cur.lookup(p, &old).is_some(), "cursor, backwards: {p}");
            assert_eq!(cur.lookup(&format!("{p}~"), &old), None);
        }
        assert_eq!(idx.cursor().lookup("", &old), None);
        assert_eq!(idx.cursor().lookup("zzz", &old), None);
        let newer = Stat { size: 5, ..old };
        assert_eq!(idx.lookup(&sorted[0], &newer), None, "changed stat data");
        assert_eq!(Index::default().cursor().lookup("a", &old), None);
    }

    #[test]
    fn an_index_is_kept_only_when_the_walk_trusted_every_file_of_it() {
        use crate::snapshot::{Entry, EntryKind};
        let file = |path: &str| Entry {
            path: path.into(),
            kind: EntryKind::File {
                mode: 0o644,
                size: 4,
                hash: [1; 32],
                mtime_ns: 1,
            },
        };
        let d = Entry {
            path: "d".into(),
            kind: EntryKind::Dir {
                mode: 0o755,
                mtime_ns: 0,
            },
        };
        let entries = [d, file("d/a"), file("d/b")];
        let stats = [None, Some(st(1, 2)), Some(st(1, 2))];
        assert!(unchanged(Some(2), 0, &entries, &stats));
        assert!(!unchanged(None, 0, &entries, &stats), "no index to keep");
        assert!(!unchanged(Some(2), 1, &entries, &stats), "a file was read");
        assert!(!unchanged(Some(3), 0, &entries, &stats), "a file is gone");
        assert!(!unchanged(Some(1), 0, &entries, &stats), "a file is new");
        let unsettled = [None, Some(st(1, 2)), None];
        assert!(
            !unchanged(Some(2), 0, &entries, &unsettled),
            "not to be trusted"
        );
    }

    #[test]
    fn an_index_written_from_a_list_or_a_walk_equals_the_index_encoding() {
        use crate::snapshot::{Entry, EntryKind};
        let dir = tempfile::tempdir().expect("tmp");
        // Out of order, with one path listed twice (the later entry wins).
        let mut items = vec![
            ("b/c".to_string(), st(5, 6), [1; 32]),
            ("a".to_string(), st(1, 2), [2; 32]),
            ("b".to_string(), st(9, 9), [3; 32]),
            ("b".to_string(), st(3, 4), [4; 32]),
        ];
        let idx = Index::from_entries(7, items.clone());
        let p = path_for(dir.path(), 3, 4);
        store_entries(&p, 7, &mut items).expect("stores");
        assert_eq!(fs::read(&p).expect("reads"), idx.encode());
        let back = load(&p).expect("loads");
        assert_eq!(list(&back).len(), 3);
        assert_eq!(back.lookup("b", &st(3, 4)), None, "racy: recorded at 7 ns");
        assert_eq!(back.entries().nth(1).map(|e| *e.2), Some([4; 32]));
        // From a walk: files with stat data only; dirs and unsettled files left out.
        let file = |path: &str, h: u8| Entry {
            path: path.into(),
            kind: EntryKind::File {
                mode: 0o644,
                size: 4,
                hash: [h; 32],
                mtime_ns: 1,
            },
        };
        let dir_e = Entry {
            path: "b".into(),
            kind: EntryKind::Dir {
                mode: 0o755,
                mtime_ns: 0,
            },
        };
        let entries = [file("a", 2), dir_e, file("b/c", 1), file("b/d", 9)];
        let stats = [Some(st(1, 2)), Some(st(9, 9)), Some(st(5, 6)), None];
        store_walked(&p, 7, &entries, &stats).expect("stores");
        let want = Index::from_entries(
            7,
            vec![
                ("a".into(), st(1, 2), [2; 32]),
                ("b/c".into(), st(5, 6), [1; 32]),
            ],
        );
        assert_eq!(fs::read(&p).expect("reads"), want.encode());
    }
}
