//! The secrets key file: 32 random bytes, owned by the service's uid, mode 0600, in a
//! directory nobody else can write, outside the state directory.
//!
//! INVARIANT: a key is read only from a file that passes every check here, and made only
//! with `O_EXCL` (never over an existing file) and fsynced with its directory before use.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use super::SecretsError;
use super::seal::{KEY_LEN, SealKey};

/// Where `serve` keeps the key unless `--secrets-key` names another file.
pub const DEFAULT_PATH: &str = "/etc/dockwarden/secrets.key";

fn bad(path: &Path, problem: String) -> SecretsError {
    SecretsError::BadFile {
        path: path.to_path_buf(),
        problem,
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SecretsError + '_ {
    move |source| SecretsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn dir_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Reads the key at `path`; `None` when no file is there.
pub fn read(path: &Path) -> Result<Option<SealKey>, SecretsError> {
    // O_NONBLOCK: a FIFO planted at the path must not hang start-up.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(bad(path, "is a symlink; name the key file itself".into()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    check_dir(path)?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.file_type().is_file() {
        return Err(bad(path, "is not a regular file".into()));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(bad(
            path,
            format!(
                "is open to group or others (mode {mode:04o}); run `chmod 600 {}`",
                path.display()
            ),
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(bad(
            path,
            format!(
                "is owned by uid {}, not by the service's uid {euid}",
                meta.uid()
            ),
        ));
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(bad(
            path,
            format!(
                "is {} bytes, not {KEY_LEN}: it is not a dockwarden secrets key",
                meta.len()
            ),
        ));
    }
    let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
    file.read_exact(&mut bytes[..]).map_err(io(path))?;
    Ok(SealKey::from_bytes(&bytes[..]))
}

/// The key's directory: owned by the service's uid or root, writable by nobody else (or
/// someone could swap the file).
fn check_dir(path: &Path) -> Result<(), SecretsError> {
    let dir = dir_of(path);
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(bad(
            path,
            format!(
                "is in `{}`, which group or others can write (mode {mode:04o}); run `chmod go-w {}`",
                dir.display(),
                dir.display()
            ),
        ));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid && meta.uid() != 0 {
        return Err(bad(
            path,
            format!(
                "is in `{}`, owned by uid {}, not by root or the service",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    Ok(())
}

/// Makes a new key at `path` (its directory `0700` if missing). Another process that made
/// the file first wins: its key is read instead.
pub fn create(path: &Path) -> Result<SealKey, SecretsError> {
    let dir = dir_of(path);
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
    }
    check_dir(path)?;
    let bytes = SealKey::generate()?;
    let opened = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return read(path)?.ok_or_else(|| bad(path, "vanished while it was made".into()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    let written = file.write_all(&bytes[..]).and_then(|()| file.sync_all());
    if let Err(e) = written {
        // A short key file would refuse every later start: leave none.
        let _ = std::fs::remove_file(path);
        return Err(io(path)(e));
    }
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    SealKey::from_bytes(&bytes[..])
        .ok_or_else(|| bad(path, "was made with the wrong length".into()))
}

/// Refuses a key inside the state directory: a copy or backup of the state would carry it.
pub fn check_outside(path: &Path, state_dir: &Path) -> Result<(), SecretsError> {
    let key = resolved(path).map_err(io(path))?;
    let state = resolved(state_dir).map_err(io(state_dir))?;
    if key.starts_with(&state) {
        return Err(SecretsError::InsideState {
            path: path.to_path_buf(),
            state: state_dir.to_path_buf(),
        });
    }
    Ok(())
}

/// `path` with its longest existing ancestor's symlinks resolved (the rest may not exist yet).
fn resolved(path: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(path)?;
    let mut rest = Vec::new();
    let mut cur = abs.as_path();
    loop {
        match cur.canonicalize() {
            Ok(mut real) => {
                real.extend(rest.iter().rev());
                return Ok(real);
            }
            Err(e) if e.kind() == ErrorKind::NotFound => match (cur.parent(), cur.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    cur = parent;
                }
                _ => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
#[path = "keyfile_tests.rs"]
mod tests;
