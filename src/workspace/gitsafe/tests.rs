//! Git on hostile repositories, with real git: a repository whose config and hooks name a
//! program for every way git can start one runs none of them, and git runs as the owner.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

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
