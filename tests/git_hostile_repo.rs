//! Issue 23, point 4, through the real service: a workspace user turns their repository into
//! a trap (a promisor remote over ssh with their own `core.sshCommand`, `core.fsmonitor`, the
//! protocols allowed by the repository, every hook, a blob the selector reads removed so git
//! would fetch it lazily), then the operator runs the ordinary verbs: create (a clone of that
//! repository), reprovision (the selection's git), snapshot, kill and fork. Nothing in the
//! repository runs, as root or as anyone.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;
use workspace_support::{Svc, fixture_repo};

/// Programs the trap names; each appends "<uid> <args>" to `<dir>/<name>.ran`.
const PROGRAMS: &[&str] = &[
    "ssh",
    "fsmonitor",
    "pager",
    "askpass",
    "altrefs",
    "uploadpack",
    "credential",
    "diff",
    "hook",
];

/// Hooks the trap installs (all the ones a clone, a checkout, a fetch or a gc would run).
const HOOKS: &[&str] = &[
    "post-checkout",
    "reference-transaction",
    "pre-auto-gc",
    "post-index-change",
    "post-merge",
    "post-rewrite",
    "pre-commit",
    "fsmonitor-watchman",
];

struct Markers {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Markers {
    fn new() -> Markers {
        let tmp = tempfile::Builder::new()
            .prefix("dwgithostile")
            .tempdir_in("/tmp")
            .unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let dir = tmp.path().join("m");
        fs::create_dir_all(dir.join("bin")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        for p in PROGRAMS {
            let path = dir.join("bin").join(p);
            let text = format!(
                "#!/bin/sh\necho \"$(id -u) $*\" >> '{}/{p}.ran'\nexit 1\n",
                dir.display()
            );
            fs::write(&path, text).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        Markers { _tmp: tmp, dir }
    }

    fn bin(&self, p: &str) -> String {
        self.dir.join("bin").join(p).display().to_string()
    }

    fn left(&self) -> Vec<String> {
        let mut out: Vec<String> = fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "ran"))
            .map(|p| format!("{}: {}", p.display(), fs::read_to_string(&p).unwrap()))
            .collect();
        out.sort();
        out
    }
}

/// The user's side of the attack, as a script for `ws exec` in the worktree.
fn trap(m: &Markers) -> String {
    let mut s = String::from("set -e\n");
    let config: &[(&str, String)] = &[
        ("core.repositoryformatversion", "1".into()),
        ("extensions.partialClone", "origin".into()),
        ("remote.origin.url", "ssh://example.invalid/x".into()),
        ("remote.origin.promisor", "true".into()),
        ("remote.origin.uploadpack", m.bin("uploadpack")),
        ("core.sshCommand", m.bin("ssh")),
        ("core.fsmonitor", m.bin("fsmonitor")),
        ("core.pager", m.bin("pager")),
        ("core.askPass", m.bin("askpass")),
        ("core.alternateRefsCommand", m.bin("altrefs")),
        ("credential.helper", format!("!{}", m.bin("credential"))),
        ("diff.external", m.bin("diff")),
        ("protocol.allow", "always".into()),
        ("protocol.ssh.allow", "always".into()),
        ("protocol.file.allow", "always".into()),
        ("uploadpack.allowLazyFetch", "true".into()),
        ("gc.auto", "1".into()),
    ];
    for (k, v) in config {
        s.push_str(&format!("git config {k} '{v}'\n"));
    }
    for h in HOOKS {
        // The hook runs the marker program by its host path (the trap is set from inside the
        // workspace's sandbox, which does not see that path; the operator's git would).
        s.push_str(&format!(
            "printf '#!/bin/sh\\nexec %s \"$@\"\\n' '{}' > .git/hooks/{h}; chmod 755 .git/hooks/{h}\n",
            m.bin("hook")
        ));
    }
    s
}

/// A compose file the selector reads at HEAD, committed before the trap is set.
const COMMIT_COMPOSE: &str = "set -e
printf 'services:\\n  db:\\n    image: postgres\\n' > compose.yaml
git add compose.yaml
git -c user.email=u@u -c user.name=u commit -qm compose
";

/// Removes the compose file's blob: reading it is where git would fetch lazily. (Only
/// `rev-parse` here: the user's own git would run the trap too.)
const REMOVE_BLOB: &str = "set -e
blob=$(git -c core.fsmonitor=false rev-parse HEAD:compose.yaml)
loose=.git/objects/$(echo $blob | cut -c1-2)/$(echo $blob | cut -c3-)
rm -f $loose
test ! -e $loose
";

fn exec_ok(svc: &Svc, id: &str, cmd: &str) {
    let r = svc.exec(id, cmd);
    assert_eq!(r["exit_code"], 0, "{r}");
}

fn root() -> bool {
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout;
    uid == b"0\n"
}

#[test]
fn a_promisor_remote_with_ssh_command_runs_nothing_during_the_operators_verbs() {
    if !root() {
        eprintln!("skipped: needs root (workspaces with their own uids)");
        return;
    }
    let svc = Svc::start(29800, &[], &[]);
    let m = Markers::new();
    let repo = fixture_repo(svc.dir.path());
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "trap", "repo": repo.display().to_string() })),
    );
    exec_ok(&svc, "trap", COMMIT_COMPOSE);
    exec_ok(&svc, "trap", &trap(&m));
    assert_eq!(m.left(), Vec::<String>::new(), "the trap is set quietly");

    // create: a clone of the trapped repository (another workspace's).
    let src = svc.worktree("trap").display().to_string();
    let copy = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "copy", "repo": src })),
    );
    assert_eq!(copy["workspace"]["status"], "ready", "{copy}");
    assert!(
        !fs::read_to_string(svc.worktree("copy").join(".git/config"))
            .unwrap()
            .contains(m.dir.to_str().unwrap()),
        "the clone's config is git's own"
    );

    // reprovision: the selection reads HEAD with git, and HEAD's compose.yaml is missing.
    exec_ok(&svc, "trap", REMOVE_BLOB);
    svc.ok(
        "POST",
        "/v1/workspaces/trap/reprovision",
        Some(json!({ "runtime": "standard" })),
    );
    // A clone of it now fails (its upload-pack would have to fetch), and runs nothing.
    let (status, _) = svc.api(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "copy2", "repo": src })),
    );
    assert_ne!(status, 201);

    // snapshot, kill (archive script, snapshot), fork from the snapshot.
    let snap = svc.ok("POST", "/v1/workspaces/trap/snapshot", None)["id"]
        .as_str()
        .unwrap()
        .to_string();
    svc.ok("POST", "/v1/workspaces/trap/kill", None);
    svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "fork", "from": snap })),
    );
    assert!(
        Path::new(&svc.worktree("fork").join(".git/hooks/post-checkout")).exists(),
        "the fork has the trap too (it is the user's own)"
    );

    assert_eq!(m.left(), Vec::<String>::new());
}
