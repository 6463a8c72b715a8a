//! Opening paths beneath a directory descriptor without following any symlink: the one copy
//! of `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` with its
//! retry on `EAGAIN` and its per-component fallback on kernels without `openat2`.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

/// How often a lookup that a concurrent rename raced (`EAGAIN`) is retried.
const EAGAIN_RETRIES: usize = 16;

/// Opens a directory by path as an `O_PATH` descriptor, refusing a symlink as the last
/// component.
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
pub fn path(base: impl AsFd, rel: &Path) -> nix::Result<OwnedFd> {
    open(base, rel, OFlag::O_PATH | OFlag::O_NOFOLLOW, Mode::empty())
}

/// Opens `rel` beneath `base` with `flags` (`O_CLOEXEC` is always added) and `mode` (for
/// `O_CREAT`). No component may be a symlink or a magic link and the walk can never leave
/// `base`: a symlink met on the way gives `ELOOP`, an escape `EXDEV`. Only with
/// `O_PATH | O_NOFOLLOW` is a symlink as the last component opened as itself. An empty
/// `rel` opens `base` itself.
pub fn open(base: impl AsFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let base = base.as_fd();
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC)
        .mode(mode)
        .resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
    // EAGAIN: a concurrent rename raced the lookup; the kernel asks us to retry.
    for _ in 0..EAGAIN_RETRIES {
        match nix::fcntl::openat2(base, rel, how) {
            Err(Errno::EAGAIN) => continue,
            Err(Errno::ENOSYS) => return walk(base, rel, flags, mode),
            other => return other,
        }
    }
    Err(Errno::EAGAIN)
}

/// The fallback for kernels without `openat2` (< 5.6): one `openat(O_PATH|O_NOFOLLOW)` per
/// component, each relative to the descriptor of the previous one, and the last one opened
/// with the caller's flags (plus `O_NOFOLLOW`). `..` and absolute paths are refused with
/// `EXDEV`.
fn walk(base: impl AsFd, rel: &Path, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let step = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let last_flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let names = rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(Errno::EXDEV),
        })
        .collect::<nix::Result<Vec<_>>>()?;
    let Some((last, parents)) = names.split_last() else {
        return nix::fcntl::openat(base.as_fd(), ".", last_flags, mode);
    };
    let mut cur = nix::fcntl::openat(base.as_fd(), ".", step | OFlag::O_DIRECTORY, Mode::empty())?;
    for name in parents {
        let next = nix::fcntl::openat(cur.as_fd(), *name, step, Mode::empty())?;
        let st = nix::sys::stat::fstat(next.as_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(Errno::ELOOP);
        }
        cur = next;
    }
    nix::fcntl::openat(cur.as_fd(), *last, last_flags, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A tree: `d/f` (a file), `d/link -> f`, `up -> ..`, `dirlink -> d`.
    fn tree() -> (tempfile::TempDir, OwnedFd) {
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(t.path().join("d")).expect("mkdir d");
        std::fs::write(t.path().join("d/f"), b"x").expect("write d/f");
        symlink("f", t.path().join("d/link")).expect("symlink");
        symlink("..", t.path().join("up")).expect("symlink");
        symlink("d", t.path().join("dirlink")).expect("symlink");
        let base = dir(t.path()).expect("open the base");
        (t, base)
    }

    fn is_link(fd: &OwnedFd) -> bool {
        nix::sys::stat::fstat(fd.as_fd()).expect("fstat").st_mode & libc::S_IFMT == libc::S_IFLNK
    }

    type Opener = fn(&OwnedFd, &str, OFlag) -> nix::Result<OwnedFd>;

    /// Both the `openat2` path and the per-component fallback, so the fallback is tested on
    /// kernels that have `openat2`.
    const OPENERS: [(&str, Opener); 2] = [
        ("openat2", |b, r, f| open(b, Path::new(r), f, Mode::empty())),
        ("walk", |b, r, f| walk(b, Path::new(r), f, Mode::empty())),
    ];

    const O_PATH_NOFOLLOW: OFlag = OFlag::O_PATH.union(OFlag::O_NOFOLLOW);

    #[test]
    fn opens_files_and_directories_beneath() {
        let (_t, base) = tree();
        for (name, open) in OPENERS {
            for rel in ["", ".", "d", "d/f", "./d/./f"] {
                assert!(open(&base, rel, O_PATH_NOFOLLOW).is_ok(), "{name}: {rel}");
            }
            assert!(open(&base, "d/f", OFlag::O_RDONLY).is_ok(), "{name}");
            assert_eq!(
                open(&base, "d/missing", O_PATH_NOFOLLOW).err(),
                Some(Errno::ENOENT),
                "{name}"
            );
        }
    }

    #[test]
    fn returns_a_trailing_symlink_as_itself_only_with_o_path_nofollow() {
        let (_t, base) = tree();
        for (name, open) in OPENERS {
            let fd = open(&base, "d/link", O_PATH_NOFOLLOW).expect("open the link");
            assert!(is_link(&fd), "{name}");
            assert_eq!(
                open(&base, "d/link", OFlag::O_RDONLY).err(),
                Some(Errno::ELOOP),
                "{name}"
            );
        }
    }

    #[test]
    fn refuses_a_symlink_on_the_way() {
        let (_t, base) = tree();
        for (name, open) in OPENERS {
            assert_eq!(
                open(&base, "dirlink/f", O_PATH_NOFOLLOW).err(),
                Some(Errno::ELOOP),
                "{name}"
            );
            assert_eq!(
                open(&base, "up/d", O_PATH_NOFOLLOW).err(),
                Some(Errno::ELOOP),
                "{name}"
            );
        }
    }

    #[test]
    fn refuses_to_leave_the_base() {
        let (_t, base) = tree();
        for (name, open) in OPENERS {
            for rel in ["..", "../etc", "/etc", "d/../.."] {
                assert_eq!(
                    open(&base, rel, O_PATH_NOFOLLOW).err(),
                    Some(Errno::EXDEV),
                    "{name}: {rel}"
                );
            }
        }
    }

    #[test]
    fn creates_with_the_mode_given() {
        use std::os::unix::fs::PermissionsExt;
        let (t, base) = tree();
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
        let mode = Mode::from_bits_truncate(0o600);
        assert!(open(&base, Path::new("d/a"), flags, mode).is_ok());
        assert!(walk(&base, Path::new("d/b"), flags, mode).is_ok());
        for rel in ["d/a", "d/b"] {
            let st = std::fs::metadata(t.path().join(rel)).expect("stat");
            assert_eq!(st.permissions().mode() & 0o777, 0o600, "{rel}");
        }
        assert_eq!(
            walk(&base, Path::new("d/link"), flags, mode).err(),
            Some(Errno::EEXIST)
        );
    }
}
