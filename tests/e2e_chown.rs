//! Chown-back: files a root container wrote into a workspace bind are handed to the
//! workspace user once no container uses the bind, and nothing outside the bind changes owner.

mod common;
mod pins_support;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use pins_support::{PinGuard, pins_left};

const UID: u32 = 12345;

struct Ws {
    _guard: PinGuard,
    p: Proxy,
    pins: PathBuf,
    root: PathBuf,
    data: PathBuf,
}

/// A workspace owned by a non-root user, with `data/` for binds and the proxy told the owner.
fn setup(e: &Engine) -> Ws {
    let dir = tempfile::Builder::new()
        .prefix("dwchown")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    let data = ws.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    for p in [&ws, &data] {
        std::os::unix::fs::chown(p, Some(UID), Some(UID)).expect("chown workspace");
    }
    let pins = root.join("pins");
    let uid = UID.to_string();
    let p = Proxy::start_in_on(
        e,
        dir,
        ws,
        &[
            "--uid",
            &uid,
            "--gid",
            &uid,
            "--pin-dir",
            pins.to_str().expect("utf8"),
        ],
    );
    Ws {
        _guard: PinGuard {
            pins: pins.clone(),
            host: e.host(),
        },
        p,
        pins,
        root,
        data,
    }
}

/// Every entry beneath `dir` (not following symlinks) with its owner.
fn owners(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let m = e.path().symlink_metadata().expect("lstat");
            if m.is_dir() {
                stack.push(e.path());
            }
            out.push((e.path(), m.uid()));
        }
    }
    out
}

fn root_owned(dir: &Path, except: &[&str]) -> Vec<PathBuf> {
    owners(dir)
        .into_iter()
        .filter(|(p, uid)| *uid == 0 && !except.iter().any(|x| p.ends_with(x)))
        .map(|(p, _)| p)
        .collect()
}

/// [`wait_until`] that shows the proxy's log when it times out.
#[track_caller]
fn wait_logged(w: &Ws, what: &str, limit: Duration, f: impl FnMut() -> bool) {
    assert!(
        poll_until(limit, f),
        "timed out waiting until {what}; proxy log:\n{}",
        w.p.log()
    );
}

fn uid_of(p: &Path) -> u32 {
    p.symlink_metadata().expect("lstat").uid()
}

/// Writes, as root in a container: a deep tree, files, directories, symlinks to outside
/// (the host's `/etc/passwd`, `/`, and a sentinel beside the workspace), hard links and a
/// fifo; its `mknod` must fail.
const WRITE_ALL: &str = r#"set -e
mkdir -p /d/dir/a/b/c && echo x > /d/dir/a/b/c/f && echo y > /d/file
ln -s /etc/passwd /d/out-link && ln -s / /d/root-link && ln -s "$SENTINEL" /d/sentinel-link
ln /d/file /d/dir/file-hard && ln /d/file /d/file-hard2
mkfifo /d/fifo
if mknod /d/disk b 8 0 2>/dev/null; then echo "mknod was allowed: the proxy drops MKNOD" >&2; exit 1; fi
d=/d/deep; i=0; while [ $i -lt 120 ]; do d=$d/x; i=$((i+1)); done; mkdir -p $d && touch $d/leaf
"#;

fn root_written_files_links_and_deep_trees_are_handed_back_after_the_container_stops(e: &Engine) {
    let w = setup(e);
    let sentinel = w.root.join("sentinel");
    std::fs::write(&sentinel, b"root's").expect("sentinel");
    let name = unique("chown-all");
    let env = format!("SENTINEL={}", sentinel.display());
    let bind = format!("{}:/d", w.data.display());
    ok(w.p.docker(&[
        "run", "--name", &name, "-e", &env, "-v", &bind, IMAGE, "sh", "-c", WRITE_ALL,
    ]));
    wait_logged(
        &w,
        "no root-owned entry remains in the bind",
        Duration::from_secs(30),
        || root_owned(&w.data, &[]).is_empty(),
    );
    // Containers lose MKNOD (`container.mknod`); a node made anyway is removed by chown-back
    // (`hostfs::chown` unit tests).
    assert!(
        std::fs::symlink_metadata(w.data.join("disk")).is_err(),
        "no device node was made"
    );
    assert_eq!(
        uid_of(&w.data.join("out-link")),
        UID,
        "symlinks themselves are changed"
    );
    assert_eq!(
        uid_of(&sentinel),
        0,
        "a symlink target outside the bind keeps its owner"
    );
    assert_eq!(uid_of(Path::new("/etc/passwd")), 0);
    assert_eq!(
        uid_of(&w.root),
        0,
        "nothing outside the workspace changed owner"
    );
    wait_logged(
        &w,
        "a summary line is logged",
        Duration::from_secs(10),
        || w.p.log().contains("chown-back"),
    );
    // The container did write root-owned files: the walk changed some (the check is the log's,
    // since the walk may finish before the test looks at the tree).
    let log = w.p.log();
    let chowned: u64 = log
        .split("chowned=")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert!(
        chowned > 0,
        "the container wrote root-owned files and they were handed back: {log}"
    );
    ok(w.p.docker(&["rm", &name]));
    wait_logged(&w, "the pins are released", Duration::from_secs(15), || {
        pins_left(&w.pins) == 0
    });
}

fn hard_link_to_a_root_file_outside_the_bind_is_never_chowned(e: &Engine) {
    let w = setup(e);
    let outside = w.root.join("secret");
    std::fs::write(&outside, b"root's").expect("secret");
    std::fs::hard_link(&outside, w.data.join("planted")).expect("plant a hard link");
    let bind = format!("{}:/d", w.data.display());
    let name = unique("chown-hard");
    ok(w.p.docker(&[
        "run",
        "--name",
        &name,
        "-v",
        &bind,
        IMAGE,
        "sh",
        "-c",
        "echo x > /d/written && ln /d/planted /d/planted2",
    ]));
    wait_logged(
        &w,
        "the container's own file is handed back",
        Duration::from_secs(30),
        || uid_of(&w.data.join("written")) == UID,
    );
    assert_eq!(
        uid_of(&outside),
        0,
        "an inode also linked from outside the bind keeps its owner"
    );
    assert_eq!(uid_of(&w.data.join("planted")), 0);
    ok(w.p.docker(&["rm", &name]));
    wait_logged(&w, "the pins are released", Duration::from_secs(15), || {
        pins_left(&w.pins) == 0
    });
}

fn chown_waits_until_every_container_using_the_bind_has_stopped(e: &Engine) {
    let w = setup(e);
    let bind = format!("{}:/d", w.data.display());
    let a = ok(w.p.docker(&[
        "run",
        "-d",
        "-v",
        &bind,
        IMAGE,
        "sh",
        "-c",
        "touch /d/from-a && sleep 300",
    ]));
    wait_logged(
        &w,
        "the first container wrote",
        Duration::from_secs(20),
        || w.data.join("from-a").exists(),
    );
    let b = unique("chown-b");
    ok(w.p.docker(&[
        "run",
        "--name",
        &b,
        "-v",
        &bind,
        IMAGE,
        "touch",
        "/d/from-b",
    ]));
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        uid_of(&w.data.join("from-a")),
        0,
        "no chown while another container still uses the bind"
    );
    assert_eq!(
        uid_of(&w.data.join("from-b")),
        0,
        "no chown while another container still uses the bind"
    );
    ok(w.p.docker(&["kill", &a]));
    wait_logged(
        &w,
        "both files are handed back",
        Duration::from_secs(30),
        || uid_of(&w.data.join("from-a")) == UID && uid_of(&w.data.join("from-b")) == UID,
    );
    ok(w.p.docker(&["rm", "-f", &a, &b]));
    wait_logged(&w, "the pins are released", Duration::from_secs(15), || {
        pins_left(&w.pins) == 0
    });
}

fn a_container_restarted_by_its_restart_policy_is_not_treated_as_stopped(e: &Engine) {
    let w = setup(e);
    let bind = format!("{}:/d", w.data.display());
    // Exits every second and is restarted by the daemon: `die` fires each time.
    let id = ok(w.p.docker(&[
        "run",
        "-d",
        "--restart",
        "always",
        "-v",
        &bind,
        IMAGE,
        "sh",
        "-c",
        "touch /d/r-$(date +%s%N); sleep 1; exit 1",
    ]));
    std::thread::sleep(Duration::from_secs(4));
    let restarts: u64 = stdout(&e.daemon(&["inspect", "-f", "{{.RestartCount}}", &id]))
        .parse()
        .unwrap_or(0);
    assert!(restarts >= 1, "the container was restarted by its policy");
    let mut written: Vec<(PathBuf, u32)> = owners(&w.data);
    written.sort();
    let first = written.first().expect("the container wrote files");
    assert_eq!(
        first.1, 0,
        "`die` before a policy restart must not hand files back: {written:?}"
    );
    ok(w.p.docker(&["rm", "-f", &id]));
    wait_logged(
        &w,
        "everything is handed back after removal",
        Duration::from_secs(30),
        || root_owned(&w.data, &[]).is_empty(),
    );
    wait_logged(&w, "the pins are released", Duration::from_secs(15), || {
        pins_left(&w.pins) == 0
    });
}

per_engine!(
    root_written_files_links_and_deep_trees_are_handed_back_after_the_container_stops,
    hard_link_to_a_root_file_outside_the_bind_is_never_chowned,
    chown_waits_until_every_container_using_the_bind_has_stopped,
    a_container_restarted_by_its_restart_policy_is_not_treated_as_stopped,
);
