//! File operations: read, write, list, exists, info, mkdir, rename, copy, remove.
//!
//! Reads and copies open only regular files for reading (`resolve::open_regular`): FIFOs,
//! sockets and devices are refused with `invalid` before anything opens them.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, renameat, renameat2};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, fchown, fchownat};
use serde::{Deserialize, Serialize};

use super::resolve::{map_errno, open_beneath, open_regular, open_root, parent_of};
use super::tree;
use crate::error::{WsError, WsResult};
use crate::model::random_hex;

/// Reads and writes carry at most this much per file.
pub const MAX_IO_BYTES: u64 = 2 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// What `info` and `list` say about one path.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileInfo {
    pub name: String,
    pub path: String,
    pub kind: FileKind,
    pub size: u64,
    pub mode: u32,
    pub modified_ms: i64,
}

/// One worktree, opened for file operations.
pub struct Files {
    root: OwnedFd,
    owner: Option<(u32, u32)>,
}

pub(super) fn info_of(name: &str, path: &str, st: &FileStat) -> FileInfo {
    let kind = match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        k if k == SFlag::S_IFREG => FileKind::File,
        k if k == SFlag::S_IFDIR => FileKind::Dir,
        k if k == SFlag::S_IFLNK => FileKind::Symlink,
        _ => FileKind::Other,
    };
    FileInfo {
        name: name.to_string(),
        path: path.to_string(),
        kind,
        size: st.st_size as u64,
        mode: st.st_mode & 0o7777,
        modified_ms: st.st_mtime * 1000 + st.st_mtime_nsec / 1_000_000,
    }
}

/// Makes a directory's entries durable, so an acknowledged change survives a crash.
fn sync_dir(dir: &OwnedFd, shown: &str) -> WsResult<()> {
    nix::unistd::fsync(dir).map_err(|e| WsError::errno(shown, e))
}

fn last_name(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

impl Files {
    /// Opens `worktree`; new files and directories are given to `owner`.
    pub fn open(worktree: &Path, owner: Option<(u32, u32)>) -> WsResult<Files> {
        Ok(Files {
            root: open_root(worktree)?,
            owner,
        })
    }

    fn chown_fd(&self, fd: &OwnedFd, shown: &str) -> WsResult<()> {
        match self.owner {
            Some((u, g)) => fchown(fd, Some(Uid::from_raw(u)), Some(Gid::from_raw(g)))
                .map_err(|e| WsError::errno(shown, e)),
            None => Ok(()),
        }
    }

    pub fn read(&self, rel: &str) -> WsResult<Vec<u8>> {
        let (fd, st) = open_regular(&self.root, rel, "")?;
        let too_large = |size| WsError::TooLarge {
            path: rel.to_string(),
            size,
            limit: MAX_IO_BYTES,
        };
        if st.st_size as u64 > MAX_IO_BYTES {
            return Err(too_large(st.st_size as u64));
        }
        let mut data = Vec::new();
        File::from(fd)
            .take(MAX_IO_BYTES + 1)
            .read_to_end(&mut data)
            .map_err(|e| WsError::io(rel, e))?;
        if data.len() as u64 > MAX_IO_BYTES {
            return Err(too_large(data.len() as u64));
        }
        Ok(data)
    }

    /// Writes atomically: a temp file in the same directory, fsync, then rename over.
    pub fn write(&self, rel: &str, data: &[u8]) -> WsResult<()> {
        if data.len() as u64 > MAX_IO_BYTES {
            return Err(WsError::Invalid(format!(
                "write of {} bytes to `{rel}` exceeds the {MAX_IO_BYTES}-byte limit; write it from inside the workspace",
                data.len()
            )));
        }
        self.write_from(rel, &mut &data[..], 0o644)
    }

    fn write_from(&self, rel: &str, src: &mut dyn Read, mode: u32) -> WsResult<()> {
        if let Some((dir, _)) = rel.rsplit_once('/') {
            self.mkdir(dir, true)?;
        }
        let (parent, name) = parent_of(&self.root, rel)?;
        let tmp = format!(".{}.dw-{}", last_name(rel), random_hex(6));
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&parent, tmp.as_str(), flags, Mode::from_bits_truncate(mode))
            .map_err(|e| map_errno(rel, e))?;
        self.chown_fd(&fd, rel)?;
        let mut f = File::from(fd);
        let written = std::io::copy(src, &mut f)
            .and_then(|_| f.flush())
            .and_then(|()| f.sync_all());
        let renamed = written.map_err(|e| WsError::io(rel, e)).and_then(|()| {
            renameat(&parent, tmp.as_str(), &parent, name.as_c_str())
                .map_err(|e| map_errno(rel, e))?;
            sync_dir(&parent, rel)
        });
        if renamed.is_err() {
            let _ = nix::unistd::unlinkat(
                &parent,
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        renamed
    }

    fn stat(&self, rel: &str) -> WsResult<FileStat> {
        if rel.is_empty() {
            let fd = open_beneath(&self.root, "", OFlag::O_PATH, Mode::empty())?;
            return fstat(&fd).map_err(|e| WsError::errno(rel, e));
        }
        let (parent, name) = parent_of(&self.root, rel)?;
        fstatat(&parent, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| map_errno(rel, e))
    }

    pub fn info(&self, rel: &str) -> WsResult<FileInfo> {
        Ok(info_of(last_name(rel), rel, &self.stat(rel)?))
    }

    pub fn exists(&self, rel: &str) -> WsResult<bool> {
        match self.stat(rel) {
            Ok(_) => Ok(true),
            Err(WsError::NoSuchPath(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn list(&self, rel: &str) -> WsResult<Vec<FileInfo>> {
        let fd = open_beneath(
            &self.root,
            rel,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )?;
        tree::list(&fd, rel)
    }

    pub fn mkdir(&self, rel: &str, parents: bool) -> WsResult<()> {
        let mut done = String::new();
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            let parent = open_beneath(
                &self.root,
                &done,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )?;
            done = if done.is_empty() {
                (*part).to_string()
            } else {
                format!("{done}/{part}")
            };
            let last = i + 1 == parts.len();
            match mkdirat(&parent, *part, Mode::from_bits_truncate(0o755)) {
                Ok(()) => {
                    self.chown_at(&parent, part, &done)?;
                    sync_dir(&parent, &done)?;
                }
                Err(nix::errno::Errno::EEXIST) if parents || !last => {}
                Err(e) => return Err(map_errno(&done, e)),
            }
        }
        Ok(())
    }

    fn chown_at(&self, parent: &OwnedFd, name: &str, shown: &str) -> WsResult<()> {
        match self.owner {
            Some((u, g)) => fchownat(
                parent,
                name,
                Some(Uid::from_raw(u)),
                Some(Gid::from_raw(g)),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .map_err(|e| WsError::errno(shown, e)),
            None => Ok(()),
        }
    }

    pub fn rename(&self, from: &str, to: &str) -> WsResult<()> {
        let (pf, nf) = parent_of(&self.root, from)?;
        let (pt, nt) = parent_of(&self.root, to)?;
        // Never onto an existing path: a silent overwrite loses the destination.
        renameat2(
            &pf,
            nf.as_c_str(),
            &pt,
            nt.as_c_str(),
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| match e {
            // These are about the destination, so they name it.
            Errno::EEXIST => WsError::Exists(to.to_string()),
            Errno::ENOTEMPTY | Errno::EISDIR => map_errno(to, e),
            e => map_errno(from, e),
        })?;
        sync_dir(&pt, to)?;
        sync_dir(&pf, from)
    }

    /// Copies a regular file (atomically at the destination, keeping its mode).
    pub fn copy(&self, from: &str, to: &str) -> WsResult<()> {
        let (fd, st) = open_regular(&self.root, from, "; copy directories with exec `cp -r`")?;
        self.write_from(to, &mut File::from(fd), st.st_mode & 0o777)
    }

    pub fn remove(&self, rel: &str, recursive: bool) -> WsResult<()> {
        let (parent, name) = parent_of(&self.root, rel)?;
        tree::remove(&parent, &name, rel, recursive)?;
        sync_dir(&parent, rel)
    }
}
