//! The file half of a uid sweep: one descriptor-relative walk of each root that removes what
//! the swept uids own.
//!
//! No symlink is followed: each entry is examined with `fstatat(AT_SYMLINK_NOFOLLOW)`, and a
//! directory is opened `O_NOFOLLOW | O_DIRECTORY` and checked on the open descriptor (same
//! device, same inode), so a name swapped mid-walk cannot redirect a removal. The walk never
//! enters another filesystem. An entry a swept uid owns is removed; a directory with all it
//! holds, whoever owns that (the uid decided what went in). Other owners' entries stay; their
//! directories are searched.

use std::collections::HashSet;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use super::Sweep;

/// Descriptors held per level of a walk, at most; deeper trees are walked holding one.
pub const MAX_DEPTH: usize = 128;
/// Bounds the passes over a swept directory whose tree is deeper than `MAX_DEPTH`.
const MAX_PASSES: usize = 10_000;

/// One walk over the roots for the uids `is_ours` picks.
pub(super) struct Walk<'a> {
    is_ours: &'a dyn Fn(u32) -> bool,
    /// (device, inode) of directories never entered (the service's own state directory).
    skip: HashSet<(u64, u64)>,
    /// The device of the root being walked.
    dev: u64,
    /// Names given to subtrees moved up out of a deep swept tree.
    moved: u64,
    /// Set when a pass over a swept tree moved a subtree up, so another pass is needed.
    again: bool,
    out: &'a mut Sweep,
}

fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

fn shown(at: &Path, name: &CStr) -> PathBuf {
    at.join(OsStr::from_bytes(name.to_bytes()))
}

impl<'a> Walk<'a> {
    pub(super) fn new(
        is_ours: &'a dyn Fn(u32) -> bool,
        skip: &[PathBuf],
        out: &'a mut Sweep,
    ) -> Self {
        let skip = skip
            .iter()
            .filter_map(|p| rustix::fs::stat(p).ok())
            .map(|st| (st.st_dev, st.st_ino))
            .collect();
        Walk {
            is_ours,
            skip,
            dev: 0,
            moved: 0,
            again: false,
            out,
        }
    }

    fn ours(&self, uid: u32) -> bool {
        // INVARIANT: nothing of root's is ever removed, whatever the caller picks.
        uid != 0 && (self.is_ours)(uid)
    }

    /// Walks one root (followed if it is a symlink: roots are the service's own choice). A
    /// root that does not exist holds nothing; one that cannot be read leaves every swept
    /// uid unknown.
    pub(super) fn root(&mut self, root: &Path) {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(root, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return,
            Err(e) => {
                return self
                    .out
                    .shared(format!("opening `{}`: {e}", root.display()));
            }
        };
        match rustix::fs::fstat(&fd) {
            Ok(st) => self.dev = st.st_dev,
            Err(e) => return self.out.shared(format!("`{}`: {e}", root.display())),
        }
        self.search(&fd, root, 0);
    }

    /// Searches a directory no swept uid owns for entries one does, holding a descriptor per
    /// level down to `MAX_DEPTH`; deeper trees are searched by `search_deep`.
    fn search(&mut self, dir: &OwnedFd, at: &Path, depth: usize) {
        let names = match list(dir) {
            Ok(n) => n,
            Err(e) if depth == 0 => {
                return self.out.shared(format!("listing `{}`: {e}", at.display()));
            }
            Err(e) => return self.unsearched(format!("listing `{}`: {e}", at.display())),
        };
        for name in names {
            let Some(st) = self.examine(dir, &name, at) else {
                continue;
            };
            if self.ours(st.st_uid) {
                self.remove(dir, &name, &st, at);
            } else if is_dir(&st)
                && let Some(child) = open_dir(dir, &name, &st)
            {
                let path = shown(at, &name);
                if depth + 1 >= MAX_DEPTH {
                    self.search_deep(child, &path);
                } else {
                    self.search(&child, &path, depth + 1);
                }
            }
        }
    }

    /// Stats one entry without following it; `None` for what the walk leaves alone: gone
    /// since the listing, the skipped directories, and mount points (another filesystem,
    /// never entered; one a swept uid owns is something of its that cannot be removed).
    fn examine(&mut self, dir: &OwnedFd, name: &CStr, at: &Path) -> Option<Stat> {
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if st.st_dev != self.dev {
            if self.ours(st.st_uid) {
                let what = format!(
                    "`{}` is a mount point; not removed",
                    shown(at, name).display()
                );
                self.out.error(st.st_uid, what);
            }
            return None;
        }
        (!self.skip.contains(&(st.st_dev, st.st_ino))).then_some(st)
    }

    /// Searches a tree below `MAX_DEPTH` (an other owner's, however deep) holding one
    /// descriptor: the walk climbs back through `..`, checked to be the directory it came
    /// down from. A tree moved under the walk is left unsearched from there (counted).
    fn search_deep(&mut self, top: OwnedFd, at: &Path) {
        struct Frame {
            id: (u64, u64),
            names: std::vec::IntoIter<CString>,
        }
        let deep = at.join("…");
        let frame = |fd: &OwnedFd| -> rustix::io::Result<Frame> {
            let st = rustix::fs::fstat(fd)?;
            Ok(Frame {
                id: (st.st_dev, st.st_ino),
                names: list(fd)?.into_iter(),
            })
        };
        let mut stack = match frame(&top) {
            Ok(f) => vec![f],
            Err(e) => return self.unsearched(format!("listing `{}`: {e}", at.display())),
        };
        let mut cur = top;
        while let Some(f) = stack.last_mut() {
            let Some(name) = f.names.next() else {
                stack.pop();
                let Some(parent) = stack.last() else { break };
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let up = rustix::fs::openat(&cur, c"..", flags, Mode::empty()).ok();
                let back = up.and_then(|fd| {
                    let st = rustix::fs::fstat(&fd).ok()?;
                    ((st.st_dev, st.st_ino) == parent.id).then_some(fd)
                });
                match back {
                    Some(fd) => cur = fd,
                    None => {
                        return self
                            .unsearched(format!("`{}` moved while it was searched", at.display()));
                    }
                }
                continue;
            };
            let Some(st) = self.examine(&cur, &name, &deep) else {
                continue;
            };
            if self.ours(st.st_uid) {
                self.remove(&cur, &name, &st, &deep);
            } else if is_dir(&st)
                && let Some(child) = open_dir(&cur, &name, &st)
            {
                match frame(&child) {
                    Ok(f) => {
                        stack.push(f);
                        cur = child;
                    }
                    Err(e) => {
                        self.unsearched(format!("listing `{}`: {e}", shown(&deep, &name).display()))
                    }
                }
            }
        }
    }

    fn unsearched(&mut self, what: String) {
        self.out.unsearched.push(what);
    }

    /// Removes an entry of a swept uid; a directory with everything in it.
    fn remove(&mut self, parent: &OwnedFd, name: &CStr, st: &Stat, at: &Path) {
        let uid = st.st_uid;
        let path = shown(at, name);
        if !is_dir(st) {
            match rustix::fs::unlinkat(parent, name, AtFlags::empty()) {
                Ok(()) => self.out.of(uid).files += 1,
                Err(Errno::NOENT) => {}
                Err(e) => self
                    .out
                    .error(uid, format!("removing `{}`: {e}", path.display())),
            }
            return;
        }
        let Some(top) = open_dir(parent, name, st) else {
            return self.out.error(
                uid,
                format!("`{}` changed while it was swept", path.display()),
            );
        };
        let mut passes = 0;
        loop {
            self.again = false;
            self.empty(&top, &top, &path, uid, 0);
            passes += 1;
            if !self.again || passes >= MAX_PASSES {
                break;
            }
        }
        drop(top);
        match rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
            Ok(()) => self.out.of(uid).dirs += 1,
            Err(e) => self
                .out
                .error(uid, format!("removing `{}`: {e}", path.display())),
        }
    }

    /// Removes everything in `dir`, a directory `uid` owned (or one inside it). A subtree
    /// deeper than `MAX_DEPTH` is moved up into `top` and emptied by the next pass, so the
    /// descriptors held stay bounded however deep the uid nested its directories.
    fn empty(&mut self, dir: &OwnedFd, top: &OwnedFd, at: &Path, uid: u32, depth: usize) {
        let names = match list(dir) {
            Ok(n) => n,
            Err(e) => {
                return self
                    .out
                    .error(uid, format!("listing `{}`: {e}", at.display()));
            }
        };
        for name in names {
            let Ok(st) = rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let path = shown(at, &name);
            if st.st_dev != self.dev {
                self.out.error(
                    uid,
                    format!("`{}` is a mount point; not removed", path.display()),
                );
                continue;
            }
            if !is_dir(&st) {
                match rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::empty()) {
                    Ok(()) => self.out.of(uid).files += 1,
                    Err(Errno::NOENT) => {}
                    Err(e) => self
                        .out
                        .error(uid, format!("removing `{}`: {e}", path.display())),
                }
                continue;
            }
            if depth + 1 >= MAX_DEPTH {
                self.move_up(dir, &name, top, uid, &path);
                continue;
            }
            let Some(child) = open_dir(dir, &name, &st) else {
                self.out.error(
                    uid,
                    format!("`{}` changed while it was swept", path.display()),
                );
                continue;
            };
            self.empty(&child, top, &path, uid, depth + 1);
            drop(child);
            match rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::REMOVEDIR) {
                Ok(()) => self.out.of(uid).dirs += 1,
                Err(e) => self
                    .out
                    .error(uid, format!("removing `{}`: {e}", path.display())),
            }
        }
    }

    /// Moves a deep subdirectory into `top` under a fresh name (never replacing anything).
    fn move_up(&mut self, dir: &OwnedFd, name: &CStr, top: &OwnedFd, uid: u32, path: &Path) {
        for _ in 0..100 {
            self.moved += 1;
            let Ok(fresh) = CString::new(format!(".dw-sweep-{}", self.moved)) else {
                break;
            };
            match rustix::fs::renameat_with(
                dir,
                name,
                top,
                fresh.as_c_str(),
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {
                    self.again = true;
                    return;
                }
                Err(Errno::EXIST) => continue,
                Err(e) => {
                    return self
                        .out
                        .error(uid, format!("moving `{}` up: {e}", path.display()));
                }
            }
        }
        self.out
            .error(uid, format!("moving `{}` up: no free name", path.display()));
    }
}

/// Opens the directory `name` of `parent` without following a symlink, only if it is still
/// the inode `st` describes.
fn open_dir(parent: &OwnedFd, name: &CStr, st: &Stat) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty()).ok()?;
    let now = rustix::fs::fstat(&fd).ok()?;
    (now.st_dev == st.st_dev && now.st_ino == st.st_ino).then_some(fd)
}

/// The names in a directory (without `.` and `..`), read whole before anything is removed.
fn list(dir: &OwnedFd) -> rustix::io::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir.as_fd())? {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    Ok(names)
}
