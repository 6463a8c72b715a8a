//! Forks by whole-image clones (issue 16): with worktrees on their own XFS images
//! (`[disk] images = "on"`) and the state directory on a filesystem that can `FICLONE`, a
//! snapshot keeps a frozen clone of the worktree's image and a fork clones it: the images of
//! a fork of a fork share their blocks with their parents', the worktrees stay independent,
//! the fork's first incremental snapshot hashes no file, and a snapshot without an image
//! clone is still forked by a restore. Real XFS loop mounts, as root; cleaned up after.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use dockwarden::sys::mountinfo;
use serde_json::{Value, json};
use workspace_support::Svc;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Why these tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (loop mounts)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices (`/dev/loop-control` is missing)".into());
    }
    ["mkfs.xfs", "xfs_growfs", "losetup", "fsfreeze", "filefrag"]
        .iter()
        .find(|t| !have(t))
        .map(|t| format!("`{t}` is missing (scripts/setup.sh installs xfsprogs and e2fsprogs)"))
}

/// An XFS (`-m reflink=1`) in a loop-mounted sparse image, to hold the service's state;
/// unmounted on drop (after every worktree image in it, see [`Images`]).
struct Xfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Xfs {
    fn make(bytes: u64) -> Xfs {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&img).unwrap().set_len(bytes).unwrap();
        let mkfs = Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&img)
            .status()
            .unwrap();
        assert!(mkfs.success());
        let mount = Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(mount.success());
        Xfs { _dir: dir, mnt }
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.mnt).status();
        if !ok.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
        }
    }
}

/// Unmounts every worktree image and snapshot-capture mount of a service's state when the
/// test ends, even on failure (the harness SIGKILLs the service).
struct Images(PathBuf);

impl Drop for Images {
    fn drop(&mut self) {
        let mut mounts: Vec<PathBuf> = Vec::new();
        for e in std::fs::read_dir(self.0.join("workspaces"))
            .into_iter()
            .flatten()
            .flatten()
        {
            mounts.push(e.path().join("worktree"));
        }
        for e in std::fs::read_dir(self.0.join("disks/snapshots"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.file_name().to_string_lossy().starts_with(".mnt-") {
                mounts.push(e.path());
            }
        }
        for m in mounts {
            let quiet = || std::process::Stdio::null();
            let ok = Command::new("umount").arg(&m).stderr(quiet()).status();
            if !ok.is_ok_and(|s| s.success()) {
                let _ = Command::new("umount")
                    .arg("-l")
                    .arg(&m)
                    .stderr(quiet())
                    .status();
            }
        }
    }
}

fn start(parent: &Path, uid_base: u32) -> Svc {
    let toml = "[defaults]\ndisk = \"64MiB\"\n[disk]\nimages = \"on\"\n";
    let file = parent.join(format!("resources-{uid_base}.toml"));
    std::fs::write(&file, toml).unwrap();
    Svc::start_in(
        parent,
        uid_base,
        &["--resources", file.to_str().unwrap()],
        &[],
    )
}

/// Host blocks of a file (4 KiB units, as `filefrag -v` numbers them on XFS).
fn blocks(path: &Path) -> HashSet<u64> {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut set = HashSet::new();
    for l in text.lines() {
        // "   0:        0..    1023:      24576..     25599:   1024:             shared,last,eof"
        let cols: Vec<&str> = l.split(':').map(str::trim).collect();
        if cols.len() < 5 || cols[0].parse::<u64>().is_err() {
            continue;
        }
        let mut phys = cols[2].split("..").map(|s| s.trim().parse::<u64>());
        if let (Some(Ok(a)), Some(Ok(b))) = (phys.next(), phys.next()) {
            set.extend(a..=b);
        }
    }
    set
}

fn shared_mib(a: &Path, b: &Path) -> u64 {
    (blocks(a).intersection(&blocks(b)).count() as u64 * 4096) >> 20
}

fn hash(path: &Path) -> String {
    blake3::hash(&std::fs::read(path).unwrap())
        .to_hex()
        .to_string()
}

fn snapshot(svc: &Svc, id: &str) -> Value {
    svc.ok("POST", &format!("/v1/workspaces/{id}/snapshot"), None)
}

fn fork(svc: &Svc, id: &str, from: &str) -> Value {
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": id, "from": from })),
    )["workspace"]
        .clone()
}

fn is_mount(dir: &Path) -> bool {
    let (d, p) = (
        std::fs::metadata(dir).unwrap(),
        std::fs::metadata(dir.parent().unwrap()).unwrap(),
    );
    d.dev() != p.dev()
}

/// The whole tree under `root`: (path, kind + content hash or link target, owner uid).
fn tree(root: &Path) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let what = if md.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if md.is_dir() {
                stack.push(p.clone());
                format!("dir {:o}", md.mode() & 0o7777)
            } else {
                format!("file {:o} {}", md.mode() & 0o7777, hash(&p))
            };
            out.push((rel, what, md.uid()));
        }
    }
    out.sort();
    out
}

/// The label of an XFS image (the disk owner of a worktree image: `dw<uid>`).
fn label(image: &Path) -> String {
    let out = Command::new("blkid")
        .args(["-o", "value", "-s", "LABEL"])
        .arg(image)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The per-mount options of the mount on `dir` (`/proc/self/mountinfo`, field 6).
fn mount_options(dir: &Path) -> String {
    let mounts = mountinfo::own();
    mountinfo::at(&mounts, dir)
        .map(|m| m.options.clone())
        .unwrap_or_default()
}

/// The owners on disk of every entry of an (immutable) snapshot image clone, read through a
/// plain read-only mount of it: no idmapping.
fn raw_owners(image: &Path) -> HashSet<u32> {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-o", "loop,ro,norecovery,nouuid"])
        .arg(image)
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(ok.success(), "mount {}", image.display());
    let owners = tree(dir.path()).into_iter().map(|(_, _, u)| u).collect();
    assert!(
        Command::new("umount")
            .arg(dir.path())
            .status()
            .unwrap()
            .success()
    );
    owners
}

fn without_owner(t: &[(String, String, u32)]) -> Vec<(String, String)> {
    t.iter().map(|(p, w, _)| (p.clone(), w.clone())).collect()
}

#[test]
fn a_fork_of_a_fork_clones_whole_images_shares_their_blocks_and_stays_independent() {
    if let Some(why) = cannot_run() {
        println!("skipped: {why}");
        return;
    }
    let fs = Xfs::make(1 << 30);
    let mut svc = start(&fs.mnt, 29850);
    let _images = Images(svc.state.clone());
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "p" })));
    let made = svc.exec(
        "p",
        "head -c 6291456 /dev/urandom > big.bin && mkdir -p src/a lib && \
         for i in $(seq 1 300); do echo \"module $i\" > src/a/m$i.js; done && \
         ln -s src/a/m1.js first.js && printf '#!/bin/sh\\n' > lib/run.sh && chmod 750 lib/run.sh",
    );
    assert_eq!(made["exit_code"], 0, "{made}");
    // Past the stat index's racy margin (50 ms), so the second snapshot may trust every file.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let p_wt = svc.worktree("p");
    assert!(
        is_mount(&p_wt),
        "the parent's worktree is its own XFS image"
    );
    let original = hash(&p_wt.join("big.bin"));
    let p_tree = tree(&p_wt);

    let s1 = snapshot(&svc, "p");
    assert_eq!(s1["image_clone"], true, "{s1}");
    assert_eq!(s1["hashed"], 302, "a first snapshot reads every file: {s1}");
    let again = snapshot(&svc, "p");
    assert_eq!(
        again["hashed"], 0,
        "the index came back from the clone: {again}"
    );

    let f1 = fork(&svc, "f1", s1["id"].as_str().unwrap());
    let f1_uid = f1["uid"].as_u64().unwrap() as u32;
    let f1_wt = svc.worktree("f1");
    assert!(is_mount(&f1_wt), "the fork's worktree is its own image");
    let f1_tree = tree(&f1_wt);
    assert_eq!(
        without_owner(&f1_tree),
        without_owner(&p_tree),
        "same tree as the parent's"
    );
    assert!(
        f1_tree.iter().all(|(_, _, uid)| *uid == f1_uid),
        "every entry belongs to the fork's uid {f1_uid}"
    );
    assert_eq!(
        std::fs::metadata(&f1_wt).unwrap().uid(),
        f1_uid,
        "the root too"
    );
    // No inode of the clone was touched: the fork's image keeps the parent's uid on disk
    // (its label, copied with the blocks, says so) and is mounted with that uid mapped to
    // the fork's.
    let p_uid = svc.ok("GET", "/v1/workspaces/p", None)["uid"]
        .as_u64()
        .unwrap() as u32;
    let f1_img = svc.state.join("disks").join(format!("{f1_uid}.img"));
    assert_eq!(label(&f1_img), format!("dw{p_uid}"));
    let opts = mount_options(&f1_wt);
    assert!(opts.split(',').any(|o| o == "idmapped"), "{opts}");
    let snaps: Value = svc.ok("GET", "/v1/workspaces/f1/snapshots", None);
    let baseline = &snaps.as_array().unwrap()[0];
    assert_eq!(baseline["reason"], "baseline", "{snaps}");
    assert_eq!(
        baseline["hashed"], 0,
        "the baseline is the parent's manifest: {baseline}"
    );
    assert_eq!(baseline["files"], 302, "{baseline}");

    let s2 = snapshot(&svc, "f1");
    println!("the fork's first incremental snapshot: {s2}");
    assert_eq!(s2["hashed"], 0, "no file of the fork is read again: {s2}");
    assert_eq!(s2["new_bytes"], 0, "{s2}");
    assert_eq!(s2["image_clone"], true, "{s2}");
    let snap_images = svc.state.join("disks/snapshots");
    let s2_img = |id: &str| snap_images.join(format!("{id}.img"));
    assert_eq!(
        raw_owners(&s2_img(s2["id"].as_str().unwrap())),
        HashSet::from([p_uid]),
        "on the fork's disk every entry is still the parent's"
    );
    let f2 = fork(&svc, "f2", s2["id"].as_str().unwrap());
    let f2_wt = svc.worktree("f2");
    assert_eq!(without_owner(&tree(&f2_wt)), without_owner(&p_tree));

    // Blocks: the three worktree images share the big file's 6 MiB (and more) on the host.
    let img = |ws: &Value| {
        svc.state
            .join("disks")
            .join(format!("{}.img", ws["uid"].as_u64().unwrap()))
    };
    let p_img = img(&svc.ok("GET", "/v1/workspaces/p", None));
    let (f1_img, f2_img) = (img(&f1), img(&f2));
    for (a, b, what) in [
        (&p_img, &f1_img, "parent and fork"),
        (&f1_img, &f2_img, "fork and fork of the fork"),
        (&p_img, &f2_img, "parent and fork of the fork"),
    ] {
        let mib = shared_mib(a, b);
        println!("{what}: {mib} MiB of host blocks shared");
        assert!(
            mib >= 6,
            "{what} share at least the big file's blocks: {mib} MiB"
        );
    }

    // Independent worktrees: a write to the fork of the fork changes only it.
    let wrote = svc.exec(
        "f2",
        "printf CHANGED | dd of=big.bin bs=1 seek=4096 conv=notrunc 2>/dev/null && rm src/a/m7.js",
    );
    assert_eq!(wrote["exit_code"], 0, "{wrote}");
    let changed = hash(&f2_wt.join("big.bin"));
    assert_ne!(changed, original);
    assert_eq!(
        hash(&f1_wt.join("big.bin")),
        original,
        "the parent fork is unchanged"
    );
    assert_eq!(
        hash(&p_wt.join("big.bin")),
        original,
        "the parent is unchanged"
    );
    assert!(f1_wt.join("src/a/m7.js").exists());
    // The snapshot is unchanged too: a new fork of s2 has the original bytes.
    let f3 = fork(&svc, "f3", s2["id"].as_str().unwrap());
    assert_eq!(hash(&svc.worktree("f3").join("big.bin")), original);
    assert_eq!(f3["from_snapshot"], s2["id"]);

    // A later snapshot of the fork is correct: only the changed file is read, and a fork
    // from it without its image clone (removed here) restores the changed tree from the store.
    let s3 = snapshot(&svc, "f2");
    assert_eq!(s3["hashed"], 1, "only big.bin changed: {s3}");
    assert_eq!(s3["files"], 301, "{s3}");
    let s3_id = s3["id"].as_str().unwrap();
    let s3_img = svc
        .state
        .join("disks/snapshots")
        .join(format!("{s3_id}.img"));
    assert!(s3_img.exists());
    std::fs::remove_file(&s3_img).unwrap();
    fork(&svc, "f4", s3_id);
    let f4_tree = tree(&svc.worktree("f4"));
    assert_eq!(
        without_owner(&f4_tree),
        without_owner(&tree(&f2_wt)),
        "restored from the manifest"
    );
    let f4_snaps: Value = svc.ok("GET", "/v1/workspaces/f4/snapshots", None);
    assert_eq!(f4_snaps[0]["reason"], "baseline");
    assert_eq!(
        f4_snaps[0]["image_clone"], true,
        "the restored fork's baseline has a clone: {f4_snaps}"
    );

    // A forked workspace's image is an ordinary worktree image: kill (its snapshot is an
    // image clone too), the next command resumes it, and a restarted service keeps it.
    let killed = svc.ok("POST", "/v1/workspaces/f1/kill", None);
    assert_eq!(killed["workspace"]["status"], "stopped", "{killed}");
    assert_eq!(killed["snapshot"]["image_clone"], true, "{killed}");
    assert_eq!(killed["snapshot"]["hashed"], 0, "{killed}");
    let ran = svc.exec("f1", "cat src/a/m1.js && id -u");
    assert_eq!(ran["stdout"], format!("module 1\n{f1_uid}\n"), "{ran}");
    svc.restart(&[]);
    let ran = svc.exec("f1", "echo after > after.txt && cat src/a/m2.js");
    assert_eq!(ran["stdout"], "module 2\n", "{ran}");
    assert!(is_mount(&f1_wt), "still on its image after a restart");
    let s5 = snapshot(&svc, "f1");
    assert_eq!(
        (s5["hashed"].as_u64(), s5["files"].as_u64()),
        (Some(1), Some(303)),
        "{s5}"
    );
    // Written by the fork's uid through the mapping, stored as the disk owner's, read back
    // as the fork's: after a kill, a resume and a restart of the service.
    assert_eq!(
        std::fs::metadata(f1_wt.join("after.txt")).unwrap().uid(),
        f1_uid
    );
    let opts = mount_options(&f1_wt);
    assert!(opts.split(',').any(|o| o == "idmapped"), "{opts}");
    assert_eq!(
        raw_owners(&s2_img(s5["id"].as_str().unwrap())),
        HashSet::from([p_uid])
    );
    // The idmapped worktree grows online like any other (its loop device is found through
    // the mount).
    let grown = svc.ok(
        "POST",
        "/v1/workspaces/f1/resize",
        Some(json!({ "disk": "96MiB" })),
    );
    assert_eq!(grown["state"], "applied", "{grown}");
    let st = svc.ok("GET", "/v1/workspaces/f1/status", None);
    let size = st["disk"]["size_bytes"].as_u64().unwrap();
    assert!(size > 80 << 20, "grown to 96 MiB less the log: {st}");

    // Deleting workspaces deletes their snapshots' image clones.
    for id in ["f4", "f3", "f2"] {
        svc.ok("DELETE", &format!("/v1/workspaces/{id}"), None);
    }
    let mut live: Vec<String> = Vec::new();
    for id in ["p", "f1"] {
        let s: Value = svc.ok("GET", &format!("/v1/workspaces/{id}/snapshots"), None);
        live.extend(
            s.as_array()
                .unwrap()
                .iter()
                .flat_map(|s| ["img", "idx"].map(|x| format!("{}.{x}", s["id"].as_str().unwrap()))),
        );
    }
    let mut left: Vec<String> = std::fs::read_dir(svc.state.join("disks/snapshots"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    live.sort();
    assert_eq!(
        left, live,
        "exactly the live snapshots keep image clones, each with its saved stat index"
    );
    drop(svc);
}

#[test]
fn without_a_filesystem_that_clones_a_fork_on_images_is_a_restore() {
    if let Some(why) = cannot_run() {
        println!("skipped: {why}");
        return;
    }
    // The state directory on ext4 (the machine's temp dir): images, but no FICLONE.
    let parent = tempfile::tempdir().unwrap();
    let svc = start(parent.path(), 29900);
    let _images = Images(svc.state.clone());
    svc.ok("POST", "/v1/workspaces", Some(json!({ "id": "p" })));
    let made = svc.exec(
        "p",
        "mkdir d && echo one > d/one.txt && head -c 3000000 /dev/urandom > b.bin",
    );
    assert_eq!(made["exit_code"], 0, "{made}");
    let s1 = snapshot(&svc, "p");
    if s1["image_clone"] == true {
        println!("skipped: the temp dir's filesystem can clone files; nothing to fall back from");
        return;
    }
    let f = fork(&svc, "f", s1["id"].as_str().unwrap());
    let f_wt = svc.worktree("f");
    assert!(is_mount(&f_wt), "the restored fork is on its own image");
    let t = tree(&f_wt);
    assert_eq!(without_owner(&t), without_owner(&tree(&svc.worktree("p"))));
    let uid = f["uid"].as_u64().unwrap() as u32;
    assert!(t.iter().all(|(_, _, u)| *u == uid), "{t:?}");
    svc.ok("DELETE", "/v1/workspaces/f", None);
    svc.ok("DELETE", "/v1/workspaces/p", None);
    drop(svc);
}
