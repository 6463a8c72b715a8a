//! Unit tests of the chown-back walk. They need root (files owned by uid 0, chown, mknod) and
//! pass without checking anything otherwise.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use super::*;

const WS: Owner = Owner {
    uid: 4242,
    gid: 4343,
    hand_back: None,
};

fn open_dir(p: &Path) -> OwnedFd {
    nix::fcntl::open(
        p,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .expect("open")
}

fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn mk(p: &Path, uid: u32, gid: u32, mode: u32) {
    std::fs::write(p, b"#!/bin/sh\n").expect("write");
    nix::unistd::chown(p, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))).expect("chown");
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `/dev/null`'s numbers: harmless to make in a temporary directory.
fn mknod_null(p: &Path) {
    let kind = nix::sys::stat::SFlag::S_IFCHR;
    nix::sys::stat::mknod(
        p,
        kind,
        Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .expect("mknod");
}

fn meta(p: &Path) -> std::fs::Metadata {
    std::fs::symlink_metadata(p).expect("meta")
}

#[test]
fn chowns_root_files_but_not_link_targets_outside_or_shared_inodes() {
    if !root() {
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
    let s = chown_tree(open_dir(&src), WS, 2, u64::MAX).expect("walk");
    assert!(s.complete);
    for p in [
        "", "a", "a/b", "a/b/c", "a/b/c/f", "out-link", "in1", "a/in2",
    ] {
        assert_eq!(meta(&src.join(p)).uid(), 4242, "{p}");
    }
    assert_eq!(
        meta(&root.join("sentinel")).uid(),
        0,
        "a symlink target outside is never changed"
    );
    assert_eq!(
        meta(&src.join("out-hard")).uid(),
        0,
        "an inode linked from outside is left alone"
    );
    assert_eq!(s.skipped_hardlinks, 1);
}

#[test]
fn setuid_and_setgid_files_that_would_run_as_someone_else_lose_the_bits() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    mk(&src.join("root-suid"), 0, 0, 0o4755);
    mk(&src.join("root-sgid"), 4242, 0, 0o2755);
    mk(&src.join("daemon-suid"), 1, 1, 0o4755);
    mk(&src.join("own-suid"), 4242, 4343, 0o4755);
    let s = chown_tree(open_dir(&src), WS, 100, u64::MAX).expect("walk");
    let m = |n: &str| meta(&src.join(n));
    assert_eq!(
        (m("root-suid").uid(), m("root-suid").mode() & 0o7777),
        (4242, 0o755)
    );
    assert_eq!(
        (m("root-sgid").gid(), m("root-sgid").mode() & 0o7777),
        (0, 0o755)
    );
    assert_eq!(
        (m("daemon-suid").uid(), m("daemon-suid").mode() & 0o7777),
        (1, 0o755)
    );
    assert_eq!(
        m("own-suid").mode() & 0o7777,
        0o4755,
        "the workspace user's own setuid file is theirs"
    );
    assert_eq!(s.cleared_setid, 3);
}

/// The container makes bash `4755 root` in the bind and hard-links it outside the bound
/// directory: the inode keeps its owner (links outside), but not its setuid bit.
#[test]
fn setuid_root_file_hard_linked_outside_the_bind_loses_its_setid_bits() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    mk(&src.join("bash"), 0, 0, 0o4755);
    mk(&src.join("sgid-docker"), 0, 999, 0o2755);
    std::fs::hard_link(src.join("bash"), t.path().join("outside")).expect("ln");
    std::fs::hard_link(src.join("sgid-docker"), t.path().join("outside-sgid")).expect("ln");
    let s = chown_tree(open_dir(&src), WS, 100, u64::MAX).expect("walk");
    let m = meta(&t.path().join("outside"));
    assert_eq!(
        (m.uid(), m.mode() & 0o7777),
        (0, 0o755),
        "owner kept, setuid gone"
    );
    let m = meta(&t.path().join("outside-sgid"));
    assert_eq!(
        (m.gid(), m.mode() & 0o7777),
        (999, 0o755),
        "group kept, setgid gone"
    );
    assert_eq!((s.cleared_setid, s.skipped_hardlinks, s.chowned), (2, 2, 1));
}

#[test]
fn device_nodes_made_in_the_bind_are_removed_and_fifos_and_sockets_handed_back() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("d")).expect("mkdir");
    mknod_null(&src.join("null"));
    mknod_null(&src.join("d/hwrng"));
    std::fs::hard_link(src.join("null"), t.path().join("outside-null")).expect("ln");
    nix::unistd::mkfifo(&src.join("fifo"), Mode::from_bits_truncate(0o644)).expect("mkfifo");
    let _sock = std::os::unix::net::UnixListener::bind(src.join("sock")).expect("bind");
    let s = chown_tree(open_dir(&src), WS, 100, u64::MAX).expect("walk");
    for gone in ["null", "d/hwrng"] {
        assert!(
            std::fs::symlink_metadata(src.join(gone)).is_err(),
            "device node `{gone}` is gone"
        );
    }
    assert!(
        meta(&t.path().join("outside-null"))
            .file_type()
            .is_char_device(),
        "a link outside is not touched"
    );
    assert_eq!(
        (meta(&src.join("fifo")).uid(), meta(&src.join("sock")).uid()),
        (4242, 4242)
    );
    assert_eq!((s.removed_devices, s.errors), (2, 0));
}

/// The name of a device node is swapped for a regular file between the walk's check and the
/// unlink: the re-check by name refuses, and the regular file stays.
#[test]
fn device_node_swapped_for_a_regular_file_before_the_unlink_is_not_removed() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    let dev = t.path().join("dev");
    mknod_null(&dev);
    let dir = open_dir(t.path());
    let seen =
        nix::sys::stat::fstatat(dir.as_fd(), "dev", AtFlags::AT_SYMLINK_NOFOLLOW).expect("stat");
    assert!(still_device(&dir, OsStr::new("dev"), &seen));
    std::fs::remove_file(&dev).expect("rm");
    std::fs::write(&dev, b"user data").expect("swap in a regular file");
    assert!(!still_device(&dir, OsStr::new("dev"), &seen));
    let mut w = Walker::new(open_dir(t.path()), WS).expect("walker");
    w.remove_device(&dir, OsStr::new("dev"), &seen);
    assert_eq!(std::fs::read(&dev).expect("still there"), b"user data");
    assert_eq!(w.summary.removed_devices, 0);
}

/// Under userns-remap, container uids 1..65535 are a subordinate host range: files written
/// as those are the container's, and handed back; other uids are not.
#[test]
fn files_owned_by_the_hand_back_range_are_chowned_and_others_are_not() {
    if !root() {
        return;
    }
    let t = tempfile::tempdir().expect("tempdir");
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    mk(&src.join("root"), 0, 0, 0o644);
    mk(&src.join("first"), 100_000, 100_000, 0o644);
    mk(&src.join("last"), 165_535, 100_000, 0o644);
    mk(&src.join("below"), 99_999, 0, 0o644);
    mk(&src.join("above"), 165_536, 0, 0o644);
    let owner = Owner {
        hand_back: IdRange::new(100_000, 65_536),
        ..WS
    };
    let s = chown_tree(open_dir(&src), owner, 100, u64::MAX).expect("walk");
    let uid = |n: &str| meta(&src.join(n)).uid();
    assert_eq!([uid("root"), uid("first"), uid("last")], [4242; 3]);
    assert_eq!([uid("below"), uid("above")], [99_999, 165_536]);
    assert_eq!(s.chowned, 4, "the source directory and three files");
}

#[test]
fn id_ranges_are_never_empty_and_never_reach_the_no_change_id() {
    assert!(IdRange::new(100_000, 0).is_none());
    assert!(IdRange::new(u32::MAX - 1, 2).is_none());
    let r = IdRange::new(u32::MAX - 1, 1).expect("range");
    assert!(r.contains(u32::MAX - 1) && !r.contains(u32::MAX));
    let owner = Owner {
        hand_back: IdRange::new(4000, 1000),
        ..WS
    };
    assert!(owner.hands_back(0) && owner.hands_back(4999) && !owner.hands_back(5000));
    assert!(
        !owner.hands_back(4242),
        "the workspace user's own files are never chowned"
    );
}
