//! Unit tests of reads and copies: only regular files are ever opened for reading.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::stat::{Mode, SFlag, makedev, mknod};

use super::Files;
use crate::error::WsError;

fn worktree() -> tempfile::TempDir {
    let t = tempfile::tempdir().expect("tempdir");
    std::fs::write(t.path().join("f.txt"), b"hello").expect("write");
    std::fs::create_dir(t.path().join("d")).expect("mkdir");
    std::os::unix::fs::symlink("f.txt", t.path().join("link")).expect("ln -s");
    nix::unistd::mkfifo(&t.path().join("p"), Mode::from_bits_truncate(0o644)).expect("mkfifo");
    let _ = std::os::unix::net::UnixListener::bind(t.path().join("sock")).expect("bind");
    t
}

/// Runs `f` on another thread and fails after 5 s instead of hanging the suite; on a timeout
/// the FIFO `unblock` is opened for writing, which releases a reader stuck in `open`.
fn within_5s<T: Send + 'static>(unblock: &Path, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(v) => v,
        Err(_) => {
            let _ = std::fs::OpenOptions::new().write(true).open(unblock);
            panic!("the call blocked for 5 s");
        }
    }
}

fn invalid(r: Result<impl std::fmt::Debug, WsError>) -> String {
    match r {
        Err(WsError::Invalid(m)) => m,
        other => panic!("expected `invalid`, got {other:?}"),
    }
}

#[test]
fn reading_a_fifo_answers_invalid_at_once_instead_of_blocking() {
    let t = worktree();
    let root = t.path().to_path_buf();
    let files = Files::open(&root, None).expect("open");
    let read = within_5s(&root.join("p"), move || files.read("p").map(|_| ()));
    assert_eq!(invalid(read), "`p` is a FIFO, not a regular file");
    let files = Files::open(&root, None).expect("open");
    let copy = within_5s(&root.join("p"), move || files.copy("p", "q"));
    assert_eq!(invalid(copy), "`p` is a FIFO, not a regular file");
    assert!(
        !root.join("q").exists(),
        "nothing is written for a refused copy"
    );
    // Directories are opened with O_DIRECTORY, which the kernel checks before opening.
    let files = Files::open(&root, None).expect("open");
    assert!(within_5s(&root.join("p"), move || files.list("p")).is_err());
}

/// A container's `mknod` in a bind leaves a device node in the worktree; the files API must
/// never open it. Needs root (mknod); skipped otherwise.
#[test]
fn reading_a_device_node_answers_invalid_without_opening_it() {
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let t = worktree();
    let dev = Mode::from_bits_truncate(0o666);
    mknod(&t.path().join("null"), SFlag::S_IFCHR, dev, makedev(1, 3)).expect("mknod c");
    mknod(&t.path().join("disk"), SFlag::S_IFBLK, dev, makedev(7, 0)).expect("mknod b");
    let files = Files::open(t.path(), None).expect("open");
    assert_eq!(
        invalid(files.read("null")),
        "`null` is a character device, not a regular file"
    );
    assert_eq!(
        invalid(files.read("disk")),
        "`disk` is a block device, not a regular file"
    );
    assert_eq!(
        invalid(files.copy("null", "n2")),
        "`null` is a character device, not a regular file"
    );
}

#[test]
fn regular_files_still_read_and_copy_and_other_types_are_named() {
    let t = worktree();
    let files = Files::open(t.path(), None).expect("open");
    assert_eq!(files.read("f.txt").expect("read"), b"hello");
    files.copy("f.txt", "g.txt").expect("copy");
    assert_eq!(files.read("g.txt").expect("read copy"), b"hello");
    assert_eq!(
        invalid(files.read("sock")),
        "`sock` is a socket, not a regular file"
    );
    assert_eq!(
        invalid(files.read("d")),
        "`d` is a directory, not a regular file"
    );
    assert!(
        invalid(files.copy("d", "e"))
            .ends_with("not a regular file; copy directories with exec `cp -r`")
    );
    assert!(
        matches!(files.read("link"), Err(WsError::Symlink { .. })),
        "a symlink is refused as a symlink"
    );
}
