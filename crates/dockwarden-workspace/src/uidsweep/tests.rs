//! The sweep against temporary roots (as root: files are given to test uids with `lchown`,
//! tmpfs mounts stand in for other filesystems) and real SysV IPC objects.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::sysv::{self, Kind, Object};
use super::{Roots, SweepReport, sweep, sweep_uids};
use crate::model::{CreateRequest, ExecResult};
use crate::runtime::{BoxFut, Chunk, RunSpec, Runtime};
use crate::snapshot::LocalSnapshotStore;
use crate::store::Store;
use crate::{Config, Service};

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn roots(dirs: &[&Path]) -> Roots {
    Roots {
        dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
        skip: Vec::new(),
        sysv: false,
    }
}

fn give(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

fn file(path: &Path, uid: u32) -> PathBuf {
    std::fs::write(path, b"secret").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    give(path, uid);
    path.to_path_buf()
}

fn dir(path: &Path, uid: u32) -> PathBuf {
    std::fs::create_dir(path).unwrap();
    give(path, uid);
    path.to_path_buf()
}

fn gone(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_err()
}

/// A tmpfs mounted on `at` for the test's length.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Tmpfs {
        use nix::mount::{MsFlags, mount};
        mount(
            Some("tmpfs"),
            at,
            Some("tmpfs"),
            MsFlags::empty(),
            Some("size=1m"),
        )
        .unwrap();
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[tokio::test]
async fn files_of_the_uid_go_and_other_owners_entries_stay() {
    if !is_root() {
        return;
    }
    let (u, v) = (47101, 47102);
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let secret = file(&root.join("dw-secret"), u);
    let theirs = file(&root.join("theirs"), v);
    // A directory of another owner is searched; only the uid's entries in it go.
    let shared = dir(&root.join("shared"), v);
    let inner = file(&shared.join("left-by-u"), u);
    let kept = file(&shared.join("v-own"), v);
    // A directory of the uid goes whole, whoever owns what is in it.
    let owned = dir(&root.join("u-dir"), u);
    file(&owned.join("a"), v);
    let sub = dir(&owned.join("sub"), 0);
    file(&sub.join("b"), u);
    std::os::unix::net::UnixListener::bind(owned.join("sock")).unwrap();
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    give(&root.join("fifo"), u);

    let r = sweep(u, &roots(&[root])).await;
    assert!(r.is_clean(), "{r:?}");
    assert_eq!((r.files, r.dirs), (6, 2), "{r:?}");
    assert!(gone(&secret) && gone(&inner) && gone(&owned) && gone(&root.join("fifo")));
    assert!(!gone(&theirs) && !gone(&kept) && !gone(&shared));
    assert_eq!(std::fs::metadata(&theirs).unwrap().uid(), v);
}

#[tokio::test]
async fn a_symlink_of_the_uid_goes_itself_and_its_target_stays() {
    if !is_root() {
        return;
    }
    let u = 47111;
    let (t, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = t.path();
    // The targets are the uid's too, but outside the roots: never reached through a link.
    let target_dir = dir(&outside.path().join("d"), u);
    let target = file(&target_dir.join("f"), u);
    let link = root.join("link");
    std::os::unix::fs::symlink(&target_dir, &link).unwrap();
    give(&link, u);
    // Another owner's link to the uid's directory is not followed either.
    let foreign = root.join("foreign");
    std::os::unix::fs::symlink(&target_dir, &foreign).unwrap();

    let r = sweep(u, &roots(&[root])).await;
    assert!(r.is_clean(), "{r:?}");
    assert_eq!((r.files, r.dirs), (1, 0), "{r:?}");
    assert!(gone(&link));
    assert!(!gone(&foreign) && !gone(&target) && !gone(&target_dir));
}

#[tokio::test]
async fn the_walk_never_enters_another_filesystem() {
    if !is_root() {
        return;
    }
    let u = 47121;
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let mnt = dir(&root.join("mnt"), 0);
    let _fs = Tmpfs::mount(&mnt);
    let there = file(&mnt.join("on-tmpfs"), u);
    let here = file(&root.join("here"), u);

    let r = sweep(u, &roots(&[root])).await;
    assert!(r.is_clean(), "{r:?}");
    assert!(gone(&here));
    assert!(!gone(&there), "a file on another filesystem was removed");
}

#[tokio::test]
async fn a_mount_inside_a_directory_of_the_uid_leaves_it_unclean() {
    if !is_root() {
        return;
    }
    let u = 47131;
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let owned = dir(&root.join("u-dir"), u);
    let mnt = dir(&owned.join("mnt"), u);
    let fs = Tmpfs::mount(&mnt);
    file(&mnt.join("on-tmpfs"), u);

    let r = sweep(u, &roots(&[root])).await;
    assert!(
        !r.is_clean(),
        "a mount it could not remove was called clean: {r:?}"
    );
    assert!(!gone(&mnt.join("on-tmpfs")));
    drop(fs);
    let r = sweep(u, &roots(&[root])).await;
    assert!(r.is_clean() && gone(&owned), "{r:?}");
}

#[tokio::test]
async fn a_tree_deeper_than_the_descriptor_bound_goes_whole() {
    if !is_root() {
        return;
    }
    let u = 47141;
    let t = tempfile::tempdir().unwrap();
    let owned = dir(&t.path().join("deep"), u);
    let levels = super::walk::MAX_DEPTH * 2 + 7;
    let mut p = owned.clone();
    for _ in 0..levels {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    file(&p.join("bottom"), u);

    let r = sweep(u, &roots(&[t.path()])).await;
    assert!(r.is_clean(), "{r:?}");
    assert_eq!((r.files, r.dirs), (1, levels as u64 + 1), "{r:?}");
    assert!(gone(&owned));
}

#[tokio::test]
async fn files_of_the_uid_deep_in_another_owners_tree_are_found() {
    if !is_root() {
        return;
    }
    let (u, v) = (47145, 47146);
    let t = tempfile::tempdir().unwrap();
    let top = dir(&t.path().join("v-tree"), v);
    // A chain of the other owner's directories past the descriptor bound, with the uid's
    // files at the bottom, in a side branch deep down, and in a shallow branch searched
    // after the walk climbed back out.
    let mut p = top.clone();
    let mut planted = Vec::new();
    for level in 0..super::walk::MAX_DEPTH + 40 {
        p = dir(&p.join("d"), v);
        if level == super::walk::MAX_DEPTH + 10 {
            let side = dir(&p.join("side"), v);
            planted.push(file(&side.join("u-side"), u));
            file(&side.join("v-side"), v);
        }
    }
    planted.push(file(&p.join("u-bottom"), u));
    let kept = file(&p.join("v-bottom"), v);
    planted.push(file(&dir(&top.join("z-late"), v).join("u-late"), u));

    let out = sweep_uids(HashSet::from([u]), &roots(&[t.path()])).await;
    assert!(out.unsearched.is_empty(), "{:?}", out.unsearched);
    let r = out.report(u);
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.files, 3, "{r:?}");
    for f in &planted {
        assert!(gone(f), "{} survived", f.display());
    }
    assert!(!gone(&kept));
}

#[tokio::test]
async fn one_pass_sweeps_several_uids_and_never_roots_files() {
    if !is_root() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    let a = file(&root.join("a"), 47151);
    let b = file(&root.join("b"), 47152);
    let c = file(&root.join("c"), 47153);
    let r = file(&root.join("root"), 0);
    let out = sweep_uids(HashSet::from([47151, 47152, 0]), &roots(&[root])).await;
    assert!(gone(&a) && gone(&b));
    assert!(!gone(&c) && !gone(&r));
    assert_eq!(out.report(47151).files, 1);
    assert_eq!(out.report(47152).files, 1);
    assert_eq!(out.report(0), SweepReport::default());
}

#[test]
fn sysvipc_tables_are_read_by_their_header() {
    let shm = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n\
                        0         7  1600                  4096  1000  0       0 47161 47161     0     0          0          0 1700000000                     0                     0\n";
    assert_eq!(
        sysv::parse(Kind::Shm, shm),
        vec![Object {
            id: 7,
            uid: 47161,
            cuid: 0
        }]
    );
    let msg = "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n\
                        0         3   600           0          0     0     0     0     0 47161 47161          0          0 1700000000\n";
    assert_eq!(
        sysv::parse(Kind::Msg, msg),
        vec![Object {
            id: 3,
            uid: 0,
            cuid: 47161
        }]
    );
    assert!(sysv::parse(Kind::Sem, "").is_empty());
    assert!(sysv::parse(Kind::Sem, "garbage\n1 2 3\n").is_empty());
}

/// Makes a shm segment, a message queue and a semaphore set as `uid`; returns their ids.
fn make_ipc_as(uid: u32) -> Vec<(Kind, i32)> {
    use std::os::unix::process::CommandExt;
    let py = "import ctypes; libc = ctypes.CDLL(None); \
              print(libc.shmget(0, 4096, 0o1600)); print(libc.msgget(0, 0o1600)); print(libc.semget(0, 1, 0o1600))";
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", py])
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<i32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert!(ids.iter().all(|i| *i >= 0), "ipc creation failed: {ids:?}");
    [Kind::Shm, Kind::Msg, Kind::Sem]
        .into_iter()
        .zip(ids)
        .collect()
}

fn listed(kind: Kind, id: i32) -> bool {
    sysv::list(kind).unwrap().iter().any(|o| o.id == id)
}

#[tokio::test]
async fn sysv_objects_of_the_uid_are_removed_and_others_kept() {
    if !is_root() || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let (u, v) = (47171, 47172);
    let mine = make_ipc_as(u);
    let theirs = make_ipc_as(v);
    for (k, id) in mine.iter().chain(&theirs) {
        assert!(listed(*k, *id), "{k:?} {id} not listed after creation");
    }
    let only_ipc = Roots {
        dirs: Vec::new(),
        skip: Vec::new(),
        sysv: true,
    };
    let r = sweep(u, &only_ipc).await;
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.ipc, 3, "{r:?}");
    for (k, id) in &mine {
        assert!(
            !listed(*k, *id),
            "{k:?} {id} of the swept uid is still listed"
        );
    }
    for (k, id) in &theirs {
        assert!(listed(*k, *id), "{k:?} {id} of another uid was removed");
    }
    assert_eq!(sweep(v, &only_ipc).await.ipc, 3);
}

/// Runs nothing; workspaces get uids but no processes.
struct NoRuntime;

impl Runtime for NoRuntime {
    fn exec<'a>(
        &'a self,
        _: &'a RunSpec,
        _: &'a str,
        _: Option<Duration>,
        _: Option<tokio::sync::mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, crate::WsResult<ExecResult>> {
        Box::pin(async {
            Ok(ExecResult {
                exit_code: 0,
                stdout: String::new(),
                stderr: String::new(),
                timed_out: false,
                duration_ms: 0,
                disk: None,
                notes: Vec::new(),
            })
        })
    }

    fn stop<'a>(&'a self, _: &'a RunSpec) -> BoxFut<'a, crate::WsResult<u32>> {
        Box::pin(async { Ok(0) })
    }

    fn isolates_users(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn a_uid_whose_sweep_fails_is_kept_from_allocation_until_a_sweep_finds_it_clean() {
    if !is_root() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = 47180;
    let cfg = Config {
        state_dir: state.path().to_path_buf(),
        uid_base: base,
        uid_count: 3,
        default_idle_timeout: Duration::from_secs(3600),
        tick: Duration::from_secs(1),
        baseline_stale_after: Duration::from_secs(600),
        default_max_runtime: None,
        default_archive_after: std::time::Duration::from_secs(3600),
        keep_snapshots: 2,
    };
    let store = Store::open(&state.path().join("state.db")).unwrap();
    let snaps = Arc::new(LocalSnapshotStore::open(&state.path().join("snapshots")).unwrap());
    let mut svc = Service::new(cfg, store, snaps, Arc::new(NoRuntime));
    svc.uid_sweep = Some(roots(&[tmp.path()]));
    let req = |id: &str| CreateRequest {
        id: Some(id.into()),
        ..Default::default()
    };

    let a = svc.create(req("a")).await.unwrap().workspace;
    assert_eq!(a.uid, base);
    // Something of the uid's the sweep cannot remove: a mount inside its directory.
    let owned = dir(&tmp.path().join("u-dir"), base);
    let mnt = dir(&owned.join("mnt"), base);
    let fs = Tmpfs::mount(&mnt);
    file(&tmp.path().join("plain"), base);
    svc.delete("a").await.unwrap();
    let q = svc.store.quarantined().unwrap();
    assert_eq!(
        q.iter().map(|q| q.uid).collect::<Vec<_>>(),
        vec![base],
        "{q:?}"
    );
    assert!(q[0].reason.contains("mount point"), "{}", q[0].reason);
    assert!(gone(&tmp.path().join("plain")), "what could be removed was");
    assert_eq!(
        svc.allocate_uid().unwrap(),
        base + 1,
        "a quarantined uid was handed out"
    );
    let b = svc.create(req("b")).await.unwrap().workspace;
    assert_eq!(b.uid, base + 1);

    // Still unclean at the next start: still quarantined.
    svc.sweep_free_uids_on_start().await.unwrap();
    assert_eq!(svc.store.quarantined().unwrap().len(), 1);
    assert_eq!(svc.allocate_uid().unwrap(), base + 2);
    // Clean once the mount is gone: the next release's pass sweeps it again and frees it.
    drop(fs);
    svc.delete("b").await.unwrap();
    assert!(svc.store.quarantined().unwrap().is_empty());
    assert!(gone(&owned));
    assert_eq!(svc.allocate_uid().unwrap(), base);
}

#[tokio::test]
async fn the_start_sweep_finds_what_a_crash_left_under_a_free_uid() {
    if !is_root() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = 47190;
    let cfg = Config {
        state_dir: state.path().to_path_buf(),
        uid_base: base,
        uid_count: 4,
        default_idle_timeout: Duration::from_secs(3600),
        tick: Duration::from_secs(1),
        baseline_stale_after: Duration::from_secs(600),
        default_max_runtime: None,
        default_archive_after: std::time::Duration::from_secs(3600),
        keep_snapshots: 2,
    };
    let store = Store::open(&state.path().join("state.db")).unwrap();
    let snaps = Arc::new(LocalSnapshotStore::open(&state.path().join("snapshots")).unwrap());
    let mut svc = Service::new(cfg, store, snaps, Arc::new(NoRuntime));
    svc.uid_sweep = Some(roots(&[tmp.path()]));
    let held = svc
        .create(CreateRequest {
            id: Some("held".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .workspace;
    let of_held = file(&tmp.path().join("held"), held.uid);
    let left = file(&tmp.path().join("left"), base + 2);
    let outside = file(&tmp.path().join("outside"), base + 4);
    svc.store
        .tx(|tx| crate::store::quarantine_in(tx, base + 3, "left by a test"))
        .unwrap();
    assert_eq!(svc.allocate_uid().unwrap(), base + 1);
    svc.sweep_free_uids_on_start().await.unwrap();
    assert!(
        svc.store.quarantined().unwrap().is_empty(),
        "a clean quarantined uid was kept"
    );
    assert!(gone(&left), "a free uid's file survived the start sweep");
    assert!(!gone(&of_held), "a live workspace's file was removed");
    assert!(!gone(&outside), "a uid outside the range was swept");
}

#[tokio::test]
async fn a_segment_of_the_uid_another_process_keeps_attached_leaves_it_unclean() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    if !is_root() || !Path::new("/usr/bin/python3").exists() {
        return;
    }
    let (u, v) = (47201, 47202);
    let py = "import ctypes; libc = ctypes.CDLL(None); print(libc.shmget(0, 4096, 0o1666))";
    let out = std::process::Command::new("/usr/bin/python3")
        .args(["-c", py])
        .uid(u)
        .gid(u)
        .output()
        .unwrap();
    let id: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert!(id >= 0);
    // Another uid attaches it (the uid made it 0666) and holds on.
    let hold = format!(
        "import ctypes, sys, time; libc = ctypes.CDLL(None); libc.shmat.restype = ctypes.c_void_p
print(libc.shmat({id}, None, 0)); sys.stdout.flush(); time.sleep(60)"
    );
    let mut holder = std::process::Command::new("/usr/bin/python3")
        .args(["-c", &hold])
        .uid(v)
        .gid(v)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_ne!(line.trim(), "18446744073709551615", "shmat failed");

    let only_ipc = Roots {
        dirs: Vec::new(),
        skip: Vec::new(),
        sysv: true,
    };
    let r = sweep(u, &only_ipc).await;
    assert!(
        !r.is_clean(),
        "a segment still attached was called gone: {r:?}"
    );
    assert!(r.first_error.unwrap().contains("still attached"));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let r = sweep(u, &only_ipc).await;
    assert!(r.is_clean(), "{r:?}");
    assert!(!listed(Kind::Shm, id));
}
