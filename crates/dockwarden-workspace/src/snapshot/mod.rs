//! Snapshots: the `SnapshotStore` seam and a local content-addressed implementation.

mod blob;
mod capture;
mod clone;
mod codec;
mod digest;
mod gc;
mod image;
mod index;
mod listing;
mod local;
mod manifest;
mod pack;
mod par;
mod restore;
mod tree;
mod tree_io;

use std::path::Path;

pub use digest::Digest;
pub use local::LocalSnapshotStore;
pub use manifest::{Entry, EntryKind, Manifest};

use crate::error::{WsError, WsResult};

/// Progress of a long capture or restore, reported every few hundred files.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Progress {
    pub files: u64,
    pub bytes: u64,
    /// Files and bytes in all, when known (a restore knows them; a capture does not).
    #[serde(skip_serializing_if = "is_zero")]
    pub total_files: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub total_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A progress callback; it must be cheap.
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Sync);

/// Files between two progress reports of a capture or a restore.
const REPORT_EVERY_FILES: u64 = 500;

/// The files and bytes a capture or restore has done, shared by its workers: counts each
/// file and reports every [`REPORT_EVERY_FILES`] files.
pub(crate) struct Meter<'a> {
    progress: ProgressFn<'a>,
    files: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    /// Files and bytes in all, when known (a restore's; `(0, 0)` for a capture).
    total: (u64, u64),
}

impl<'a> Meter<'a> {
    pub(crate) fn new(progress: ProgressFn<'a>, total: (u64, u64)) -> Self {
        Meter {
            progress,
            files: Default::default(),
            bytes: Default::default(),
            total,
        }
    }

    /// Counts one file of `size` bytes.
    pub(crate) fn file(&self, size: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let files = self.files.fetch_add(1, Relaxed) + 1;
        let bytes = self.bytes.fetch_add(size, Relaxed) + size;
        if files.is_multiple_of(REPORT_EVERY_FILES) {
            (self.progress)(self.at(files, bytes));
        }
    }

    /// Reports where it stands now (the last report of a run).
    pub(crate) fn report(&self) {
        (self.progress)(self.now());
    }

    /// Where it stands now.
    pub(crate) fn now(&self) -> Progress {
        use std::sync::atomic::Ordering::Relaxed;
        self.at(self.files.load(Relaxed), self.bytes.load(Relaxed))
    }

    fn at(&self, files: u64, bytes: u64) -> Progress {
        Progress {
            files,
            bytes,
            total_files: self.total.0,
            total_bytes: self.total.1,
        }
    }
}

/// The outcome of a capture; nothing references it until the caller records it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub manifest_sha256: String,
    pub files: u64,
    pub bytes: u64,
    pub new_bytes: u64,
    /// Files read and hashed; the others were recognised by their stat data.
    pub hashed: u64,
    pub skipped: Vec<String>,
    /// Entries listed but gone when read (a live tree's temp files): left out.
    pub vanished: u64,
    /// Files that changed while read and were read again (see `capture`).
    pub changed_while_read: u64,
}

/// Where snapshots live. A later provider may keep them elsewhere (object storage, a
/// remote host); the lifecycle only needs these verbs.
///
/// INVARIANT: `capture` returns only after the manifest and all its blobs are durable.
pub trait SnapshotStore: Send + Sync {
    /// Captures the tree at `root` as snapshot `id`. `previous` lets unchanged files be
    /// recognised without reading them again.
    fn capture(
        &self,
        id: &str,
        root: &Path,
        previous: Option<&Manifest>,
        progress: ProgressFn<'_>,
    ) -> WsResult<Captured>;

    /// Whether a `capture` of `root` would use a `previous` manifest. False when the store
    /// already has a stat index of that tree (which is what recognises unchanged files),
    /// so a caller need not load one: at 150k files a load costs about a third of an
    /// unchanged capture.
    fn wants_previous(&self, root: &Path) -> bool {
        let _ = root;
        true
    }

    /// Loads a manifest and checks it against the checksum recorded with it.
    fn load(&self, id: &str, sha256: &str) -> WsResult<Manifest>;

    /// Materialises a manifest into `dest`, which must not exist, owned by `owner`.
    fn restore(
        &self,
        manifest: &Manifest,
        dest: &Path,
        owner: Option<(u32, u32)>,
        progress: ProgressFn<'_>,
    ) -> WsResult<()>;

    /// Drops every manifest not in `keep` and every blob none of them reference.
    fn collect_garbage(&self, keep: &[String]) -> WsResult<u64>;

    /// Copies the stat index of the tree at `from` to the tree at `to`, a whole-filesystem
    /// clone of it (the same inodes and timestamps, another device), recorded no later than
    /// `recorded_before_ns`; with `moved`, `from`'s index is removed. False when there was
    /// none (or the store keeps no index): the next capture of `to` reads every file.
    fn carry_index(
        &self,
        _from: &Path,
        _to: &Path,
        _recorded_before_ns: i64,
        _moved: bool,
    ) -> WsResult<bool> {
        Ok(false)
    }

    /// Saves the stat index of the tree at `root` (a snapshot's image clone) as `file`,
    /// recorded no later than `recorded_before_ns`, for [`Self::adopt_clone`] of the forks
    /// of that snapshot. False when there was none (or the store keeps no index).
    fn save_index(&self, _root: &Path, _file: &Path, _recorded_before_ns: i64) -> WsResult<bool> {
        Ok(false)
    }

    /// Makes `root`, a whole-filesystem clone of the tree `manifest` describes, a new
    /// workspace's: given to `owner` if some, its stat index written from the manifest's
    /// hashes, or, with no owner to give it to, copied from `saved` (what
    /// [`Self::save_index`] kept) when that agrees with the manifest; no content read.
    /// Fails if the clone disagrees with the manifest.
    fn adopt_clone(
        &self,
        _manifest: &Manifest,
        _root: &Path,
        _owner: Option<(u32, u32)>,
        _saved: Option<&Path>,
    ) -> WsResult<u64> {
        Err(WsError::Internal(
            "this snapshot store cannot adopt image clones".into(),
        ))
    }

    /// Records `manifest`'s entries as snapshot `id` (a fork's baseline: the tree it was
    /// made from, unchanged); durable before it returns, as a capture.
    fn record_copy(&self, _id: &str, _manifest: Manifest) -> WsResult<Captured> {
        Err(WsError::Internal(
            "this snapshot store cannot copy manifests".into(),
        ))
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_blobs;
#[cfg(test)]
mod tests_faults;
#[cfg(test)]
mod tests_image;
#[cfg(test)]
mod tests_packs;
#[cfg(test)]
mod tests_tree_store;
#[cfg(test)]
mod tests_trees;
