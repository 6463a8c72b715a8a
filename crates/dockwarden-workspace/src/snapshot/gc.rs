//! Garbage collection of packs: a pack without live objects is deleted; a pack whose live
//! objects are less than half its bytes is rewritten with only those (their compressed
//! frames copied as they are), made durable and put in place before the old one is deleted.
//! A crash in between leaves both, which is harmless: an object found twice is one object.

use std::collections::HashSet;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::digest::Digest;
use super::pack::{PackWriter, read_index};
use crate::error::{WsError, WsResult};

/// Deletes or rewrites packs in `packs_dir` so that only objects in `live` remain (give or
/// take mostly-live packs); returns how many objects were dropped.
pub(super) fn sweep_packs(packs_dir: &Path, tmp: &Path, live: &HashSet<Digest>) -> WsResult<u64> {
    let mut dropped = 0;
    let names: Vec<_> = fs::read_dir(packs_dir)
        .map_err(|e| WsError::io(packs_dir, e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pack"))
        .collect();
    for name in names {
        let path = packs_dir.join(&name);
        // A damaged pack serves nothing; keep it for inspection rather than guess.
        let Ok(objects) = read_index(&path) else {
            continue;
        };
        let total: u64 = objects.iter().map(|o| u64::from(o.clen)).sum();
        let mut keep: Vec<_> = objects.iter().filter(|o| live.contains(&o.hash)).collect();
        // A pack lists its objects by hash: copy them in the order they are in the file.
        keep.sort_by_key(|o| o.offset);
        let kept: u64 = keep.iter().map(|o| u64::from(o.clen)).sum();
        if keep.len() == objects.len() || (kept * 2 >= total && !keep.is_empty()) {
            continue;
        }
        dropped += (objects.len() - keep.len()) as u64;
        if !keep.is_empty() {
            let work = tmp.join(format!("gc-{name}"));
            fs::create_dir_all(&work).map_err(|e| WsError::io(&work, e))?;
            let result = (|| {
                let src = File::open(&path).map_err(|e| WsError::io(&path, e))?;
                let mut w = PackWriter::new(&work, "gc");
                for o in &keep {
                    let mut frame = vec![0u8; o.clen as usize];
                    src.read_exact_at(&mut frame, o.offset)
                        .map_err(|e| WsError::io(&path, e))?;
                    w.add(o.hash, &frame, o.rlen)?;
                }
                let written = w.finish()?;
                let f = File::open(&work).map_err(|e| WsError::io(&work, e))?;
                nix::unistd::syncfs(&f).map_err(|e| WsError::errno(&work, e))?;
                for (i, (p, _)) in written.into_iter().enumerate() {
                    let dest =
                        packs_dir.join(format!("{}.gc{i}.pack", name.trim_end_matches(".pack")));
                    fs::rename(&p, &dest).map_err(|e| WsError::io(&dest, e))?;
                }
                File::open(packs_dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| WsError::io(packs_dir, e))
            })();
            let _ = fs::remove_dir_all(&work);
            result?;
        }
        fs::remove_file(&path).map_err(|e| WsError::io(&path, e))?;
    }
    Ok(dropped)
}
