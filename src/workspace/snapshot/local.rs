//! A content-addressed snapshot store on the local filesystem.
//!
//! Layout: `blobs/<2 hex>/<sha256>` (file contents, shared by all snapshots and forks),
//! `manifests/<id>.json`, `tmp/` (staging; emptied on start).
//! A capture writes blobs to `tmp/`, syncs the filesystem, renames them into `blobs/`,
//! syncs again, then writes the manifest with temp + fsync + rename. A crash at any point
//! leaves at worst unreferenced files, which `collect_garbage` removes.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use super::capture::{Walker, blob_path, open_root};
use super::manifest::{EntryKind, Manifest, sha256_hex};
use super::{Captured, ProgressFn, SnapshotStore};
use crate::workspace::error::{WsError, WsResult};
use crate::workspace::model::now_ms;

/// Test hook: a per-file delay in captures, to crash the service mid-snapshot.
pub const DELAY_ENV: &str = "DOCKWARDEN_TEST_SNAPSHOT_DELAY_MS";

/// Snapshots in a directory on this machine.
pub struct LocalSnapshotStore {
    blobs: PathBuf,
    manifests: PathBuf,
    tmp: PathBuf,
    /// Captures and restores read; garbage collection writes.
    gc_lock: RwLock<()>,
    delay: Option<Duration>,
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

impl LocalSnapshotStore {
    /// Opens the store under `root`, clearing leftovers of interrupted captures.
    pub fn open(root: &Path) -> WsResult<Self> {
        let store = LocalSnapshotStore {
            blobs: root.join("blobs"),
            manifests: root.join("manifests"),
            tmp: root.join("tmp"),
            gc_lock: RwLock::new(()),
            delay: std::env::var(DELAY_ENV)
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis),
        };
        if store.tmp.exists() {
            fs::remove_dir_all(&store.tmp).map_err(|e| WsError::io(&store.tmp, e))?;
        }
        for dir in [&store.blobs, &store.manifests, &store.tmp] {
            fs::create_dir_all(dir).map_err(|e| WsError::io(dir, e))?;
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

    fn manifest_path(&self, id: &str) -> PathBuf {
        self.manifests.join(format!("{id}.json"))
    }

    /// Moves staged blobs into place once they are durable.
    fn publish(&self, staging: &Path, staged: &[(PathBuf, String)]) -> WsResult<()> {
        syncfs(staging)?;
        let mut dirs = HashSet::new();
        for (tmp, sha) in staged {
            let dest = blob_path(&self.blobs, sha);
            if let Some(dir) = dest.parent()
                && dirs.insert(dir.to_path_buf())
            {
                fs::create_dir_all(dir).map_err(|e| WsError::io(dir, e))?;
            }
            fs::rename(tmp, &dest).map_err(|e| WsError::io(&dest, e))?;
        }
        syncfs(&self.blobs)
    }

    /// Writes the manifest with temp + fsync + rename; returns its checksum.
    fn write_manifest(&self, m: &Manifest) -> WsResult<String> {
        let body = serde_json::to_vec(m)
            .map_err(|e| WsError::Internal(format!("encoding manifest: {e}")))?;
        let tmp = self.tmp.join(format!("{}.json", m.id));
        let mut f = File::create(&tmp).map_err(|e| WsError::io(&tmp, e))?;
        f.write_all(&body)
            .and_then(|()| f.sync_all())
            .map_err(|e| WsError::io(&tmp, e))?;
        let dest = self.manifest_path(&m.id);
        fs::rename(&tmp, &dest).map_err(|e| WsError::io(&dest, e))?;
        sync_dir(&self.manifests)?;
        Ok(sha256_hex(&body))
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
        let _guard = self.read()?;
        let staging = self.tmp.join(id);
        fs::create_dir(&staging).map_err(|e| WsError::io(&staging, e))?;
        let root_fd = open_root(root)?;
        let root_meta = fs::metadata(root).map_err(|e| WsError::io(root, e))?;
        let mut w = Walker {
            blobs: &self.blobs,
            staging: staging.clone(),
            previous: previous.map(Manifest::file_index).unwrap_or_default(),
            previous_at_ns: previous
                .map(|p| i64::try_from(p.created_at_ms).unwrap_or(i64::MAX / 1_000_000) * 1_000_000)
                .unwrap_or(0),
            delay: self.delay,
            progress,
            entries: Vec::new(),
            skipped: Vec::new(),
            staged: Vec::new(),
            staged_set: HashSet::new(),
            counters: Default::default(),
            new_bytes: 0,
        };
        let created_at_ms = now_ms();
        w.walk(&root_fd, "")?;
        self.publish(&staging, &w.staged)?;
        let _ = fs::remove_dir_all(&staging);
        use std::os::unix::fs::PermissionsExt;
        let m = Manifest {
            version: 1,
            id: id.to_string(),
            created_at_ms,
            root_mode: root_meta.permissions().mode() & 0o7777,
            entries: w.entries,
        };
        let manifest_sha256 = self.write_manifest(&m)?;
        progress(w.counters);
        Ok(Captured {
            manifest_sha256,
            files: w.counters.files,
            bytes: w.counters.bytes,
            new_bytes: w.new_bytes,
            skipped: w.skipped,
        })
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
        serde_json::from_slice(&body).map_err(|e| WsError::CorruptSnapshot {
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
        super::restore::restore(m, &self.blobs, dest, owner, progress)
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
            // An undecodable kept manifest keeps every blob: never delete what may be needed.
            let Ok(m) = serde_json::from_slice::<Manifest>(&body) else {
                return Ok(0);
            };
            for e in m.entries {
                if let EntryKind::File { sha256, .. } = e.kind {
                    live.insert(sha256);
                }
            }
        }
        sweep_blobs(&self.blobs, &live)
    }
}

fn sweep_blobs(blobs: &Path, live: &HashSet<String>) -> WsResult<u64> {
    let mut removed = 0;
    for shard in fs::read_dir(blobs).map_err(|e| WsError::io(blobs, e))? {
        let shard = shard.map_err(|e| WsError::io(blobs, e))?.path();
        for blob in fs::read_dir(&shard).map_err(|e| WsError::io(&shard, e))? {
            let blob = blob.map_err(|e| WsError::io(&shard, e))?.path();
            let name = blob
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            if !live.contains(name) {
                fs::remove_file(&blob).map_err(|e| WsError::io(&blob, e))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}
