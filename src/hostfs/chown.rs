//! Chown-back: hand files a root container wrote into a bind source back to the workspace
//! user, without ever reaching outside that source.
//!
//! The walk is descriptor-relative from the pinned root. Every entry is opened with
//! `O_PATH | O_NOFOLLOW`, checked with `fstat` and changed with `fchownat(fd, "",
//! AT_EMPTY_PATH)`, so a symlink is changed itself (never its target) and a name swapped
//! mid-walk cannot redirect the change. It never descends into another filesystem, never
//! changes device nodes, and changes a hard-linked file only when every one of its links was
//! seen inside the source. Work is done in bounded steps (see [`Walker::step`]).

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::{Gid, Uid};

/// Directories deeper than this below the source are left alone (each level holds a descriptor).
pub const MAX_DEPTH: usize = 256;
/// Distinct hard-linked inodes tracked per walk; more are left alone.
const MAX_LINKED: usize = 100_000;

/// What one walk did, for the summary log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub visited: u64,
    pub chowned: u64,
    pub skipped_other_fs: u64,
    pub skipped_devices: u64,
    pub skipped_hardlinks: u64,
    pub skipped_deep: u64,
    pub errors: u64,
    /// False when the walk stopped at its entry limit.
    pub complete: bool,
}

enum Pending {
    Root(OwnedFd),
    Child { parent: Arc<OwnedFd>, name: OsString, ino: u64, depth: usize },
}

/// A resumable walk beneath one bind source.
pub struct Walker {
    dev: u64,
    uid: Uid,
    gid: Gid,
    stack: Vec<Pending>,
    /// (dev, ino) of root-owned files with several links → links seen so far.
    linked: HashMap<(u64, u64), u64>,
    pub summary: Summary,
}

fn kind(st: &FileStat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

impl Walker {
    /// Starts at `root`: a directory opened for reading, or any file as `O_PATH`.
    pub fn new(root: OwnedFd, uid: u32, gid: u32) -> nix::Result<Self> {
        let st = nix::sys::stat::fstat(root.as_fd())?;
        let mut w = Walker { dev: st.st_dev, uid: Uid::from_raw(uid), gid: Gid::from_raw(gid), stack: Vec::new(), linked: HashMap::new(), summary: Summary::default() };
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
                Pending::Child { parent, name, ino, depth } => match self.open_dir(&parent, &name, ino) {
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
        let names: Vec<OsString> = match std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) {
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
        self.visit(&fd, &st);
        if kind(&st) == libc::S_IFDIR {
            if depth + 1 > MAX_DEPTH {
                self.summary.skipped_deep += 1;
            } else {
                self.stack.push(Pending::Child { parent: dir.clone(), name, ino: st.st_ino, depth: depth + 1 });
            }
        }
    }

    /// Counts one entry and changes its owner when it is root's and safe to change.
    fn visit(&mut self, fd: &OwnedFd, st: &FileStat) {
        self.summary.visited += 1;
        if st.st_uid != 0 {
            return;
        }
        let k = kind(st);
        if k == libc::S_IFCHR || k == libc::S_IFBLK {
            // A device node owned by the workspace user would be a door to raw devices.
            self.summary.skipped_devices += 1;
            return;
        }
        if k != libc::S_IFDIR && st.st_nlink > 1 && !self.all_links_seen(st) {
            return;
        }
        self.chown(fd);
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
        match nix::unistd::fchownat(fd.as_fd(), "", Some(self.uid), Some(self.gid), AtFlags::AT_EMPTY_PATH) {
            Ok(()) => self.summary.chowned += 1,
            Err(_) => self.summary.errors += 1,
        }
    }
}

/// Runs a whole walk in steps of `step` entries, up to `limit` entries (blocking).
pub fn chown_tree(root: OwnedFd, uid: u32, gid: u32, step: u64, limit: u64) -> nix::Result<Summary> {
    let mut w = Walker::new(root, uid, gid)?;
    while !w.step(step) {
        if w.summary.visited >= limit {
            break;
        }
    }
    Ok(w.summary)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    use super::*;

    fn open_dir(p: &Path) -> OwnedFd {
        nix::fcntl::open(p, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).expect("open")
    }

    /// Needs root (files owned by uid 0 and chown); skipped otherwise.
    #[test]
    fn chowns_root_files_but_not_link_targets_outside_or_shared_inodes() {
        if !nix::unistd::geteuid().is_root() {
            return;
        }
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path();
        let src = root.join("src");
        std::fs::create_dir_all(src.join("a/b/c")).expect("mkdir");
        std::fs::write(src.join("a/b/c/f"), b"x").expect("f");
        std::fs::write(root.join("sentinel"), b"s").expect("sentinel");
        std::os::unix::fs::symlink(root.join("sentinel"), src.join("out-link")).expect("ln -s");
        std::fs::hard_link(root.join("sentinel"), src.join("out-hard")).expect("ln");
        std::fs::write(src.join("in1"), b"i").expect("in1");
        std::fs::hard_link(src.join("in1"), src.join("a/in2")).expect("ln");
        let s = chown_tree(open_dir(&src), 4242, 4343, 2, u64::MAX).expect("walk");
        assert!(s.complete);
        let uid = |p: &Path| std::fs::symlink_metadata(p).expect("meta").uid();
        for p in ["", "a", "a/b", "a/b/c", "a/b/c/f", "out-link", "in1", "a/in2"] {
            assert_eq!(uid(&src.join(p)), 4242, "{p}");
        }
        assert_eq!(uid(&root.join("sentinel")), 0, "a symlink target outside is never changed");
        assert_eq!(uid(&src.join("out-hard")), 0, "an inode linked from outside is left alone");
        assert_eq!(s.skipped_hardlinks, 1);
    }
}
