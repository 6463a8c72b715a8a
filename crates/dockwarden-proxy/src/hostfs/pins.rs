//! Pins: each checked bind source is bind-mounted, by descriptor, onto a root-only path the
//! proxy owns, and the daemon is handed that path. The workspace user can rename, delete or
//! replace the original path afterwards; the pin still refers to the inode that was checked.
//!
//! Lifecycle of one pin: `pin` (during fact gathering, pending) → `claim` (after the daemon
//! created the container) or `release` (denied, unused, failed) → `release` once the
//! container is destroyed. `state.json` in the pin directory records pin ↔ container so a
//! restarted proxy knows its pins; the daemon's container list and `/proc/self/mountinfo`
//! stay the ground truth when reconciling (see `crate::hostfs::watch`).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use dockwarden_sys::beneath;
use nix::fcntl::OFlag;
use nix::mount::MntFlags;
use nix::sys::stat::Mode;
use serde::{Deserialize, Serialize};

use super::mounts::{create_target, ensure_dir, mount_pin, mounts_under, remove_target};
use crate::policy::facts::HostPathFact;

use super::state::{self, STATE};

/// One pin as recorded in `state.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinEntry {
    /// The pin's own path, which the daemon mounts.
    pub pin: String,
    /// The workspace path as it was checked (informational: it may have been swapped since).
    pub source: String,
    pub is_dir: bool,
    /// The container that uses it; `None` while the create request is in flight.
    pub container: Option<String>,
    /// Identity of the pinned inode: pins of the same source share it.
    pub dev: u64,
    pub ino: u64,
    /// When the pin was made (Unix seconds): a pin pending for longer than
    /// [`PENDING_MAX_SECS`] belongs to a request that never finished (client gone).
    #[serde(default)]
    pub created: u64,
}

/// A create holds its pins pending for milliseconds to seconds; after this long, a pending pin
/// is treated like a claimed one by reconciliation (released unless a container uses it).
pub const PENDING_MAX_SECS: u64 = 600;

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Why the pin store could not be set up or updated.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("pin directory `{path}`: {source}")]
    Dir {
        path: String,
        source: std::io::Error,
    },
    #[error("pin directory `{path}` must not contain `:` or `,`")]
    BadDir { path: String },
    #[error("workspace `{path}`: {source}")]
    Workspace { path: String, source: nix::Error },
    #[error("pin state `{path}`: {source}")]
    State {
        path: String,
        source: std::io::Error,
    },
    #[error("unmounting pin `{path}`: {source}")]
    Unmount { path: String, source: nix::Error },
}

/// The proxy's pins, in one root-only directory.
#[derive(Debug)]
pub struct PinStore {
    dir: PathBuf,
    /// The daemon socket, recorded in the state so orphan clean-up never judges pins of
    /// another daemon's containers.
    upstream: String,
    /// `flock` on `<dir>.lock`, held while this store lives.
    _lock: std::fs::File,
    workspace: PathBuf,
    ws: OwnedFd,
    entries: Mutex<BTreeMap<String, PinEntry>>,
    counter: AtomicU64,
}

impl PinStore {
    /// Opens the workspace, checks the pin directory (root's, mode 0700), loads the state and
    /// removes what a crash left behind. The directory exists only while it holds pins.
    pub fn open(dir: &Path, workspace: &Path, upstream: &str) -> Result<Self, PinError> {
        let d = dir.display().to_string();
        if d.contains([':', ',']) {
            return Err(PinError::BadDir { path: d });
        }
        let ws = beneath::dir(workspace).map_err(|source| PinError::Workspace {
            path: workspace.display().to_string(),
            source,
        })?;
        let lock = state::lock(dir)?;
        ensure_dir(dir)?;
        let (_, entries) = state::load(dir)?;
        let store = Self {
            dir: dir.to_path_buf(),
            upstream: upstream.to_owned(),
            _lock: lock,
            workspace: workspace.to_path_buf(),
            ws,
            entries: Mutex::new(entries),
            counter: AtomicU64::new(0),
        };
        store.sweep();
        store.update(|_| {});
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Pins held now (claimed and pending): what the cap `limits.max_pins` counts.
    pub fn held(&self) -> u64 {
        self.entries
            .lock()
            .map(|m| m.len() as u64)
            .unwrap_or(u64::MAX)
    }

    /// Resolves `path` beneath the workspace and, when it is inside, pins exactly the object
    /// that was checked. The pin is pending until [`claim`](Self::claim)ed or released.
    /// `Inside` with no pin means pinning failed; the policy refuses such a bind.
    pub fn pin(&self, path: &str, sockets: &[String]) -> (HostPathFact, Option<String>) {
        let (fact, opened) = super::resolve_at(self.ws.as_fd(), &self.workspace, path, sockets);
        let Some((fd, st)) = opened else {
            return (fact, None);
        };
        let is_dir = matches!(fact, HostPathFact::Inside { is_dir: true });
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let target = self.dir.join(format!("{nanos:x}-{n}"));
        // Under the lock: `update` removes the directory when it holds no pin.
        let made = self.with(|_| {
            ensure_dir(&self.dir)
                .map_err(std::io::Error::other)
                .and_then(|()| create_target(&target, is_dir))
        });
        if let Err(e) = made {
            tracing::warn!(host.path = path, pin = %target.display(), "creating a pin target failed: {e}");
            return (fact, None);
        }
        match mount_pin(&fd, &target) {
            Ok(()) => {}
            Err(e) => {
                tracing::warn!(host.path = path, pin = %target.display(), "pinning a bind source failed: {e}");
                remove_target(&target, is_dir);
                return (fact, None);
            }
        }
        let pin = target.display().to_string();
        let entry = PinEntry {
            pin: pin.clone(),
            source: super::clean(path),
            is_dir,
            container: None,
            dev: st.st_dev,
            ino: st.st_ino,
            created: now_secs(),
        };
        self.update(|m| {
            m.insert(pin.clone(), entry);
        });
        tracing::debug!(host.path = path, pin = %pin, "pinned bind source");
        (fact, Some(pin))
    }

    /// Records that `container` now uses `pins`.
    pub fn claim(&self, pins: &[String], container: &str) {
        self.update(|m| {
            for p in pins {
                if let Some(e) = m.get_mut(p) {
                    e.container = Some(container.to_owned());
                }
            }
        });
    }

    /// Unmounts and removes one pin and forgets it. Never follows into the pinned tree.
    pub fn release(&self, pin: &str) -> Result<(), PinError> {
        let entry = self.with(|m| m.get(pin).cloned());
        let path = Path::new(pin);
        if path.parent() != Some(self.dir.as_path()) {
            return Ok(());
        }
        match nix::mount::umount2(path, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW) {
            Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
            Err(source) => {
                return Err(PinError::Unmount {
                    path: pin.to_owned(),
                    source,
                });
            }
        }
        remove_target(
            path,
            entry.as_ref().map(|e| e.is_dir).unwrap_or(path.is_dir()),
        );
        self.update(|m| {
            m.remove(pin);
        });
        tracing::debug!(pin, "released pin");
        Ok(())
    }

    /// Releases every pin in `pins`, logging (never failing) on error.
    pub fn release_all(&self, pins: &[String]) {
        for p in pins {
            if let Err(e) = self.release(p) {
                tracing::warn!("{e}");
            }
        }
    }

    pub fn entries(&self) -> Vec<PinEntry> {
        self.with(|m| m.values().cloned().collect())
    }

    pub fn pins_of(&self, container: &str) -> Vec<PinEntry> {
        self.with(|m| {
            m.values()
                .filter(|e| e.container.as_deref() == Some(container))
                .cloned()
                .collect()
        })
    }

    /// Takes `referenced` (pin path → container id, from the daemon's container list) as the
    /// truth: entries it names are claimed by that container, and pins mounted in the
    /// directory but missing from the state are adopted.
    pub fn adopt(&self, referenced: &BTreeMap<String, String>) {
        let mounted = mounts_under(&self.dir);
        self.update(|m| {
            for (pin, id) in referenced {
                if let Some(e) = m.get_mut(pin) {
                    e.container = Some(id.clone());
                } else if let (true, Ok(st)) =
                    (mounted.contains(pin), nix::sys::stat::stat(Path::new(pin)))
                {
                    let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
                    let e = PinEntry {
                        pin: pin.clone(),
                        source: "(adopted)".into(),
                        is_dir,
                        container: Some(id.clone()),
                        dev: st.st_dev,
                        ino: st.st_ino,
                        created: now_secs(),
                    };
                    m.insert(pin.clone(), e);
                }
            }
        });
    }

    /// Entries reconciliation may release: claimed ones, and pending ones older than
    /// [`PENDING_MAX_SECS`] (a request whose client went away mid-create). Never a pending pin
    /// of a create in flight. Take this snapshot *before* listing the daemon's containers, so
    /// a pin claimed after the listing is not mistaken for an orphan.
    pub fn settled(&self) -> Vec<PinEntry> {
        let now = now_secs();
        self.with(|m| {
            m.values()
                .filter(|e| {
                    e.container.is_some() || now.saturating_sub(e.created) > PENDING_MAX_SECS
                })
                .cloned()
                .collect()
        })
    }

    /// Removes what a crash can leave behind: pins mounted but never recorded (the request
    /// they were made for was not forwarded yet), and empty pin targets. Only from `open`,
    /// before any request is served, so no pin can be between mount and record.
    fn sweep(&self) {
        let known = self.with(|m| m.keys().cloned().collect::<Vec<_>>());
        for p in mounts_under(&self.dir) {
            if known.contains(&p) {
                continue;
            }
            if let Err(e) = nix::mount::umount2(
                Path::new(&p),
                MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW,
            ) {
                tracing::warn!(pin = %p, "unmounting a stray pin: {e}");
            }
        }
        let mounted = mounts_under(&self.dir);
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for ent in rd.flatten() {
            let p = ent.path();
            let s = p.display().to_string();
            let is_state = ent.file_name().to_string_lossy().starts_with(STATE);
            if !is_state && !known.contains(&s) && !mounted.contains(&s) {
                remove_target(&p, ent.file_type().map(|t| t.is_dir()).unwrap_or(false));
            }
        }
    }

    /// Opens the pinned object for chown-back: a directory for reading, a file as `O_PATH`.
    /// The open goes through the pin, a root-only path, so it reaches the checked inode.
    pub fn open_root(&self, e: &PinEntry) -> nix::Result<OwnedFd> {
        let base = OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let flags = if e.is_dir {
            base | OFlag::O_RDONLY | OFlag::O_DIRECTORY
        } else {
            base | OFlag::O_PATH
        };
        let fd = nix::fcntl::open(Path::new(&e.pin), flags, Mode::empty())?;
        let st = nix::sys::stat::fstat(fd.as_fd())?;
        // INVARIANT: only the inode that was pinned is ever handed to chown-back.
        if (st.st_dev, st.st_ino) != (e.dev, e.ino) {
            return Err(nix::Error::ESTALE);
        }
        Ok(fd)
    }

    fn with<T>(&self, f: impl FnOnce(&BTreeMap<String, PinEntry>) -> T) -> T {
        let g = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&g)
    }

    /// Applies `f` and records the state (`state::save`; with no pin left, the directory goes).
    fn update(&self, f: impl FnOnce(&mut BTreeMap<String, PinEntry>)) {
        let mut g = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g);
        if let Err(e) = state::save(&self.dir, &self.upstream, &g) {
            tracing::warn!("{e}");
        }
    }

    /// At a clean shutdown: with no pin left, the lock file goes too (removed while held).
    /// Pins in use stay mounted for the next start.
    pub fn close(&self) {
        if self.with(BTreeMap::is_empty) {
            let _ = std::fs::remove_file(state::lock_path(&self.dir));
        }
    }

    /// Releases pins of proxies that are gone (`super::orphans`); `sources` is every mount
    /// source of every container of this daemon.
    pub fn collect_orphans(&self, sources: &std::collections::BTreeSet<String>) -> usize {
        super::orphans::collect(&self.dir, &self.upstream, sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs root (mount); skipped otherwise.
    #[test]
    fn pin_holds_the_checked_dir_after_a_swap_and_release_unmounts() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().canonicalize().expect("canonical");
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("data")).expect("mkdir");
        std::fs::write(ws.join("data/marker"), b"m").expect("marker");
        let store = PinStore::open(&root.join("pins"), &ws, "/var/run/docker.sock").expect("store");
        let (fact, pin) = store.pin(&ws.join("data").display().to_string(), &[]);
        assert_eq!(fact, HostPathFact::Inside { is_dir: true });
        let pin = pin.expect("pinned");
        std::fs::rename(ws.join("data"), ws.join("data.orig")).expect("mv");
        std::os::unix::fs::symlink("/", ws.join("data")).expect("ln");
        assert!(
            Path::new(&pin).join("marker").exists(),
            "the pin still shows the checked dir"
        );
        assert!(!Path::new(&pin).join("etc").exists());
        assert!(mounts_under(&root.join("pins")).contains(&pin));
        let (fact2, pin2) = store.pin(&ws.join("data").display().to_string(), &[]);
        assert_eq!((fact2, pin2), (HostPathFact::ThroughSymlink, None));
        store.release(&pin).expect("release");
        assert!(mounts_under(&root.join("pins")).is_empty());
        assert!(!Path::new(&pin).exists());
        assert!(store.entries().is_empty());
    }
}
