//! Opening paths beneath a directory descriptor without following any symlink.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

/// Opens a directory by absolute path (`O_PATH`), refusing a symlink as the last component.
pub fn dir(path: &Path) -> nix::Result<OwnedFd> {
    nix::fcntl::open(
        path,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `rel` beneath `base` as an `O_PATH` descriptor. No component may be a symlink (a
/// symlink as the last component is returned as itself, for the caller to refuse), and the
/// walk can never leave `base`.
pub fn beneath(base: BorrowedFd<'_>, rel: &Path) -> nix::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    // EAGAIN: a concurrent rename raced the lookup; the kernel asks us to retry.
    for _ in 0..16 {
        match nix::fcntl::openat2(base, rel, how) {
            Err(Errno::EAGAIN) => continue,
            Err(Errno::ENOSYS) => return walk(base, rel),
            other => return other,
        }
    }
    Err(Errno::EAGAIN)
}

/// The fallback for kernels without `openat2` (< 5.6): one `openat(O_PATH|O_NOFOLLOW)` per
/// component, each relative to the descriptor of the previous one.
fn walk(base: BorrowedFd<'_>, rel: &Path) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut cur = nix::fcntl::openat(base, ".", flags | OFlag::O_DIRECTORY, Mode::empty())?;
    let comps: Vec<_> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        match c {
            Component::CurDir => continue,
            Component::Normal(name) => {
                let next = nix::fcntl::openat(cur.as_fd(), *name, flags, Mode::empty())?;
                let st = nix::sys::stat::fstat(next.as_fd())?;
                let is_link = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
                if is_link && i + 1 < comps.len() {
                    return Err(Errno::ELOOP);
                }
                cur = next;
            }
            _ => return Err(Errno::EXDEV),
        }
    }
    Ok(cur)
}
