//! Packs: many small file contents in one file, each compressed with zstd.
//!
//! A pack is `DWP\x01`, then one zstd frame per object, then an index of its objects
//! (BLAKE3 content hash, offset, compressed and raw length; 48 bytes each; sorted by hash
//! in packs written since 2026-12-02, in the order written before), the object
//! count, the BLAKE3 of the index, and the magic `DWPI`. Every object is still checked on
//! restore against its content hash (its name); the index checksum catches a torn or
//! damaged pack before any of its objects is trusted.
//!
//! Packs are written in a capture's staging directory and renamed into `packs/` with the
//! loose blobs (durable before any manifest names them). A pack is never changed after
//! that; garbage collection deletes packs without live objects and rewrites those that are
//! mostly dead (the new pack is durable before the old one goes).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{WsError, WsResult};

const MAGIC: &[u8; 4] = b"DWP\x01";
const INDEX_MAGIC: &[u8; 4] = b"DWPI";
const ENTRY: usize = 32 + 8 + 4 + 4;
const TRAILER: usize = 4 + 32 + 4;

/// Contents up to this size go into packs; larger ones are loose blobs (`blob.rs`): raw
/// where a copy-on-write restore can clone them, else compressed whole.
pub(super) const PACK_MAX: u64 = 1 << 20;
/// A pack is closed once it holds this many (compressed) bytes.
const PACK_TARGET: u64 = 64 << 20;
/// zstd level: 2. On the bench's 150k small files (T2) it keeps 0.65% more than level 3
/// (zstd's default) for about 5% less CPU of a first snapshot (benches/README.md).
const LEVEL: i32 = 2;

/// Where one object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Loc {
    pub pack: u32,
    pub offset: u64,
    pub clen: u32,
    pub rlen: u32,
}

/// One object in a pack's own index.
#[derive(Debug, Clone, Copy)]
pub(super) struct Object {
    pub hash: [u8; 32],
    pub offset: u64,
    pub clen: u32,
    pub rlen: u32,
}

/// Every object of every pack in `packs/`: a sorted array (56 bytes an object, about half
/// of a hash map's footprint; the service keeps it for as long as it runs).
#[derive(Default)]
pub(super) struct PackIndex {
    pub names: Vec<String>,
    // INVARIANT: sorted by hash, each hash once (the first pack that has it).
    objects: Vec<([u8; 32], Loc)>,
}

impl PackIndex {
    /// Reads the index of every pack in `dir`. A pack whose index is damaged is left out
    /// (with a warning): its objects count as missing.
    pub fn load(dir: &Path) -> WsResult<PackIndex> {
        let mut idx = PackIndex::default();
        let mut names: Vec<String> = fs::read_dir(dir)
            .map_err(|e| WsError::io(dir, e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".pack"))
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            match read_index(&path) {
                Ok(objects) => idx.append(name, &objects),
                Err(e) => tracing::warn!(pack = %path.display(), error = %e, "pack unreadable"),
            }
        }
        // Sorted once, not once a pack.
        idx.settle();
        Ok(idx)
    }

    /// Records a pack that is now in place.
    pub fn add(&mut self, name: String, objects: &[Object]) {
        self.append(name, objects);
        self.settle();
    }

    /// Appends a pack's objects, unsorted.
    fn append(&mut self, name: String, objects: &[Object]) {
        let pack = self.names.len() as u32;
        self.names.push(name);
        self.objects.extend(objects.iter().map(|o| {
            let loc = Loc {
                pack,
                offset: o.offset,
                clen: o.clen,
                rlen: o.rlen,
            };
            (o.hash, loc)
        }));
    }

    /// Restores the invariant after appends. Stable: of equal hashes the earlier pack's
    /// comes first, and stays. Packs list their objects by hash (see `PackWriter::close`),
    /// so this merges sorted runs.
    fn settle(&mut self) {
        self.objects.sort_by_key(|o| o.0);
        self.objects.dedup_by(|later, kept| later.0 == kept.0);
    }

    pub fn get(&self, hash: &[u8; 32]) -> Option<Loc> {
        let i = self.objects.binary_search_by(|(h, _)| h.cmp(hash)).ok()?;
        Some(self.objects[i].1)
    }
}

/// Reads and checks the index at the end of a pack.
pub(super) fn read_index(path: &Path) -> Result<Vec<Object>, String> {
    let f = File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    if len < (MAGIC.len() + TRAILER) as u64 {
        return Err("too short".into());
    }
    let mut trailer = [0u8; TRAILER];
    f.read_exact_at(&mut trailer, len - TRAILER as u64)
        .map_err(|e| e.to_string())?;
    if &trailer[36..] != INDEX_MAGIC {
        return Err("no index".into());
    }
    let n = u32::from_le_bytes(trailer[..4].try_into().map_err(|_| "count")?) as u64;
    let index_len = n * ENTRY as u64;
    if index_len + (MAGIC.len() + TRAILER) as u64 > len {
        return Err("index longer than the pack".into());
    }
    let start = len - TRAILER as u64 - index_len;
    let mut body = vec![0u8; index_len as usize];
    f.read_exact_at(&mut body, start)
        .map_err(|e| e.to_string())?;
    if blake3::hash(&body).as_bytes() != &trailer[4..36] {
        return Err("index fails its checksum".into());
    }
    let mut out = Vec::with_capacity(n as usize);
    for e in body.chunks_exact(ENTRY) {
        let o = Object {
            hash: e[..32].try_into().map_err(|_| "hash")?,
            offset: u64::from_le_bytes(e[32..40].try_into().map_err(|_| "offset")?),
            clen: u32::from_le_bytes(e[40..44].try_into().map_err(|_| "clen")?),
            rlen: u32::from_le_bytes(e[44..48].try_into().map_err(|_| "rlen")?),
        };
        if o.offset < MAGIC.len() as u64 || o.offset + u64::from(o.clen) > start {
            return Err("object outside the pack".into());
        }
        out.push(o);
    }
    Ok(out)
}

/// Reads one object and decompresses it; the caller checks its hash.
pub(super) fn read_object(f: &File, loc: Loc) -> std::io::Result<Vec<u8>> {
    let mut frame = vec![0u8; loc.clen as usize];
    f.read_exact_at(&mut frame, loc.offset)?;
    let raw = zstd::bulk::decompress(&frame, loc.rlen as usize)?;
    if raw.len() != loc.rlen as usize {
        return Err(std::io::Error::other("object has the wrong length"));
    }
    Ok(raw)
}

/// [`read_object`] with a decompression context the caller keeps (many small objects in
/// a row: a context per object would cost more than decompressing them).
pub(super) fn read_object_with(
    f: &File,
    loc: Loc,
    d: &mut zstd::bulk::Decompressor<'_>,
) -> std::io::Result<Vec<u8>> {
    let mut frame = vec![0u8; loc.clen as usize];
    f.read_exact_at(&mut frame, loc.offset)?;
    let raw = d.decompress(&frame, loc.rlen as usize)?;
    if raw.len() != loc.rlen as usize {
        return Err(std::io::Error::other("object has the wrong length"));
    }
    Ok(raw)
}

/// A compression context at the packs' level, for many objects in a row.
pub(super) fn compressor() -> std::io::Result<zstd::bulk::Compressor<'static>> {
    zstd::bulk::Compressor::new(LEVEL)
}

/// Compresses one object's content (captures keep a context: [`compressor`]).
#[cfg(test)]
pub(super) fn compress(raw: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::bulk::compress(raw, LEVEL)
}

/// Writes packs into a staging directory, closing each at [`PACK_TARGET`].
pub(super) struct PackWriter {
    dir: PathBuf,
    prefix: String,
    current: Option<Open>,
    done: Vec<(PathBuf, Vec<Object>)>,
    seq: u32,
}

struct Open {
    path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    objects: Vec<Object>,
}

impl PackWriter {
    /// Packs will be `<dir>/<prefix>-<n>.pack`.
    pub fn new(dir: &Path, prefix: &str) -> PackWriter {
        PackWriter {
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            current: None,
            done: Vec::new(),
            seq: 0,
        }
    }

    /// Appends one compressed object.
    pub fn add(&mut self, hash: [u8; 32], frame: &[u8], rlen: u32) -> WsResult<()> {
        if self.current.is_none() {
            let path = self.dir.join(format!("{}-{}.pack", self.prefix, self.seq));
            self.seq += 1;
            let f = File::create(&path).map_err(|e| WsError::io(&path, e))?;
            let mut out = BufWriter::with_capacity(1 << 20, f);
            out.write_all(MAGIC).map_err(|e| WsError::io(&path, e))?;
            self.current = Some(Open {
                path,
                out,
                offset: MAGIC.len() as u64,
                objects: Vec::new(),
            });
        }
        let Some(cur) = self.current.as_mut() else {
            return Err(WsError::Internal("no open pack".into()));
        };
        let clen = u32::try_from(frame.len())
            .map_err(|_| WsError::Internal("object too large for a pack".into()))?;
        cur.out
            .write_all(frame)
            .map_err(|e| WsError::io(&cur.path, e))?;
        cur.objects.push(Object {
            hash,
            offset: cur.offset,
            clen,
            rlen,
        });
        cur.offset += u64::from(clen);
        if cur.offset >= PACK_TARGET {
            self.close()?;
        }
        Ok(())
    }

    /// Writes the open pack's index and closes it.
    fn close(&mut self) -> WsResult<()> {
        let Some(mut cur) = self.current.take() else {
            return Ok(());
        };
        // Listed by hash (an object's offset says where it is): loading many packs then
        // merges sorted runs instead of sorting every object.
        cur.objects.sort_unstable_by_key(|o| o.hash);
        let mut index = Vec::with_capacity(cur.objects.len() * ENTRY);
        for o in &cur.objects {
            index.extend_from_slice(&o.hash);
            index.extend_from_slice(&o.offset.to_le_bytes());
            index.extend_from_slice(&o.clen.to_le_bytes());
            index.extend_from_slice(&o.rlen.to_le_bytes());
        }
        let n = u32::try_from(cur.objects.len())
            .map_err(|_| WsError::Internal("too many objects in a pack".into()))?;
        let io = |e| WsError::io(&cur.path, e);
        cur.out.write_all(&index).map_err(io)?;
        cur.out.write_all(&n.to_le_bytes()).map_err(io)?;
        cur.out
            .write_all(blake3::hash(&index).as_bytes())
            .map_err(io)?;
        cur.out.write_all(INDEX_MAGIC).map_err(io)?;
        cur.out.flush().map_err(io)?;
        self.done.push((cur.path, cur.objects));
        Ok(())
    }

    /// Closes the open pack; returns every pack written and its objects. The caller makes
    /// them durable (`syncfs`) before moving them into place.
    pub fn finish(mut self) -> WsResult<Vec<(PathBuf, Vec<Object>)>> {
        self.close()?;
        Ok(std::mem::take(&mut self.done))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn packs_round_trip_and_a_damaged_index_or_object_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = PackWriter::new(dir.path(), "t");
        let bodies: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
        for b in &bodies {
            let frame = compress(b).unwrap();
            w.add(*blake3::hash(b).as_bytes(), &frame, b.len() as u32)
                .unwrap();
        }
        let packs = w.finish().unwrap();
        assert_eq!(packs.len(), 1);
        let (path, objects) = &packs[0];
        let listed = read_index(path).unwrap();
        assert_eq!(listed.len(), 50);
        assert!(
            listed.is_sorted_by_key(|o| o.hash),
            "a pack lists its objects by hash"
        );
        let mut idx = PackIndex::default();
        idx.add("t-0.pack".into(), objects);
        let f = File::open(path).unwrap();
        for b in &bodies {
            let loc = idx.get(blake3::hash(b).as_bytes()).unwrap();
            assert_eq!(&read_object(&f, loc).unwrap(), b);
        }
        // A flipped byte in an object: decompression fails or the content hash differs.
        let mut data = fs::read(path).unwrap();
        let loc = idx.get(blake3::hash(&bodies[3]).as_bytes()).unwrap();
        data[loc.offset as usize + loc.clen as usize / 2] ^= 0xff;
        fs::write(path, &data).unwrap();
        let f = File::open(path).unwrap();
        let read = read_object(&f, loc);
        assert!(read.is_err() || blake3::hash(&read.unwrap()) != blake3::hash(&bodies[3]));
        // A torn pack (cut anywhere in its index) is refused.
        let len = data.len();
        for cut in [len - 1, len - TRAILER, len - TRAILER - ENTRY / 2, 3] {
            fs::write(path, &data[..cut]).unwrap();
            assert!(read_index(path).is_err(), "cut at {cut}");
        }
    }
}

#[cfg(test)]
mod index_tests {
    use super::*;

    #[test]
    fn an_object_in_two_packs_is_found_in_the_first_and_absent_ones_are_not_found() {
        let obj = |h: u8, offset: u64| Object {
            hash: [h; 32],
            offset,
            clen: 1,
            rlen: 2,
        };
        let mut idx = PackIndex::default();
        idx.add("a.pack".into(), &[obj(9, 4), obj(3, 5), obj(9, 6)]);
        idx.add("b.pack".into(), &[obj(3, 7), obj(1, 8)]);
        let at = |h: u8| idx.get(&[h; 32]).map(|l| (l.pack, l.offset));
        assert_eq!(at(9), Some((0, 4)), "first entry of the first pack");
        assert_eq!(at(3), Some((0, 5)), "the earlier pack wins");
        assert_eq!(at(1), Some((1, 8)));
        assert_eq!(at(2), None);
        assert_eq!(at(0xff), None);
        assert_eq!(PackIndex::default().get(&[0; 32]), None);
    }
}
