//! Idmapped worktree mounts (issue 16): a fork's image is a block-level clone of its
//! parent's, so every inode on it still belongs to the uid that wrote it (the image's *disk
//! owner*). Rather than giving 150k inodes to the fork's uid one `fchownat` at a time, the
//! fork's worktree is mounted through an idmapping that swaps the two ids: what is on disk
//! as the disk owner appears as (and is written back by) the fork's uid, and the other way
//! round; every other id maps to itself, so root and container users read and write as
//! before.
//!
//! Mechanics (Linux ≥ 5.12, XFS): the image is mounted as usual on a staging directory,
//! that mount is cloned (`open_tree(OPEN_TREE_CLONE)`), the clone gets the idmapping of a
//! user namespace (`mount_setattr(MOUNT_ATTR_IDMAP)`) and is moved onto the worktree
//! (`move_mount`); the staging mount is detached. The user namespace only carries the
//! mapping: it is made by `unshare --user` in a short-lived child whose maps this (root)
//! process writes, and no process ever runs in it after the mount is made.
//!
//! The disk owner of an image is its XFS label, `dw<uid>`, written by `mkfs` and copied by
//! every block-level clone; the workspace cannot change it (it is in the superblock, behind
//! the loop device). An image without such a label (made before labels) is mounted plainly.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

use rustix::mount::{MoveMountFlags, OpenTreeFlags};

/// The highest id a map may name: `(uid_t)-1` is never mapped.
const ID_END: u64 = u32::MAX as u64;

/// The label of a worktree image whose content belongs to `uid` (XFS labels have 12 bytes).
pub fn label_for(uid: u32) -> String {
    format!("dw{uid}")
}

/// The disk owner in an XFS superblock's first sector: the uid of a `dw<uid>` label, `None`
/// when the block is not an XFS superblock or the label is not ours. Pure.
pub fn owner_from_superblock(sb: &[u8]) -> Option<u32> {
    // xfs_sb: magic "XFSB" at 0, sb_fname[12] at byte 108 (xfs_format.h).
    if sb.len() < 120 || &sb[..4] != b"XFSB" {
        return None;
    }
    let name = &sb[108..120];
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    let digits = std::str::from_utf8(name).ok()?.strip_prefix("dw")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The disk owner of the image at `image` (see [`owner_from_superblock`]).
pub fn disk_owner(image: &Path) -> Option<u32> {
    let mut sb = [0u8; 120];
    fs::File::open(image).ok()?.read_exact(&mut sb).ok()?;
    owner_from_superblock(&sb)
}

/// The lines of a `uid_map`/`gid_map` that swap `a` and `b` and map every other id of
/// `0..2^32-1` to itself. Pure. `a == b` is the identity.
pub fn swap_map(a: u32, b: u32) -> String {
    let (lo, hi) = (u64::from(a.min(b)), u64::from(a.max(b)));
    if lo == hi {
        return format!("0 0 {ID_END}\n");
    }
    let mut lines = Vec::new();
    let mut same = |from: u64, to: u64| {
        if to > from {
            lines.push(format!("{from} {from} {}", to - from));
        }
    };
    same(0, lo);
    same(lo + 1, hi);
    same(hi + 1, ID_END);
    lines.push(format!("{lo} {hi} 1"));
    lines.push(format!("{hi} {lo} 1"));
    lines.join("\n") + "\n"
}

/// A user namespace that holds `map` as its uid and gid map, as an fd (what
/// `MOUNT_ATTR_IDMAP` takes). Its one process is gone when this returns.
fn userns_with(map: &str) -> Result<OwnedFd, String> {
    let mut child = Command::new("unshare")
        .args([
            "--user",
            "--",
            "sh",
            "-c",
            "echo ready; exec cat >/dev/null",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("`unshare --user`: {e}"))?;
    let made = (|| {
        let mut line = String::new();
        let out = child.stdout.take().ok_or("no stdout")?;
        BufReader::new(out)
            .read_line(&mut line)
            .map_err(|e| format!("`unshare --user`: {e}"))?;
        if line.trim() != "ready" {
            return Err("`unshare --user` made no user namespace".to_string());
        }
        let proc = format!("/proc/{}", child.id());
        for file in ["uid_map", "gid_map"] {
            // One write: the kernel takes a map only whole, and only once.
            fs::OpenOptions::new()
                .write(true)
                .open(format!("{proc}/{file}"))
                .and_then(|mut f| f.write_all(map.as_bytes()))
                .map_err(|e| format!("{proc}/{file}: {e}"))?;
        }
        fs::File::open(format!("{proc}/ns/user"))
            .map(OwnedFd::from)
            .map_err(|e| format!("{proc}/ns/user: {e}"))
    })();
    drop(child.stdin.take());
    let _ = child.kill();
    let _ = child.wait();
    made
}

/// `struct mount_attr` of `<linux/mount.h>` (MOUNT_ATTR_SIZE_VER0).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// Gives the detached mount `mnt` the idmapping of `userns`.
#[expect(
    unsafe_code,
    reason = "mount_setattr(2) has no wrapper in nix, rustix or libc"
)]
fn set_idmap(mnt: &OwnedFd, userns: &OwnedFd) -> Result<(), String> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: the path is a NUL-terminated empty string, `attr` is a live, properly laid out
    // `struct mount_attr` whose size is passed with it, and both fds are open for the whole
    // call; the kernel only reads from the pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            mnt.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "mount_setattr(MOUNT_ATTR_IDMAP): {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Puts a clone of the mount at `staged` on `at`, with ids `a` and `b` swapped, and
/// detaches `staged` (the filesystem stays mounted through the clone).
pub fn move_swapped(staged: &Path, at: &Path, a: u32, b: u32) -> Result<(), String> {
    let userns = userns_with(&swap_map(a, b))?;
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        staged,
        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(|e| format!("open_tree {}: {e}", staged.display()))?;
    set_idmap(&tree, &userns)?;
    rustix::mount::move_mount(
        tree.as_fd(),
        c"",
        rustix::fs::CWD,
        at,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|e| format!("move_mount onto {}: {e}", at.display()))?;
    nix::mount::umount2(staged, nix::mount::MntFlags::MNT_DETACH)
        .map_err(|e| format!("umount {}: {e}", staged.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn superblock(label: &[u8]) -> Vec<u8> {
        let mut sb = vec![0u8; 512];
        sb[..4].copy_from_slice(b"XFSB");
        sb[108..108 + label.len()].copy_from_slice(label);
        sb
    }

    #[test]
    fn the_disk_owner_is_read_from_a_dw_label_only() {
        assert_eq!(owner_from_superblock(&superblock(b"dw47101")), Some(47101));
        assert_eq!(
            owner_from_superblock(&superblock(b"dw4294967294")),
            Some(4294967294)
        );
        assert_eq!(label_for(4294967294).len(), 12, "fits sb_fname");
        for bad in [
            &b""[..],
            b"dw",
            b"dwx1",
            b"dw12a",
            b"data",
            b"dw99999999999",
        ] {
            assert_eq!(owner_from_superblock(&superblock(bad)), None, "{bad:?}");
        }
        let mut ext4 = superblock(b"dw1000");
        ext4[..4].copy_from_slice(b"\0\0\0\0");
        assert_eq!(owner_from_superblock(&ext4), None, "not XFS");
        assert_eq!(owner_from_superblock(&ext4[..100]), None, "short");
    }

    /// Applies a map's lines to an id, as the kernel does (None: unmapped).
    fn apply(map: &str, id: u64) -> Option<u64> {
        map.lines().find_map(|l| {
            let v: Vec<u64> = l.split(' ').map(|n| n.parse().unwrap()).collect();
            (id >= v[0] && id < v[0] + v[2]).then(|| v[1] + (id - v[0]))
        })
    }

    #[test]
    fn a_swap_map_swaps_two_ids_and_keeps_every_other() {
        for (a, b) in [
            (47101, 47105),
            (47105, 47101),
            (0, 1000),
            (1, 2),
            (5, 4294967294),
        ] {
            let map = swap_map(a, b);
            assert!(map.lines().count() <= 5, "{map}");
            assert_eq!(apply(&map, a.into()), Some(b.into()), "{map}");
            assert_eq!(apply(&map, b.into()), Some(a.into()), "{map}");
            for other in [
                0u64, 1, 2, 3, 999, 1000, 1001, 47100, 47103, 65534, 4294967293,
            ] {
                if other != u64::from(a) && other != u64::from(b) {
                    assert_eq!(apply(&map, other), Some(other), "{other} in {map}");
                }
            }
            // The ranges cover 0..2^32-1 exactly once: no id is mapped twice.
            let total: u64 = map
                .lines()
                .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
                .sum();
            assert_eq!(total, ID_END, "{map}");
        }
        assert_eq!(swap_map(7, 7), format!("0 0 {ID_END}\n"));
    }
}
