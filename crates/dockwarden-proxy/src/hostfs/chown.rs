//! Chown-back: hand files a container wrote into a bind source back to the workspace user,
//! without ever reaching outside that source.
//!
//! The walk is descriptor-relative from the pinned root. Every entry is opened with
//! `O_PATH | O_NOFOLLOW` (so a FIFO, socket or device is never opened for I/O), checked with
//! `fstat` and changed with `fchownat(fd, "", AT_EMPTY_PATH)`, so a symlink is changed itself
//! (never its target) and a name swapped mid-walk cannot redirect the change. It never
//! descends into another filesystem. What it does to each entry:
//! - the owners handed back are uid 0 and, when the daemon remaps user namespaces, the host
//!   uids of its subordinate range ([`Owner::hand_back`]); a hard-linked file is handed back
//!   only when every one of its links was seen inside the source;
//! - setuid and setgid bits of a regular file that would run as anyone but the workspace user
//!   are cleared whatever its link count (that only takes privilege away);
//! - device nodes are removed, by name, once the name is checked to still be that node.
//!
//! Work is done in bounded steps (see [`Walker::step`]).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid, UnlinkatFlags};

/// Directories deeper than this below the source are left alone (each level holds a descriptor).
pub const MAX_DEPTH: usize = 256;
/// Distinct hard-linked inodes tracked per walk; more are left alone.
const MAX_LINKED: usize = 100_000;
const SETID: libc::mode_t = libc::S_ISUID | libc::S_ISGID;

/// A range of host uids, `start..start + count`; never empty and never reaching `u32::MAX`
/// (the "no change" id of `chown`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "IdRangeFields")]
pub struct IdRange {
    start: u32,
    count: u32,
}

/// An [`IdRange`] as written, checked by [`IdRange::new`] when read.
#[derive(serde::Deserialize)]
struct IdRangeFields {
    start: u32,
    count: u32,
}

impl TryFrom<IdRangeFields> for IdRange {
    type Error = String;
    fn try_from(f: IdRangeFields) -> Result<Self, String> {
        IdRange::new(f.start, f.count).ok_or_else(|| {
            format!(
                "id range {}:{} is empty or reaches u32::MAX",
                f.start, f.count
            )
        })
    }
}

impl IdRange {
    pub fn new(start: u32, count: u32) -> Option<IdRange> {
        (count > 0 && u64::from(start) + u64::from(count) <= u64::from(u32::MAX))
            .then_some(IdRange { start, count })
    }

    pub fn contains(&self, id: u32) -> bool {
        id >= self.start && id - self.start < self.count
    }
}

/// Who gets container-written files back, and which host uids count as written by a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
    /// Host uids a container writes as besides 0: the daemon's userns-remap range, if any.
    pub hand_back: Option<IdRange>,
}

impl Owner {
    /// True for a uid whose files are handed to the workspace user (never the user's own:
    /// a chown would clear the setuid bits of the user's own files).
    pub fn hands_back(&self, uid: u32) -> bool {
        uid != self.uid && (uid == 0 || self.hand_back.is_some_and(|r| r.contains(uid)))
    }
}

/// What one walk did, for the summary log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub visited: u64,
    pub chowned: u64,
    pub skipped_other_fs: u64,
    /// Device nodes unlinked from the source.
    pub removed_devices: u64,
    pub skipped_hardlinks: u64,
    pub skipped_deep: u64,
    /// Regular files whose setuid/setgid bits were cleared.
    pub cleared_setid: u64,
    pub errors: u64,
    /// False when the walk stopped at its entry limit.
    pub complete: bool,
}

enum Pending {
    Root(OwnedFd),
    Child {
        parent: Arc<OwnedFd>,
        name: OsString,
        ino: u64,
        depth: usize,
    },
}

/// A resumable walk beneath one bind source.
pub struct Walker {
    dev: u64,
    owner: Owner,
    stack: Vec<Pending>,
    /// (dev, ino) of handed-back files with several links → links seen so far.
    linked: HashMap<(u64, u64), u64>,
    pub summary: Summary,
}

fn kind(st: &FileStat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

fn is_device(st: &FileStat) -> bool {
    matches!(kind(st), libc::S_IFCHR | libc::S_IFBLK)
}

/// True when `name` in `dir` still is the device node `seen` was taken from (not followed if
/// it is now a symlink), so unlinking the name removes that node and nothing else.
pub(super) fn still_device(dir: &OwnedFd, name: &OsStr, seen: &FileStat) -> bool {
    nix::sys::stat::fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| {
        is_device(&st)
            && (st.st_dev, st.st_ino, st.st_rdev) == (seen.st_dev, seen.st_ino, seen.st_rdev)
    })
}

impl Walker {
    /// Starts at `root`: a directory opened for reading, or any file as `O_PATH`.
    pub fn new(root: OwnedFd, owner: Owner) -> nix::Result<Self> {
        let st = nix::sys::stat::fstat(root.as_fd())?;
        let mut w = Walker {
            dev: st.st_dev,
            owner,
            stack: Vec::new(),
            linked: HashMap::new(),
            summary: Summary::default(),
        };
        if is_device(&st) {
            // A device as the source itself: there is no parent here to unlink it from.
            w.summary.visited += 1;
            w.summary.errors += 1;
            return Ok(w);
        }
        w.visit(&root, &st);
        if kind(&st) == libc::S_IFDIR {
            w.stack.push(Pending::Root(root));
        }
        Ok(w)
    }

    /// Processes directories until at least `budget` entries were visited in this call.
    /// Returns true when the walk is finished.
    pub fn step(&mut self, budget: u64) -> bool {
        let start = self.summary.visited;
        while self.summary.visited - start < budget {
            let Some(p) = self.stack.pop() else {
                self.summary.skipped_hardlinks += self.linked.len() as u64;
                self.linked.clear();
                self.summary.complete = true;
                return true;
            };
            let (dir, depth) = match p {
                Pending::Root(fd) => (fd, 0),
                Pending::Child {
                    parent,
                    name,
                    ino,
                    depth,
                } => match self.open_dir(&parent, &name, ino) {
                    Some(fd) => (fd, depth),
                    None => continue,
                },
            };
            self.read_dir(dir, depth);
        }
        false
    }

    /// Reopens a directory seen earlier, refusing it if the name now names something else.
    fn open_dir(&mut self, parent: &OwnedFd, name: &OsString, ino: u64) -> Option<OwnedFd> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(parent.as_fd(), name.as_os_str(), flags, Mode::empty()).ok()?;
        let st = nix::sys::stat::fstat(fd.as_fd()).ok()?;
        (st.st_dev == self.dev && st.st_ino == ino).then_some(fd)
    }

    fn read_dir(&mut self, dir: OwnedFd, depth: usize) {
        // The magic link reopens the very directory this descriptor refers to: no name lookup.
        let names: Vec<OsString> =
            match std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) {
                Ok(rd) => rd.filter_map(Result::ok).map(|e| e.file_name()).collect(),
                Err(_) => {
                    self.summary.errors += 1;
                    return;
                }
            };
        let dir = Arc::new(dir);
        for name in names {
            self.entry(&dir, name, depth);
        }
    }

    fn entry(&mut self, dir: &Arc<OwnedFd>, name: OsString, depth: usize) {
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let Ok(fd) = nix::fcntl::openat(dir.as_fd(), name.as_os_str(), flags, Mode::empty()) else {
            // Gone since the listing (or swapped): nothing to do.
            return;
        };
        let Ok(st) = nix::sys::stat::fstat(fd.as_fd()) else {
            self.summary.errors += 1;
            return;
        };
        if st.st_dev != self.dev {
            self.summary.visited += 1;
            self.summary.skipped_other_fs += 1;
            return;
        }
        if is_device(&st) {
            self.summary.visited += 1;
            self.remove_device(dir, &name, &st);
            return;
        }
        self.visit(&fd, &st);
        if kind(&st) == libc::S_IFDIR {
            if depth + 1 > MAX_DEPTH {
                self.summary.skipped_deep += 1;
            } else {
                self.stack.push(Pending::Child {
                    parent: dir.clone(),
                    name,
                    ino: st.st_ino,
                    depth: depth + 1,
                });
            }
        }
    }

    /// A device node in a bind is raw hardware for whoever can open it on the host, and no
    /// workspace needs one there: it goes. Only the name is removed (a link outside stays),
    /// and only while it still names the node that was checked.
    pub(super) fn remove_device(&mut self, dir: &OwnedFd, name: &OsStr, seen: &FileStat) {
        if !still_device(dir, name, seen) {
            // Swapped since the check: whatever is there now is another walk's business.
            return;
        }
        match nix::unistd::unlinkat(dir.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => self.summary.removed_devices += 1,
            Err(Errno::ENOENT) => {}
            Err(_) => self.summary.errors += 1,
        }
    }

    /// Counts one (non-device) entry, clears the setuid and setgid bits of a regular file
    /// that would run as anyone but the workspace user, and hands it back when a container
    /// wrote it and it is safe to change.
    fn visit(&mut self, fd: &OwnedFd, st: &FileStat) {
        self.summary.visited += 1;
        let k = kind(st);
        if k == libc::S_IFREG
            && st.st_mode & SETID != 0
            && (st.st_uid != self.owner.uid || st.st_gid != self.owner.gid)
        {
            // Whatever the link count: a bit cleared on a shared inode only takes privilege away.
            self.clear_setid(fd);
        }
        if !self.owner.hands_back(st.st_uid) {
            return;
        }
        // INVARIANT: an inode that may have a link outside the source never changes owner.
        if k != libc::S_IFDIR && st.st_nlink > 1 && !self.all_links_seen(st) {
            return;
        }
        self.chown(fd);
    }

    /// The fd is `O_PATH`, so the mode is changed through its magic link, which names this
    /// very inode (a regular file: no symlink is followed). The mode is read again on the fd.
    fn clear_setid(&mut self, fd: &OwnedFd) {
        let Ok(st) = nix::sys::stat::fstat(fd.as_fd()) else {
            self.summary.errors += 1;
            return;
        };
        let mode = st.st_mode & 0o7777;
        if mode & SETID == 0 {
            self.summary.cleared_setid += 1;
            return;
        }
        let new = std::os::unix::fs::PermissionsExt::from_mode(mode & !SETID);
        match std::fs::set_permissions(format!("/proc/self/fd/{}", fd.as_raw_fd()), new) {
            Ok(()) => self.summary.cleared_setid += 1,
            Err(_) => self.summary.errors += 1,
        }
    }

    /// A file with several links may share its inode with a name outside the source: change
    /// it only once as many links were seen inside as it has (checked again on the open fd).
    fn all_links_seen(&mut self, st: &FileStat) -> bool {
        let key = (st.st_dev, st.st_ino);
        if !self.linked.contains_key(&key) && self.linked.len() >= MAX_LINKED {
            self.summary.skipped_hardlinks += 1;
            return false;
        }
        let seen = self.linked.entry(key).or_insert(0);
        *seen += 1;
        if *seen < st.st_nlink {
            return false;
        }
        self.linked.remove(&key);
        true
    }

    fn chown(&mut self, fd: &OwnedFd) {
        let (uid, gid) = (Uid::from_raw(self.owner.uid), Gid::from_raw(self.owner.gid));
        match nix::unistd::fchownat(fd.as_fd(), "", Some(uid), Some(gid), AtFlags::AT_EMPTY_PATH) {
            Ok(()) => self.summary.chowned += 1,
            Err(_) => self.summary.errors += 1,
        }
    }
}

/// Runs a whole walk in steps of `step` entries, up to `limit` entries (blocking).
pub fn chown_tree(root: OwnedFd, owner: Owner, step: u64, limit: u64) -> nix::Result<Summary> {
    let mut w = Walker::new(root, owner)?;
    while !w.step(step) {
        if w.summary.visited >= limit {
            break;
        }
    }
    Ok(w.summary)
}

#[cfg(test)]
mod tests;
