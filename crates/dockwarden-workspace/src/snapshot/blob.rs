//! Loose blobs: the contents of files above the pack limit, one file each, in one of two
//! kinds recorded by the blob's name.
//!
//! - `blobs/<2 hex>/<hash>`: raw. Where the store's filesystem can `FICLONE` (XFS with
//!   reflink, btrfs), a restore clones it, so forks share its extents. Stores written
//!   before compressed blobs existed hold only this kind.
//! - `blobs/<2 hex>/<hash>.zst`: one zstd stream of the content. Used where cloning cannot
//!   happen (ext4, tmpfs): a clone is impossible there, so a raw blob would only cost disk.
//!
//! Which kind a new blob gets is decided once per store ([`probe_reflink`], when it opens).
//! Both kinds are always readable, whichever the store writes now, so a store moved between
//! filesystems keeps working; a restore prefers the raw kind when both exist. A blob's name
//! is the hash of its raw content either way, and a restore checks that hash.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// zstd level of compressed blobs: 2. On the bench's large files (minified bundles and
/// binaries, 728 MiB at T2) it stores 0.7% less than level 3 (zstd's and restic's default)
/// and, compressed in one call, costs about 60% of level 3's CPU (benches/README.md).
const LEVEL: i32 = 2;

/// A compressed blob is kept only if it saves at least 1/32 of the raw size; incompressible
/// content (images, archives, already compressed files) stays raw and restores without a
/// decoder.
const MIN_SAVING_DIVISOR: u64 = 32;

const ZSTD_SUFFIX: &str = ".zst";

/// How a loose blob is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Raw,
    Zstd,
}

/// Path of a blob of `kind` in the store.
pub(super) fn path(blobs: &Path, hash: &str, kind: Kind) -> PathBuf {
    let shard = blobs.join(&hash[..2]);
    match kind {
        Kind::Raw => shard.join(hash),
        Kind::Zstd => shard.join(format!("{hash}{ZSTD_SUFFIX}")),
    }
}

/// Where the blob of `hash` is, raw first (it can be cloned), if it exists in either kind.
pub(super) fn find(blobs: &Path, hash: &str) -> Option<(PathBuf, Kind)> {
    [Kind::Raw, Kind::Zstd].into_iter().find_map(|kind| {
        let p = path(blobs, hash, kind);
        p.exists().then_some((p, kind))
    })
}

/// True if a blob of `hash` exists in either kind.
pub(super) fn exists(blobs: &Path, hash: &str) -> bool {
    find(blobs, hash).is_some()
}

/// The content hash a blob's file name stands for (either kind).
pub(super) fn hash_of_name(name: &str) -> &str {
    name.strip_suffix(ZSTD_SUFFIX).unwrap_or(name)
}

/// Whether files in `dir` can be cloned into each other (`FICLONE`): two small files
/// are made, one cloned into the other, and both removed.
pub(super) fn probe_reflink(dir: &Path) -> io::Result<bool> {
    let src_path = dir.join(".reflink-probe-src");
    let dst_path = dir.join(".reflink-probe-dst");
    let result = (|| {
        // FICLONE needs its source open for reading.
        let mut src = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&src_path)?;
        src.write_all(&[0x5a; 4096])?;
        let dst = File::create(&dst_path)?;
        super::clone::try_clone(&dst, &src)
    })();
    let _ = fs::remove_file(&src_path);
    let _ = fs::remove_file(&dst_path);
    result
}

/// Compresses the staged raw blob `tmp` (`raw_len` bytes) into `<tmp>.zst`, streamed.
/// Returns the kind to publish: `Zstd` (the raw file is removed, so it is never written
/// back) or `Raw` if compression saves too little (the raw file is kept).
pub(super) fn compress_staged(tmp: &Path, raw_len: u64) -> io::Result<Kind> {
    let out_path = zst_path(tmp);
    let written = (|| {
        let src = BufReader::with_capacity(1 << 20, File::open(tmp)?);
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&out_path)?);
        zstd::stream::copy_encode(src, &mut out, LEVEL)?;
        let f = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        Ok::<_, io::Error>(f.metadata()?.len())
    })();
    match written {
        Ok(clen) if clen + raw_len / MIN_SAVING_DIVISOR <= raw_len => {
            fs::remove_file(tmp)?;
            Ok(Kind::Zstd)
        }
        Ok(_) => {
            fs::remove_file(&out_path)?;
            Ok(Kind::Raw)
        }
        Err(e) => {
            let _ = fs::remove_file(&out_path);
            Err(e)
        }
    }
}

/// Stages `data` (a file read into memory by a capture) as `<tmp>.zst`, or as a raw `tmp`
/// if compression saves too little; returns the kind staged. Capture workers call it, so
/// compression overlaps the other workers' reads, and no raw copy is written and read
/// back. The content is compressed in one call: zstd's streaming API would take it in
/// windows through its slower external-dictionary path.
pub(super) fn stage_compressed(data: &[u8], tmp: &Path) -> io::Result<Kind> {
    let frame = zstd::bulk::compress(data, LEVEL)?;
    let raw_len = data.len() as u64;
    if frame.len() as u64 + raw_len / MIN_SAVING_DIVISOR > raw_len {
        fs::write(tmp, data)?;
        return Ok(Kind::Raw);
    }
    let out_path = zst_path(tmp);
    if let Err(e) = fs::write(&out_path, &frame) {
        let _ = fs::remove_file(&out_path);
        return Err(e);
    }
    Ok(Kind::Zstd)
}

/// The content hashes of every loose blob (either kind) under `blobs`: one listing of its
/// shards, instead of two `stat`s of a blob path for each new file a capture meets.
pub(super) fn hashes(blobs: &Path) -> io::Result<std::collections::HashSet<[u8; 32]>> {
    let mut out = std::collections::HashSet::new();
    for shard in fs::read_dir(blobs)? {
        let shard = shard?;
        if !shard.file_type()?.is_dir() {
            continue;
        }
        for blob in fs::read_dir(shard.path())? {
            let name = blob?.file_name();
            if let Some(h) = name
                .to_str()
                .and_then(|n| super::digest::parse(hash_of_name(n)))
            {
                out.insert(h);
            }
        }
    }
    Ok(out)
}

/// Where [`compress_staged`] puts the compressed form of a staged file.
pub(super) fn staged_path(tmp: &Path, kind: Kind) -> PathBuf {
    match kind {
        Kind::Raw => tmp.to_path_buf(),
        Kind::Zstd => zst_path(tmp),
    }
}

fn zst_path(tmp: &Path) -> PathBuf {
    let mut p = tmp.as_os_str().to_owned();
    p.push(ZSTD_SUFFIX);
    PathBuf::from(p)
}

/// A reader of a blob's raw content (decompressing a `Zstd` blob as it is read). The
/// caller checks what it reads against the blob's hash.
pub(super) fn reader(file: File, kind: Kind) -> io::Result<Box<dyn Read>> {
    Ok(match kind {
        Kind::Raw => Box::new(file),
        Kind::Zstd => Box::new(zstd::stream::read::Decoder::new(file)?),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn staged_blobs_are_compressed_unless_it_saves_too_little() {
        let dir = tempfile::tempdir().unwrap();
        // Text-like content compresses: the raw file goes, the stream decodes to it.
        let text: Vec<u8> = (0..2u32 << 20)
            .map(|i| b"abcdefgh ;\n"[(i * 7 % 11) as usize])
            .collect();
        let tmp = dir.path().join("0");
        fs::write(&tmp, &text).unwrap();
        assert_eq!(
            compress_staged(&tmp, text.len() as u64).unwrap(),
            Kind::Zstd
        );
        assert!(!tmp.exists());
        let z = staged_path(&tmp, Kind::Zstd);
        let mut back = Vec::new();
        reader(File::open(&z).unwrap(), Kind::Zstd)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        assert!(fs::metadata(&z).unwrap().len() < text.len() as u64 / 10);
        // Incompressible content stays raw and nothing compressed is left behind.
        let mut noise = vec![0u8; 2 << 20];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in &mut noise {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let tmp = dir.path().join("1");
        fs::write(&tmp, &noise).unwrap();
        assert_eq!(
            compress_staged(&tmp, noise.len() as u64).unwrap(),
            Kind::Raw
        );
        assert_eq!(fs::read(&tmp).unwrap(), noise);
        assert!(!staged_path(&tmp, Kind::Zstd).exists());
    }

    #[test]
    fn blobs_staged_from_memory_are_compressed_unless_it_saves_too_little() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..2u32 << 20)
            .map(|i| b"abcdefgh ;\n"[(i * 7 % 11) as usize])
            .collect();
        let tmp = dir.path().join("0");
        assert_eq!(stage_compressed(&text, &tmp).unwrap(), Kind::Zstd);
        assert!(!tmp.exists(), "no raw copy");
        let mut back = Vec::new();
        let z = staged_path(&tmp, Kind::Zstd);
        reader(File::open(&z).unwrap(), Kind::Zstd)
            .unwrap()
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, text);
        let mut noise = vec![0u8; 2 << 20];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for b in &mut noise {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let tmp = dir.path().join("1");
        assert_eq!(stage_compressed(&noise, &tmp).unwrap(), Kind::Raw);
        assert_eq!(fs::read(&tmp).unwrap(), noise);
        assert!(!staged_path(&tmp, Kind::Zstd).exists());
    }

    #[test]
    fn names_of_both_kinds_stand_for_the_same_hash() {
        let h = "ab".repeat(32);
        let blobs = Path::new("/s/blobs");
        for kind in [Kind::Raw, Kind::Zstd] {
            let p = path(blobs, &h, kind);
            assert!(p.starts_with("/s/blobs/ab"));
            let name = p.file_name().unwrap().to_str().unwrap();
            assert_eq!(hash_of_name(name), h);
        }
    }
}
