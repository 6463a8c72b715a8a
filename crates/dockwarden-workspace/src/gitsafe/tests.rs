//! Git on hostile repositories, with real git: a repository whose config and hooks name a
//! program for every way git can start one runs none of them, and git runs as the owner.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::worktree;

/// A uid and gid no account has, for the repository owner; [`OTHER_UID`] is a second one.
pub(crate) const TEST_UID: u32 = 47_011;
pub(crate) const OTHER_UID: u32 = 47_012;

/// Whether these tests can change uids (they need root); they say so when they cannot.
pub(crate) fn root() -> bool {
    let root = nix::unistd::geteuid().is_root();
    if !root {
        eprintln!("skipped: needs root to run git as another uid");
    }
    root
}

pub(crate) fn tempdir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("dwgitsafe")
        .tempdir_in("/tmp")
        .expect("tempdir");
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    d
}

fn run_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) fn chown_r(path: &Path, uid: u32) {
    let st = Command::new("chown")
        .args(["-hR", &format!("{uid}:{uid}")])
        .arg(path)
        .status()
        .expect("chown");
    assert!(st.success());
}

/// Where a hostile repository's programs would leave their mark: `<markers>/<what>.ran`,
/// holding the uid each ran as. Anyone may write there, so a run as any uid shows.
pub(crate) struct Markers {
    pub dir: PathBuf,
}

impl Markers {
    pub(crate) fn new(root: &Path) -> Markers {
        let dir = root.join("markers");
        fs::create_dir_all(dir.join("bin")).expect("mkdir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).expect("chmod");
        Markers { dir }
    }

    /// A script that records that it ran (as `what`, with its uid) and fails.
    fn program(&self, what: &str) -> String {
        let path = self.dir.join("bin").join(what);
        let text = format!(
            "#!/bin/sh\necho \"$(id -u) $0 $*\" >> '{}/{what}.ran'\nexit 1\n",
            self.dir.display()
        );
        fs::write(&path, text).expect("write");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        path.display().to_string()
    }

    /// Every mark left, as "<file>: <content>".
    pub(crate) fn left(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.dir).expect("read markers") {
            let e = e.expect("entry");
            if e.path().extension().is_some_and(|x| x == "ran") {
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                out.push(format!("{}: {text}", e.file_name().to_string_lossy()));
            }
        }
        out
    }
}

/// Hooks git knows (githooks(5)).
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "post-index-change",
    "fsmonitor-watchman",
];

/// A repository (worktree at `<root>/<name>`, one commit tagged `v1` with `compose.yaml` and
/// `.gitattributes`) whose config names a marker program for every key that runs one, with a
/// promisor remote over ssh (`core.sshCommand`) and one over `ext::`, protocols allowed by the
/// repository itself, and every hook. With `missing`, the blob of `compose.yaml` is gone, so
/// reading it is where git would lazily fetch.
pub(crate) fn hostile_repo(root: &Path, name: &str, m: &Markers, missing: bool) -> PathBuf {
    let repo = root.join(name);
    fs::create_dir_all(&repo).expect("mkdir");
    run_git(&repo, &["init", "-q"]);
    fs::write(
        repo.join("compose.yaml"),
        "services:\n  db:\n    image: postgres\n",
    )
    .expect("write");
    fs::write(repo.join(".gitattributes"), "* filter=evil diff=evil\n").expect("write");
    fs::write(repo.join("README.md"), "hello\n").expect("write");
    run_git(&repo, &["add", "."]);
    run_git(&repo, &["commit", "-qm", "one"]);
    run_git(&repo, &["tag", "v1"]);
    if missing {
        let blob = run_git(&repo, &["rev-parse", "HEAD:compose.yaml"]);
        let loose = repo.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
        fs::remove_file(loose).expect("remove blob");
    }
    let hooks = repo.join(".git/hooks");
    for h in HOOKS {
        let p = m.program(&format!("hook-{h}"));
        fs::copy(&p, hooks.join(h)).expect("hook");
        fs::set_permissions(hooks.join(h), fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = format!(
        r#"[core]
	repositoryformatversion = 1
	filemode = true
	bare = false
	sshCommand = {ssh}
	fsmonitor = {fsmonitor}
	pager = {pager}
	askPass = {askpass}
	editor = {editor}
	alternateRefsCommand = {altrefs}
	gitProxy = {gitproxy}
	hooksPath = {hooks}
[extensions]
	partialClone = origin
[remote "origin"]
	url = ssh://example.invalid/x
	promisor = true
	uploadpack = {uploadpack}
	fetch = +refs/heads/*:refs/remotes/origin/*
[remote "ext"]
	url = "ext::{ext}"
	promisor = true
[protocol]
	allow = always
[protocol "ssh"]
	allow = always
[protocol "ext"]
	allow = always
[protocol "file"]
	allow = always
[uploadpack]
	allowLazyFetch = true
	packObjectsHook = {packobjects}
[credential]
	helper = !{credential}
[diff]
	external = {diff}
[diff "evil"]
	textconv = {textconv}
	command = {diffcmd}
[filter "evil"]
	clean = {clean}
	smudge = {smudge}
	process = {process}
[gc]
	auto = 1
	recentObjectsHook = {gchook}
[gpg]
	program = {gpg}
"#,
        ssh = m.program("ssh"),
        fsmonitor = m.program("fsmonitor"),
        pager = m.program("pager"),
        askpass = m.program("askpass"),
        editor = m.program("editor"),
        altrefs = m.program("altrefs"),
        gitproxy = m.program("gitproxy"),
        hooks = hooks.display(),
        uploadpack = m.program("uploadpack"),
        ext = m.program("ext"),
        packobjects = m.program("packobjects"),
        credential = m.program("credential"),
        diff = m.program("diff-external"),
        textconv = m.program("textconv"),
        diffcmd = m.program("diff-command"),
        clean = m.program("clean"),
        smudge = m.program("smudge"),
        process = m.program("process"),
        gchook = m.program("gc"),
        gpg = m.program("gpg"),
    );
    fs::write(repo.join(".git/config"), config).expect("config");
    repo
}

#[test]
fn the_environment_has_nothing_of_the_service() {
    let mut cmd = Command::new("env");
    environment(&mut cmd, std::ffi::OsStr::new(NO_HOME), "");
    let out = cmd.output().expect("env");
    let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "GIT_ALLOW_PROTOCOL=",
            "GIT_CONFIG_GLOBAL=/dev/null",
            "GIT_CONFIG_NOSYSTEM=1",
            "GIT_NO_LAZY_FETCH=1",
            "GIT_OPTIONAL_LOCKS=0",
            "GIT_TERMINAL_PROMPT=0",
            "HOME=/nonexistent",
            "LC_ALL=C",
            &format!("PATH={PATH}"),
        ]
    );
}

#[test]
fn a_spawned_program_runs_as_the_given_uid_without_groups_or_new_privileges() {
    if !root() {
        return;
    }
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        "id -u; id -g; id -G; grep '^NoNewPrivs:' /proc/self/status",
    ])
    .uid(TEST_UID)
    .gid(TEST_UID);
    let out = output(&mut cmd).expect("run");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{TEST_UID}\n{TEST_UID}\n{TEST_UID}\nNoNewPrivs:\t1\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The service's own thread is unchanged.
    let own = fs::read_to_string("/proc/thread-self/status").expect("status");
    assert!(own.contains("NoNewPrivs:\t0"), "{own}");
}

/// Root reads everything, so a 0700 repository proves little by itself; but git refuses a
/// repository that is not its user's (`safe.directory`, which is not passed): it works as the
/// owner only, and neither as root nor as another uid.
#[test]
fn git_on_a_private_repository_works_only_as_its_owner() {
    if !root() {
        return;
    }
    let dir = tempdir();
    let repo = dir.path().join("r");
    fs::create_dir(&repo).expect("mkdir");
    run_git(&repo, &["init", "-q"]);
    fs::write(repo.join("f"), "x\n").expect("write");
    run_git(&repo, &["add", "f"]);
    run_git(&repo, &["commit", "-qm", "one"]);
    chown_r(&repo, TEST_UID);
    fs::set_permissions(&repo, fs::Permissions::from_mode(0o700)).expect("chmod");

    let rev_parse =
        |owner| output(on_repo(&repo, owner).args(["rev-parse", "--verify", "HEAD"])).expect("run");
    let own = rev_parse(Some((TEST_UID, TEST_UID)));
    assert!(own.status.success(), "{}", first_line(&own.stderr));
    let as_root = rev_parse(None);
    assert!(!as_root.status.success());
    assert!(
        first_line(&as_root.stderr).contains("dubious ownership"),
        "{}",
        first_line(&as_root.stderr)
    );
    let other = rev_parse(Some((OTHER_UID, OTHER_UID)));
    assert!(!other.status.success());
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn a_promisor_remote_with_ssh_command_runs_nothing_during_clone() {
    if !root() {
        return;
    }
    let dir = tempdir();
    let m = Markers::new(dir.path());
    // Another user's repository with a missing blob: its upload-pack would fetch it lazily.
    let partial = hostile_repo(dir.path(), "partial", &m, true);
    chown_r(&partial, TEST_UID);
    let dest = dir.path().join("dest-partial");
    let src = partial.display().to_string();
    let err = block_on(worktree::clone(&src, None, &dest)).expect_err("cannot be cloned whole");
    assert!(err.to_string().contains("lazy fetch"), "{err}");
    assert_eq!(m.left(), Vec::<String>::new());

    // A whole one: cloned, checked out at a revision, and still nothing ran.
    let whole = hostile_repo(dir.path(), "whole", &m, false);
    chown_r(&whole, TEST_UID);
    let dest = dir.path().join("dest-whole");
    let src = whole.display().to_string();
    block_on(worktree::clone(&src, Some("v1"), &dest)).expect("clone");
    assert_eq!(m.left(), Vec::<String>::new());
    assert!(dest.join("compose.yaml").is_file());
    let config = fs::read_to_string(dest.join(".git/config")).expect("config");
    assert!(!config.contains("markers"), "{config}");
}

#[test]
fn a_clone_of_another_users_repository_is_served_as_that_user() {
    if !root() {
        return;
    }
    let dir = tempdir();
    // Owned by TEST_UID and private to it: git serves it only to its owner.
    let src = dir.path().join("src");
    fs::create_dir(&src).expect("mkdir");
    run_git(&src, &["init", "-q"]);
    fs::write(src.join("f"), "x\n").expect("write");
    run_git(&src, &["add", "f"]);
    run_git(&src, &["commit", "-qm", "one"]);
    chown_r(&src, TEST_UID);
    fs::set_permissions(&src, fs::Permissions::from_mode(0o700)).expect("chmod");
    assert_eq!(worktree::source_owner(&src), Some((TEST_UID, TEST_UID)));
    let dest = dir.path().join("dest");
    block_on(worktree::clone(&src.display().to_string(), None, &dest)).expect("clone");
    assert_eq!(fs::read_to_string(dest.join("f")).expect("read"), "x\n");

    // Its `.git` swapped for a link to a repository only root can read: served as the
    // owner, so refused.
    let secret = dir.path().join("secret");
    fs::create_dir(&secret).expect("mkdir");
    run_git(&secret, &["init", "-q"]);
    fs::write(secret.join("s"), "root only\n").expect("write");
    run_git(&secret, &["add", "s"]);
    run_git(&secret, &["commit", "-qm", "secret"]);
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).expect("chmod");
    let lure = dir.path().join("lure");
    fs::create_dir(&lure).expect("mkdir");
    std::os::unix::fs::symlink(secret.join(".git"), lure.join(".git")).expect("symlink");
    chown_r(&lure, TEST_UID);
    let dest = dir.path().join("dest-lure");
    let err = block_on(worktree::clone(&lure.display().to_string(), None, &dest))
        .expect_err("a root-only repository behind a link");
    assert!(!dest.join("s").exists(), "{err}");
}

#[test]
fn a_clone_shares_no_inode_with_its_source() {
    use std::collections::HashSet;
    use std::os::unix::fs::MetadataExt;

    if !root() {
        return;
    }
    let dir = tempdir();
    let src = dir.path().join("src");
    fs::create_dir(&src).expect("mkdir");
    run_git(&src, &["init", "-q"]);
    fs::write(src.join("f"), "x\n").expect("write");
    run_git(&src, &["add", "f"]);
    run_git(&src, &["commit", "-qm", "one"]);
    let dest = dir.path().join("dest");
    block_on(worktree::clone(&src.display().to_string(), None, &dest)).expect("clone");
    worktree::chown_tree(&dest, Some((TEST_UID, TEST_UID))).expect("chown");

    // Every object file of the source is still root's, and none is one of the clone's inodes.
    let walk = |root: &Path| -> Vec<fs::Metadata> {
        let out = Command::new("find")
            .arg(root.join(".git/objects"))
            .args(["-type", "f"])
            .output()
            .expect("find");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| fs::symlink_metadata(l).expect("stat"))
            .collect()
    };
    let theirs: HashSet<(u64, u64)> = walk(&dest).iter().map(|m| (m.dev(), m.ino())).collect();
    let ours = walk(&src);
    assert!(!ours.is_empty());
    for m in &ours {
        assert_eq!(m.uid(), 0);
        assert!(!theirs.contains(&(m.dev(), m.ino())));
    }
}

#[test]
fn sources_are_local_as_git_tells_them_from_urls() {
    let cases: &[(&str, Option<&str>)] = &[
        ("/srv/repo", Some("/srv/repo")),
        ("relative/repo", Some("relative/repo")),
        ("file:///srv/repo", Some("/srv/repo")),
        ("https://example.com/r.git", None),
        ("ssh://host/r", None),
        ("git@host:r.git", None),
        ("host:/r", None),
        ("ext::sh -c x", None),
        ("./a:b", Some("./a:b")),
    ];
    for (repo, want) in cases {
        assert_eq!(
            worktree::local_path(repo).as_deref(),
            want.map(Path::new),
            "{repo}"
        );
    }
}
