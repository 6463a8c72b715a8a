//! The pin directory's `state.json` and its lock file.
//!
//! `state.json` records which daemon the pins were made for and each pin ↔ container, written
//! atomically (temp file, fsync, rename). `<pin dir>.lock`, beside the directory, is held with
//! `flock` for the proxy's lifetime: a second proxy cannot use the same directory, and a
//! directory whose lock is free belongs to a proxy that is gone (see `super::orphans`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::pins::{PinEntry, PinError};

pub const STATE: &str = "state.json";

#[derive(Serialize, Deserialize)]
struct State {
    /// The daemon socket the pins' containers live on.
    upstream: String,
    pins: Vec<PinEntry>,
}

/// `<dir>.lock`, beside the pin directory (which comes and goes).
pub fn lock_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    dir.with_file_name(name)
}

/// Takes the directory's lock, waiting a little (another proxy's clean-up holds it briefly).
pub fn lock(dir: &Path) -> Result<File, PinError> {
    let path = lock_path(dir);
    let err = |source| PinError::Dir {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(err)?;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(err)?;
    let t0 = Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if t0.elapsed() < Duration::from_secs(5) => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(err(std::io::Error::other(
                    "the pin directory is in use by another dockwarden proxy",
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(err(e)),
        }
    }
}

/// Loads `state.json` (missing: no pins). Returns the recorded upstream too.
pub fn load(dir: &Path) -> Result<(Option<String>, BTreeMap<String, PinEntry>), PinError> {
    let path = dir.join(STATE);
    let err = |source| PinError::State {
        path: path.display().to_string(),
        source,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, BTreeMap::new())),
        Err(e) => return Err(err(e)),
    };
    let st: State = serde_json::from_str(&text).map_err(|e| err(std::io::Error::other(e)))?;
    // A pin still pending in a previous run belongs to a request that process never finished:
    // mark it claimed by no container, so the next reconciliation releases it unless the
    // daemon shows a container using it.
    let pins = st
        .pins
        .into_iter()
        .map(|mut e| {
            e.container.get_or_insert_with(String::new);
            (e.pin.clone(), e)
        })
        .collect();
    Ok((Some(st.upstream), pins))
}

/// Writes `state.json` atomically; with no pins, removes it and the (then empty) directory.
pub fn save(dir: &Path, upstream: &str, m: &BTreeMap<String, PinEntry>) -> Result<(), PinError> {
    let path = dir.join(STATE);
    if m.is_empty() {
        let _ = std::fs::remove_file(&path);
        // Fails, and that is fine, while a pin target is being set up.
        let _ = std::fs::remove_dir(dir);
        return Ok(());
    }
    let err = |source| PinError::State {
        path: path.display().to_string(),
        source,
    };
    let tmp = path.with_extension("json.tmp");
    let st = State {
        upstream: upstream.to_owned(),
        pins: m.values().cloned().collect(),
    };
    let bytes = serde_json::to_vec_pretty(&st).map_err(|e| err(std::io::Error::other(e)))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(&bytes)
        .and_then(|()| f.sync_all())
        .map_err(err)?;
    std::fs::rename(&tmp, &path).map_err(err)
}
