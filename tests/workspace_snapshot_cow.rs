//! Copy-on-write forks (issue 16): on an XFS filesystem with reflink, a fork of a fork
//! shares the blocks of its large files with the snapshot store and with its parent fork,
//! and the worktrees still change independently.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use workspace_support::Svc;

/// A small XFS (`-m reflink=1`) in a loop-mounted image; unmounted and removed on drop.
struct Xfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Xfs {
    fn make() -> Result<Xfs, String> {
        if !nix::unistd::geteuid().is_root() {
            return Err("needs root (mount)".into());
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(600 << 20)
            .unwrap();
        let mkfs = Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&img)
            .status()
            .map_err(|e| format!("mkfs.xfs: {e} (apt-get install -y xfsprogs)"))?;
        if !mkfs.success() {
            return Err("mkfs.xfs failed".into());
        }
        let mount = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .status()
            .unwrap();
        if !mount.success() {
            return Err("mounting the XFS image failed (no loop devices?)".into());
        }
        Ok(Xfs { _dir: dir, mnt })
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// Physical extents of a file and whether each is flagged `shared`, from `filefrag -v`.
fn extents(path: &Path) -> Vec<(u64, bool)> {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .filter_map(|l| {
            // "   0:        0..    1023:      24576..     25599:   1024:             shared,last,eof"
            let cols: Vec<&str> = l.split(':').map(str::trim).collect();
            if cols.len() < 5 || cols[0].parse::<u64>().is_err() {
                return None;
            }
            let phys = cols[2].split("..").next()?.trim().parse().ok()?;
            Some((phys, l.contains("shared")))
        })
        .collect()
}

fn hash(path: &Path) -> String {
    blake3::hash(&std::fs::read(path).unwrap())
        .to_hex()
        .to_string()
}

#[test]
fn a_fork_of_a_fork_shares_blocks_on_a_cow_filesystem_and_worktrees_stay_independent() {
    let fs = match Xfs::make() {
        Ok(fs) => fs,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let svc = Svc::start_in(&fs.mnt, 29800, &[], &[]);
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "p" })));
    let made = svc.exec(
        "p",
        "head -c 6291456 /dev/urandom > big.bin && echo small > small.txt",
    );
    assert_eq!(made["exit_code"], 0, "{made}");
    let original = hash(&svc.worktree("p").join("big.bin"));
    let s1 = svc.ok("POST", "/v1/workspaces/p/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "f1", "from": s1 })),
    );
    let s2 = svc.ok("POST", "/v1/workspaces/f1/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "f2", "from": s2 })),
    );
    let (b1, b2) = (
        svc.worktree("f1").join("big.bin"),
        svc.worktree("f2").join("big.bin"),
    );
    let (e1, e2) = (extents(&b1), extents(&b2));
    assert!(!e1.is_empty() && !e2.is_empty(), "{e1:?} {e2:?}");
    assert!(
        e1.iter().chain(&e2).all(|(_, shared)| *shared),
        "every extent of both forks is shared: {e1:?} {e2:?}"
    );
    assert_eq!(
        e1, e2,
        "the fork of the fork uses the same physical blocks as its parent fork"
    );
    assert_eq!(hash(&b2), original);
    assert_eq!(
        std::fs::read_to_string(svc.worktree("f2").join("small.txt")).unwrap(),
        "small\n"
    );

    // Independent worktrees: a write to one fork changes only that fork.
    let wrote = svc.exec(
        "f2",
        "printf CHANGED | dd of=big.bin bs=1 seek=4096 conv=notrunc 2>/dev/null",
    );
    assert_eq!(wrote["exit_code"], 0, "{wrote}");
    assert_ne!(hash(&b2), original);
    assert_eq!(hash(&b1), original, "the parent fork is unchanged");
    assert_eq!(hash(&svc.worktree("p").join("big.bin")), original);
    // The store's blob is unchanged too: a new fork of s2 restores the original bytes.
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "f3", "from": s2 })),
    );
    assert_eq!(hash(&svc.worktree("f3").join("big.bin")), original);
    drop(svc);
}
