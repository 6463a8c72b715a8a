//! Tree objects in the store: a capture stages its new trees as one more pack (published
//! with its blobs, so durable before the manifest names them); a load reads a snapshot's
//! trees back out of the packs, each checked against its hash.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::digest::{self, Digest};
use super::manifest::Manifest;
use super::pack::{self, Object, PackIndex, PackWriter};
use super::tree::{Built, ExpandError, Root, expand};
use crate::error::{WsError, WsResult};

/// Writes the trees of `built` that no pack holds yet into a pack in `staging`.
pub(super) fn stage(
    built: &Built,
    packs: &PackIndex,
    staging: &Path,
) -> WsResult<Vec<(PathBuf, Vec<Object>)>> {
    let mut w = PackWriter::new(staging, "trees");
    let mut c = pack::compressor().map_err(|e| WsError::io(staging, e))?;
    for (hash, range) in &built.objects {
        if packs.get(hash).is_some() {
            continue;
        }
        let raw = built.bytes(range);
        let rlen = u32::try_from(raw.len())
            .map_err(|_| WsError::Internal("directory too large for a tree object".into()))?;
        let frame = c.compress(raw).map_err(|e| WsError::io(staging, e))?;
        w.add(*hash, &frame, rlen)?;
    }
    w.finish()
}

/// Reads trees out of packs, keeping each pack open and one decompression context.
struct Trees<'a> {
    packs_dir: &'a Path,
    packs: &'a PackIndex,
    files: HashMap<u32, File>,
    dctx: zstd::bulk::Decompressor<'static>,
}

impl Trees<'_> {
    fn get(&mut self, hash: &Digest) -> Result<Vec<u8>, String> {
        let hex = digest::hex(hash);
        let loc = self
            .packs
            .get(hash)
            .ok_or_else(|| format!("tree `{hex}` missing"))?;
        let file = match self.files.entry(loc.pack) {
            std::collections::hash_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let name = self
                    .packs
                    .names
                    .get(loc.pack as usize)
                    .ok_or_else(|| format!("no pack for tree `{hex}`"))?;
                let path = self.packs_dir.join(name);
                v.insert(File::open(&path).map_err(|e| format!("pack `{name}` unreadable: {e}"))?)
            }
        };
        let body = pack::read_object_with(file, loc, &mut self.dctx)
            .map_err(|e| format!("tree `{hex}` unreadable: {e}"))?;
        if blake3::hash(&body).as_bytes() != hash {
            return Err(format!("tree `{hex}` fails its checksum"));
        }
        Ok(body)
    }
}

/// The manifest of `root`, every tree read from the packs and checked, and the hashes of
/// its trees (what garbage collection must keep besides the files' contents).
pub(super) fn load(
    root: &Root,
    packs_dir: &Path,
    packs: &PackIndex,
) -> Result<(Manifest, Vec<Digest>), String> {
    let mut trees = Trees {
        packs_dir,
        packs,
        files: HashMap::new(),
        dctx: zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?,
    };
    let (entries, hashes) = expand(root, |h| trees.get(h)).map_err(|e| match e {
        ExpandError::Object(msg) => msg,
        ExpandError::Malformed(h) => format!("tree `{}` is malformed", digest::hex(&h)),
        ExpandError::Count { want, found } => {
            format!("trees hold {found} entries, the root says {want}")
        }
    })?;
    let m = Manifest {
        version: super::manifest::VERSION,
        id: root.id.clone(),
        created_at_ms: root.created_at_ms,
        root_mode: root.root_mode,
        entries,
    };
    Ok((m, hashes))
}
