//! One service per state directory: an exclusive `flock` on `<state>/service.lock`, held for
//! the service's lifetime, and a socket that answers is never replaced.
//!
//! A second `serve` on the same state directory would run start-up recovery against the
//! first one's in-flight operations (it would roll back an acknowledged create), so it
//! refuses to start instead.

use std::fs::{File, TryLockError};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::error::{WsError, WsResult};

/// The lock file inside the state directory.
pub const LOCK_FILE: &str = "service.lock";

/// Held while the service runs; the kernel drops the lock when the process ends, so a
/// crashed service never leaves a stale lock behind.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    pub path: PathBuf,
}

/// Takes the state directory's lock, or says which service holds it.
pub fn lock_state_dir(state_dir: &Path) -> WsResult<StateLock> {
    std::fs::create_dir_all(state_dir).map_err(|e| WsError::io(state_dir, e))?;
    let path = state_dir.join(LOCK_FILE);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| WsError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.trim();
            let who = if holder.is_empty() {
                String::new()
            } else {
                format!(" (pid {holder})")
            };
            return Err(WsError::Invalid(format!(
                "state directory `{}` is in use by another `dockwarden serve`{who}; stop it first or give another `--state-dir`",
                state_dir.display()
            )));
        }
        Err(TryLockError::Error(e)) => return Err(WsError::io(&path, e)),
    }
    // The pid is informational only: the lock, not the file's content, is the truth.
    let _ = file.set_len(0);
    let _ = writeln!(file, "{}", std::process::id());
    Ok(StateLock { _file: file, path })
}

/// Refuses to take over a socket path on which a service still answers.
pub fn refuse_live_socket(path: &Path) -> WsResult<()> {
    if UnixStream::connect(path).is_ok() {
        return Err(WsError::Invalid(format!(
            "socket `{}` is in use by a running service; stop it first or give another `--socket`",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_state_dir_is_refused_until_the_first_drops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock_state_dir(dir.path()).expect("first lock");
        let second = lock_state_dir(dir.path());
        let msg = second.expect_err("second lock must fail").to_string();
        assert!(
            msg.contains("in use by another `dockwarden serve`"),
            "{msg}"
        );
        assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        drop(first);
        assert!(lock_state_dir(dir.path()).is_ok());
    }
}
