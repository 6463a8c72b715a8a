//! Host paths beneath the workspace: resolution that never follows a symlink, pins that keep
//! a checked bind source from being swapped, and chown-back of files a root container wrote.
//!
//! Resolution opens the path relative to a workspace directory descriptor with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, so a sibling such
//! as `<ws>-evil`, a `..` or a symlink in any component never resolves as "inside". The
//! descriptor it returns is what [`pins`] bind-mounts: the object checked is the object pinned.
//! See `docs/binds.md`.

pub mod chown;
mod mounts;
mod orphans;
pub mod pins;
mod plan;
mod state;
pub mod watch;

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use dockwarden_sys::beneath;
use nix::errno::Errno;
use nix::sys::stat::{FileStat, SFlag};

pub use dockwarden_policy::path_clean::clean;
pub use pins::PinStore;

use crate::policy::facts::HostPathFact;

/// Resolves `path` (absolute, as the daemon will `path.Clean` it) against `workspace`.
pub fn resolve(workspace: &Path, path: &str, sockets: &[String]) -> HostPathFact {
    match beneath::dir(workspace) {
        Ok(ws) => resolve_at(ws.as_fd(), workspace, path, sockets).0,
        Err(e) => HostPathFact::Unusable(format!("cannot open the workspace: {e}")),
    }
}

/// Resolves `path` beneath the already-open workspace `ws` (whose path is `workspace`) and,
/// when it is inside, returns the `O_PATH` descriptor of exactly the object that was checked.
pub fn resolve_at(
    ws: std::os::fd::BorrowedFd<'_>,
    workspace: &Path,
    path: &str,
    sockets: &[String],
) -> (HostPathFact, Option<(OwnedFd, FileStat)>) {
    let cleaned = clean(path);
    if sockets.iter().any(|s| clean(s) == cleaned) {
        return (HostPathFact::DockerSocket, None);
    }
    let Ok(rest) = Path::new(&cleaned).strip_prefix(workspace) else {
        return (HostPathFact::Outside, None);
    };
    let fd = match beneath::path(ws, rest) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => return (HostPathFact::ThroughSymlink, None),
        Err(Errno::ENOENT) => return (HostPathFact::Missing, None),
        Err(Errno::EXDEV) => return (HostPathFact::Outside, None),
        Err(e) => return (HostPathFact::Unusable(e.desc().to_lowercase()), None),
    };
    let st = match nix::sys::stat::fstat(fd.as_fd()) {
        Ok(st) => st,
        Err(e) => return (HostPathFact::Unusable(e.desc().to_lowercase()), None),
    };
    match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFLNK => (HostPathFact::ThroughSymlink, None),
        SFlag::S_IFDIR => (HostPathFact::Inside { is_dir: true }, Some((fd, st))),
        SFlag::S_IFREG => (HostPathFact::Inside { is_dir: false }, Some((fd, st))),
        SFlag::S_IFSOCK => (HostPathFact::Unusable("a socket".into()), None),
        _ => (HostPathFact::Unusable("a device node or fifo".into()), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_symlinks_and_escapes_are_not_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("data")).expect("mkdir");
        std::fs::create_dir_all(root.join("ws-evil")).expect("mkdir");
        std::fs::write(ws.join("file"), b"x").expect("file");
        std::os::unix::fs::symlink("/", ws.join("link")).expect("symlink");
        std::os::unix::fs::symlink("data", ws.join("rel-link")).expect("symlink");
        let w = |p: &Path| p.to_str().expect("utf8").to_owned();
        assert_eq!(
            resolve(&ws, &w(&ws.join("data")), &[]),
            HostPathFact::Inside { is_dir: true }
        );
        assert_eq!(
            resolve(&ws, &w(&ws.join("file")), &[]),
            HostPathFact::Inside { is_dir: false }
        );
        assert_eq!(
            resolve(&ws, &w(&ws), &[]),
            HostPathFact::Inside { is_dir: true }
        );
        assert_eq!(
            resolve(&ws, &w(&root.join("ws-evil")), &[]),
            HostPathFact::Outside
        );
        assert_eq!(
            resolve(&ws, &format!("{}/../ws-evil", w(&ws)), &[]),
            HostPathFact::Outside
        );
        assert_eq!(
            resolve(&ws, &w(&ws.join("link/etc")), &[]),
            HostPathFact::ThroughSymlink
        );
        assert_eq!(
            resolve(&ws, &w(&ws.join("link")), &[]),
            HostPathFact::ThroughSymlink
        );
        assert_eq!(
            resolve(&ws, &w(&ws.join("rel-link")), &[]),
            HostPathFact::ThroughSymlink
        );
        assert_eq!(
            resolve(&ws, &w(&ws.join("nope/x")), &[]),
            HostPathFact::Missing
        );
        assert_eq!(
            resolve(
                &ws,
                "/var/run/docker.sock",
                &["/var/run/docker.sock".into()]
            ),
            HostPathFact::DockerSocket
        );
    }
}
