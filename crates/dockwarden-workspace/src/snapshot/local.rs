//! A content-addressed snapshot store on the local filesystem.
//!
//! Layout: `blobs/<2 hex>/<hash>[.zst]` (contents of large files, shared by all snapshots
//! and forks; raw where the filesystem can clone them, else zstd: [`super::blob`]; BLAKE3,
//! or SHA-256 for version 1 manifests), `packs/` (small files), `manifests/<id>.json`
//! (binary from version 2 on; the name is kept), `index/<dev>-<ino>` (stat index of each
//! worktree, a cache), `tmp/` (staging; emptied on start).
//! A capture writes new blobs to `tmp/`, syncs the filesystem, renames them into `blobs/`,
//! syncs again, then writes the manifest with temp + fsync + rename. A crash at any point
//! leaves at worst unreferenced files, which `collect_garbage` removes.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use std::os::unix::fs::MetadataExt;

use super::blob::{self, Kind};
use super::capture::{Walker, open_root};
use super::digest::{self, Digest};
use super::index;
use super::manifest::{BLAKE3_FROM, EntryKind, Manifest, sha256_hex};
use super::pack::{Object, PackIndex};
use super::tree::{self, Root};
use super::tree_io;
use super::{Captured, ProgressFn, SnapshotStore, par};
use crate::error::{WsError, WsResult};
use crate::model::now_ms;

/// Test hook: a per-file delay in captures, to crash the service mid-snapshot.
pub const DELAY_ENV: &str = "DOCKWARDEN_TEST_SNAPSHOT_DELAY_MS";

/// Snapshots in a directory on this machine.
pub struct LocalSnapshotStore {
    blobs: PathBuf,
    manifests: PathBuf,
    tmp: PathBuf,
    index: PathBuf,
    packs_dir: PathBuf,
    /// Every packed object; captures and restores read it, publishing and GC write it.
    packs: RwLock<PackIndex>,
    /// Captures and restores read; garbage collection writes.
    gc_lock: RwLock<()>,
    delay: Option<Duration>,
    /// New loose blobs are compressed: the store's filesystem cannot clone files, so a raw
    /// blob could only be copied anyway (probed when the store opens).
    compress_blobs: bool,
}

fn sync_dir(path: &Path) -> WsResult<()> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(|e| WsError::io(path, e))
}

fn syncfs(path: &Path) -> WsResult<()> {
    let f = File::open(path).map_err(|e| WsError::io(path, e))?;
    nix::unistd::syncfs(&f).map_err(|e| WsError::errno(path, e))
}

/// A capture's staging directory, removed on every way out of the capture (success,
/// error, or a panic unwinding through it).
struct Staging(PathBuf);

impl Staging {
    fn create(path: PathBuf) -> WsResult<Staging> {
        fs::create_dir(&path).map_err(|e| WsError::io(&path, e))?;
        Ok(Staging(path))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.0) {
            tracing::warn!(path = %self.0.display(), error = %e, "capture staging not removed");
        }
    }
}

impl LocalSnapshotStore {
    /// A store whose captures wait `delay` before each file (tests of a live tree).
    #[cfg(test)]
    pub(super) fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }

    /// A store that writes raw loose blobs whatever its filesystem (tests of old stores and
    /// of the copy fallback).
    #[cfg(test)]
    pub(super) fn with_raw_blobs(mut self) -> Self {
        self.compress_blobs = false;
        self
    }

    /// The tree hashes snapshot `id` names (version 3), read and checked.
    #[cfg(test)]
    pub(super) fn tree_hashes(&self, id: &str) -> Vec<Digest> {
        let body = fs::read(self.manifest_path(id)).unwrap_or_default();
        self.decode_manifest(&body)
            .map(|(_, t)| t)
            .unwrap_or_default()
    }

    /// True if some pack holds an object of `hash`.
    #[cfg(test)]
    pub(super) fn packed(&self, hash: &Digest) -> bool {
        self.packs().is_ok_and(|p| p.get(hash).is_some())
    }

    /// Where snapshot `id`'s record is.
    #[cfg(test)]
    pub(super) fn manifest_file(&self, id: &str) -> PathBuf {
        self.manifest_path(id)
    }

    /// True if new loose blobs are compressed (the filesystem cannot clone).
    #[cfg(test)]
    pub(super) fn compresses_blobs(&self) -> bool {
        self.compress_blobs
    }

    /// Opens the store under `root`, clearing leftovers of interrupted captures.
    pub fn open(root: &Path) -> WsResult<Self> {
        let store = LocalSnapshotStore {
            blobs: root.join("blobs"),
            manifests: root.join("manifests"),
            tmp: root.join("tmp"),
            index: root.join("index"),
            packs_dir: root.join("packs"),
            packs: RwLock::new(PackIndex::default()),
            gc_lock: RwLock::new(()),
            delay: std::env::var(DELAY_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
            compress_blobs: false,
        };
        if store.tmp.exists() {
            fs::remove_dir_all(&store.tmp).map_err(|e| WsError::io(&store.tmp, e))?;
        }
        for dir in [
            &store.blobs,
            &store.manifests,
            &store.tmp,
            &store.index,
            &store.packs_dir,
        ] {
            fs::create_dir_all(dir).map_err(|e| WsError::io(dir, e))?;
        }
        *store.packs_mut()? = PackIndex::load(&store.packs_dir)?;
        let reflink = blob::probe_reflink(&store.tmp).map_err(|e| WsError::io(&store.tmp, e))?;
        let store = LocalSnapshotStore {
            compress_blobs: !reflink,
            ..store
        };
        tracing::debug!(snapshot.reflink = reflink, "snapshot store opened");
        for shard in 0..=255u8 {
            let dir = store.blobs.join(format!("{shard:02x}"));
            fs::create_dir_all(&dir).map_err(|e| WsError::io(&dir, e))?;
        }
        // Blobs of every workspace live here: no workspace user may read them.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(|e| WsError::io(root, e))?;
        Ok(store)
    }

    fn read(&self) -> WsResult<RwLockReadGuard<'_, ()>> {
        self.gc_lock
            .read()
            .map_err(|_| WsError::Internal("snapshot lock poisoned".into()))
    }

    fn write(&self) -> WsResult<RwLockWriteGuard<'_, ()>> {
        self.gc_lock
            .write()
            .map_err(|_| WsError::Internal("snapshot lock poisoned".into()))
    }

    fn packs(&self) -> WsResult<RwLockReadGuard<'_, PackIndex>> {
        self.packs
            .read()
            .map_err(|_| WsError::Internal("pack index lock poisoned".into()))
    }

    fn packs_mut(&self) -> WsResult<RwLockWriteGuard<'_, PackIndex>> {
        self.packs
            .write()
            .map_err(|_| WsError::Internal("pack index lock poisoned".into()))
    }

    fn manifest_path(&self, id: &str) -> PathBuf {
        self.manifests.join(format!("{id}.json"))
    }

    /// Moves staged blobs and packs into place once they are durable; then the packs'
    /// objects can be found.
    fn publish(
        &self,
        id: &str,
        staging: &Path,
        staged: &[(PathBuf, Digest, Option<Kind>)],
        packs: Vec<(PathBuf, Vec<Object>)>,
    ) -> WsResult<()> {
        if staged.is_empty() && packs.is_empty() {
            return Ok(());
        }
        let kinds = self.compress_staged(staged)?;
        syncfs(staging)?;
        par::for_each(&kinds, 256, |(tmp, hash, kind)| {
            let src = blob::staged_path(tmp, *kind);
            let dest = blob::path(&self.blobs, &digest::hex(hash), *kind);
            fs::rename(&src, &dest).map_err(|e| WsError::io(&dest, e))
        })?;
        let mut placed = Vec::with_capacity(packs.len());
        for (i, (tmp, objects)) in packs.into_iter().enumerate() {
            placed.push((
                place_pack(&tmp, &self.packs_dir, &format!("{id}-{i}"))?,
                objects,
            ));
        }
        syncfs(&self.blobs)?;
        let mut index = self.packs_mut()?;
        for (name, objects) in placed {
            index.add(name, &objects);
        }
        Ok(())
    }

    /// Compresses staged raw blobs where the store keeps them compressed (before the
    /// `syncfs`, so a raw staging file that is replaced is usually never written back);
    /// returns each with the kind it is published as. Blobs the walk already compressed
    /// (files read into memory) keep their kind.
    fn compress_staged(
        &self,
        staged: &[(PathBuf, Digest, Option<Kind>)],
    ) -> WsResult<Vec<(PathBuf, Digest, Kind)>> {
        let out = std::sync::Mutex::new(Vec::with_capacity(staged.len()));
        let push = |item| {
            out.lock()
                .map_err(|_| WsError::Internal("blob compression lock poisoned".into()))
                .map(|mut v| v.push(item))
        };
        par::for_each(staged, 1, |(tmp, hash, kind)| {
            let kind = match kind {
                Some(kind) => *kind,
                None if !self.compress_blobs => Kind::Raw,
                None => {
                    let len = fs::metadata(tmp).map_err(|e| WsError::io(tmp, e))?.len();
                    blob::compress_staged(tmp, len).map_err(|e| WsError::io(tmp, e))?
                }
            };
            push((tmp.clone(), *hash, kind))
        })?;
        out.into_inner()
            .map_err(|_| WsError::Internal("blob compression lock poisoned".into()))
    }

    /// Writes a snapshot's record with temp + fsync + rename; returns its checksum.
    fn write_manifest(&self, id: &str, body: &[u8]) -> WsResult<String> {
        let tmp = self.tmp.join(format!("{id}.json"));
        let dest = self.manifest_path(id);
        let written = File::create(&tmp)
            .and_then(|mut f| f.write_all(body).and_then(|()| f.sync_all()))
            .map_err(|e| WsError::io(&tmp, e))
            .and_then(|()| fs::rename(&tmp, &dest).map_err(|e| WsError::io(&dest, e)));
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(&self.manifests)?;
        Ok(sha256_hex(body))
    }

    /// Decodes a manifest file of any version; version 3 roots are expanded from their
    /// trees (each checked). Also returns the tree hashes it names.
    fn decode_manifest(&self, body: &[u8]) -> Result<(Manifest, Vec<Digest>), String> {
        if body.starts_with(tree::ROOT_MAGIC) {
            let root = Root::decode(body).map_err(|_| "malformed root".to_string())?;
            let packs = self.packs().map_err(|e| e.to_string())?;
            return tree_io::load(&root, &self.packs_dir, &packs);
        }
        Manifest::decode(body).map(|m| (m, Vec::new()))
    }
}

impl LocalSnapshotStore {
    /// [`SnapshotStore::capture`] without the memory hand-back.
    fn capture_tree(
        &self,
        id: &str,
        root: &Path,
        previous: Option<&Manifest>,
        progress: ProgressFn<'_>,
    ) -> WsResult<Captured> {
        let _guard = self.read()?;
        let started_ns = index::now_ns();
        let guard = Staging::create(self.tmp.join(id))?;
        let staging = guard.path();
        let root_fd = open_root(root)?;
        let root_meta = fs::metadata(root).map_err(|e| WsError::io(root, e))?;
        let index_path = index::path_for(&self.index, root_meta.dev(), root_meta.ino());
        let index = index::load(&index_path);
        // A version 1 manifest names blobs by SHA-256: none of its hashes can be reused.
        let previous = previous.filter(|p| p.version >= BLAKE3_FROM);
        let packs = self.packs()?;
        let w = Walker {
            blobs: &self.blobs,
            packs: &packs,
            staging,
            index: index.as_ref(),
            // The previous manifest stands in only for a missing index.
            previous: previous
                .filter(|_| index.is_none())
                .map(Manifest::file_index)
                .unwrap_or_default(),
            previous_at_ns: previous
                .map(|p| i64::try_from(p.created_at_ms).unwrap_or(i64::MAX / 1_000_000) * 1_000_000)
                .unwrap_or(0),
            delay: self.delay,
            progress,
            compress_blobs: self.compress_blobs,
            loose: std::sync::OnceLock::new(),
        };
        let created_at_ms = now_ms();
        let walked = w.run(&root_fd);
        drop(w);
        let mut walked = walked?;
        // One object per directory; only the trees no pack holds yet are written (an
        // unchanged subtree is a reference to the tree stored before).
        let built = tree::build(&walked.entries)
            .map_err(|e| WsError::Internal(format!("capture made no tree: {e:?}")))?;
        let tree_packs = tree_io::stage(&built, &packs, staging)?;
        drop(packs);
        let index_files = index.as_ref().map(index::Index::file_count);
        drop(index);
        let mut new_packs = std::mem::take(&mut walked.packs);
        new_packs.extend(tree_packs);
        self.publish(id, staging, &walked.staged, new_packs)?;
        use std::os::unix::fs::PermissionsExt;
        let root = Root {
            id: id.to_string(),
            created_at_ms,
            root_mode: root_meta.permissions().mode() & 0o7777,
            entries: walked.entries.len() as u64,
            tree: built.root,
        };
        drop(built);
        let manifest_sha256 = self.write_manifest(id, &root.encode())?;
        // Only now are all the hashes it names durable blobs. An index that would be
        // rewritten as it is (every file trusted from it, none added or gone) stays; its
        // older recording time only makes it more careful.
        if !index::unchanged(index_files, walked.hashed, &walked.entries, &walked.stats)
            && let Err(e) =
                index::store_walked(&index_path, started_ns, &walked.entries, &walked.stats)
        {
            tracing::warn!(error = %e, "snapshot stat index not written");
        }
        progress(walked.counters);
        Ok(Captured {
            manifest_sha256,
            files: walked.counters.files,
            bytes: walked.counters.bytes,
            new_bytes: walked.new_bytes,
            hashed: walked.hashed,
            skipped: walked.skipped,
            vanished: walked.vanished,
            changed_while_read: walked.changed_while_read,
        })
    }
}

impl SnapshotStore for LocalSnapshotStore {
    fn capture(
        &self,
        id: &str,
        root: &Path,
        previous: Option<&Manifest>,
        progress: ProgressFn<'_>,
    ) -> WsResult<Captured> {
        let captured = self.capture_tree(id, root, previous, progress);
        // The walk's lists (a few hundred bytes a file) are freed by now; without this glibc
        // keeps their pages, and a long-lived service stays at its peak while idle.
        dockwarden_sys::memory::release_free_memory();
        captured
    }

    fn wants_previous(&self, root: &Path) -> bool {
        // A torn index is found only when loaded: then the capture re-hashes the tree
        // (correct, only slower), as it does without an index and a previous manifest.
        fs::metadata(root)
            .map(|m| !index::path_for(&self.index, m.dev(), m.ino()).exists())
            .unwrap_or(true)
    }

    fn load(&self, id: &str, sha256: &str) -> WsResult<Manifest> {
        let path = self.manifest_path(id);
        let body = fs::read(&path).map_err(|e| WsError::CorruptSnapshot {
            id: id.into(),
            detail: format!("manifest unreadable: {e}"),
        })?;
        if sha256_hex(&body) != sha256 {
            return Err(WsError::CorruptSnapshot {
                id: id.into(),
                detail: "manifest fails its checksum".into(),
            });
        }
        self.decode_manifest(&body)
            .map(|(m, _)| m)
            .map_err(|e| WsError::CorruptSnapshot {
                id: id.into(),
                detail: format!("manifest undecodable: {e}"),
            })
    }

    fn restore(
        &self,
        m: &Manifest,
        dest: &Path,
        owner: Option<(u32, u32)>,
        progress: ProgressFn<'_>,
    ) -> WsResult<()> {
        let _guard = self.read()?;
        let packs = self.packs()?;
        let store = super::restore::Objects {
            blobs: &self.blobs,
            packs_dir: &self.packs_dir,
            packs: &packs,
        };
        let restored = super::restore::restore(m, &store, &self.index, dest, owner, progress);
        dockwarden_sys::memory::release_free_memory();
        restored
    }

    fn carry_index(&self, from: &Path, to: &Path, before_ns: i64, moved: bool) -> WsResult<bool> {
        super::image::carry_index(&self.index, from, to, before_ns, moved)
    }

    fn save_index(&self, root: &Path, file: &Path, before_ns: i64) -> WsResult<bool> {
        super::image::save_index(&self.index, root, file, before_ns)
    }

    fn adopt_clone(
        &self,
        m: &Manifest,
        root: &Path,
        owner: Option<(u32, u32)>,
        saved: Option<&Path>,
    ) -> WsResult<u64> {
        let _guard = self.read()?;
        super::image::adopt_clone(&self.index, m, root, owner, saved)
    }

    fn record_copy(&self, id: &str, m: Manifest) -> WsResult<Captured> {
        let _guard = self.read()?;
        let m = Manifest {
            id: id.to_string(),
            created_at_ms: now_ms(),
            ..m
        };
        // The copy's trees are the original's: building them finds every object stored
        // already, so nothing is staged unless one went missing.
        let built = tree::build(&m.entries)
            .map_err(|e| WsError::Internal(format!("the copy made no tree: {e:?}")))?;
        let guard = Staging::create(self.tmp.join(id))?;
        let packs = self.packs()?;
        let tree_packs = tree_io::stage(&built, &packs, guard.path())?;
        drop(packs);
        self.publish(id, guard.path(), &[], tree_packs)?;
        let root = Root {
            id: id.to_string(),
            created_at_ms: m.created_at_ms,
            root_mode: m.root_mode,
            entries: m.entries.len() as u64,
            tree: built.root,
        };
        let sha = self.write_manifest(id, &root.encode())?;
        Ok(super::image::copied(sha, &m))
    }

    fn collect_garbage(&self, keep: &[String]) -> WsResult<u64> {
        let _guard = self.write()?;
        let keep: HashSet<&str> = keep.iter().map(String::as_str).collect();
        let mut live = HashSet::new();
        for ent in fs::read_dir(&self.manifests).map_err(|e| WsError::io(&self.manifests, e))? {
            let path = ent.map_err(|e| WsError::io(&self.manifests, e))?.path();
            let id = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            if !keep.contains(id.as_str()) {
                fs::remove_file(&path).map_err(|e| WsError::io(&path, e))?;
                continue;
            }
            let body = fs::read(&path).map_err(|e| WsError::io(&path, e))?;
            // An undecodable kept manifest (or one missing a tree) keeps every blob and
            // tree: never delete what may be needed.
            let Ok((m, trees)) = self.decode_manifest(&body) else {
                return Ok(0);
            };
            live.extend(trees);
            for e in m.entries {
                if let EntryKind::File { hash, .. } = e.kind {
                    live.insert(hash);
                }
            }
        }
        // An index naming a blob that goes would hand a later capture a dangling hash.
        for ent in fs::read_dir(&self.index).map_err(|e| WsError::io(&self.index, e))? {
            let path = ent.map_err(|e| WsError::io(&self.index, e))?.path();
            let stale = index::load(&path).is_none_or(|i| i.hashes().any(|h| !live.contains(h)));
            if stale {
                fs::remove_file(&path).map_err(|e| WsError::io(&path, e))?;
            }
        }
        let removed = sweep_blobs(&self.blobs, &live)?;
        let repacked = super::gc::sweep_packs(&self.packs_dir, &self.tmp, &live)?;
        *self.packs_mut()? = PackIndex::load(&self.packs_dir)?;
        Ok(removed + repacked)
    }
}

/// Renames a staged pack into `packs/` as `<stem>.pack`, or `<stem>.<n>.pack` if that name
/// is taken (a capture that reuses a snapshot id: the bench's driver can; the service's ids
/// are random). A pack in place is never replaced: other snapshots may use its objects.
fn place_pack(tmp: &Path, dir: &Path, stem: &str) -> WsResult<String> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    for n in 0..1000u32 {
        let name = match n {
            0 => format!("{stem}.pack"),
            n => format!("{stem}.{n}.pack"),
        };
        let dest = dir.join(&name);
        match renameat_with(CWD, tmp, CWD, &dest, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(name),
            Err(rustix::io::Errno::EXIST) => {}
            // A filesystem without RENAME_NOREPLACE: look first (ids are unique in practice).
            Err(rustix::io::Errno::INVAL) if !dest.exists() => {
                fs::rename(tmp, &dest).map_err(|e| WsError::io(&dest, e))?;
                return Ok(name);
            }
            Err(e) => return Err(WsError::io(&dest, e.into())),
        }
    }
    Err(WsError::Internal(format!("no free pack name for `{stem}`")))
}

fn sweep_blobs(blobs: &Path, live: &HashSet<Digest>) -> WsResult<u64> {
    let mut removed = 0;
    for shard in fs::read_dir(blobs).map_err(|e| WsError::io(blobs, e))? {
        let shard = shard.map_err(|e| WsError::io(blobs, e))?.path();
        for blob in fs::read_dir(&shard).map_err(|e| WsError::io(&shard, e))? {
            let blob = blob.map_err(|e| WsError::io(&shard, e))?.path();
            let name = blob
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            // A name that is no hash is no blob of a live manifest either.
            if !digest::parse(blob::hash_of_name(name)).is_some_and(|h| live.contains(&h)) {
                fs::remove_file(&blob).map_err(|e| WsError::io(&blob, e))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}
