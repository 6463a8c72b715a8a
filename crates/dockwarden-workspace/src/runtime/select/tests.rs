//! The selector on the fixture trees of `fixtures/select/`, one per evidence kind and per
//! non-evidence case, plus the views on temporary trees and git repositories.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/select")
        .join(case)
}

fn sel(case: &str) -> Selection {
    select(&DirView::new(fixture(case)), None, &Limits::default())
}

/// The case selects docker-compose on evidence, and `file`'s reason contains `reason`.
#[track_caller]
fn evidence(case: &str, file: &str, reason: &str) {
    let s = sel(case);
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::DockerCompose, Source::Evidence),
        "{case}: {s:?}"
    );
    assert!(
        s.evidence
            .iter()
            .any(|e| e.file == file && e.reason.contains(reason)),
        "{case}: {s:?}"
    );
    assert!(!s.truncated, "{case}: {s:?}");
}

#[track_caller]
fn no_evidence(case: &str) {
    let s = sel(case);
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::Standard, Source::Default),
        "{case}: {s:?}"
    );
    assert!(s.evidence.is_empty(), "{case}: {s:?}");
}

const SETTINGS: &str = ".dockwarden/settings.json";

#[test]
fn lifecycle_scripts_running_local_docker_are_evidence() {
    evidence(
        "script-compose",
        SETTINGS,
        "`scripts.setup` runs `docker compose up -d --wait`",
    );
    evidence(
        "script-docker-compose-v1",
        SETTINGS,
        "`scripts.archive` runs `docker-compose -f compose.ci.yml down -v`",
    );
    evidence(
        "script-docker",
        SETTINGS,
        "`scripts.run` runs `docker info`",
    );
    evidence(
        "script-localstack",
        SETTINGS,
        "`scripts.setup` runs `localstack start -d`",
    );
}

#[test]
fn scripts_referenced_by_a_lifecycle_script_are_read() {
    evidence(
        "script-ref",
        "scripts/setup.sh",
        "line 6 runs `supabase@latest start -x vector`",
    );
}

#[test]
fn root_compose_file_with_services_is_evidence() {
    evidence("compose-root", "compose.yaml", "defines services");
    evidence(
        "compose-legacy-name",
        "docker-compose.yml",
        "defines services",
    );
}

#[test]
fn compose_files_without_services_are_not_evidence() {
    no_evidence("compose-no-services");
}

#[test]
fn supabase_projects_at_root_and_nested_are_evidence() {
    evidence(
        "supabase-root",
        "supabase/config.toml",
        "Supabase CLI project",
    );
    evidence(
        "supabase-nested",
        "web/supabase/config.toml",
        "Supabase CLI project",
    );
    // Four levels down is beyond the nested-search depth (3).
    no_evidence("supabase-too-deep");
}

#[test]
fn testcontainers_dependencies_are_evidence() {
    evidence(
        "tc-npm",
        "package.json",
        "`@testcontainers/postgresql` (Testcontainers)",
    );
    evidence(
        "tc-maven",
        "pom.xml",
        "`org.testcontainers` (Testcontainers)",
    );
    evidence(
        "tc-gradle",
        "build.gradle.kts",
        "`org.testcontainers` (Testcontainers)",
    );
    evidence(
        "tc-gradle-groovy",
        "app/build.gradle",
        "`org.testcontainers` (Testcontainers)",
    );
    evidence(
        "tc-go",
        "go.mod",
        "`github.com/testcontainers/testcontainers-go` (Testcontainers)",
    );
    evidence(
        "tc-requirements",
        "requirements-dev.txt",
        "`testcontainers` (Testcontainers)",
    );
    evidence(
        "tc-pyproject",
        "pyproject.toml",
        "`testcontainers` (Testcontainers)",
    );
    evidence(
        "tc-poetry",
        "pyproject.toml",
        "`testcontainers` (Testcontainers)",
    );
}

#[test]
fn sail_devcontainer_and_localstack_are_evidence() {
    evidence("sail", "composer.json", "`laravel/sail`");
    evidence(
        "devcontainer",
        ".devcontainer/devcontainer.json",
        "`dockerComposeFile`",
    );
    no_evidence("devcontainer-image");
    evidence("lstk", ".lstk/config.toml", "LocalStack configuration");
    evidence(
        "localstack-py",
        "requirements.txt",
        "`localstack` (LocalStack)",
    );
    evidence(
        "localstack-pyproject",
        "pyproject.toml",
        "`localstack` (LocalStack)",
    );
}

#[test]
fn package_scripts_and_make_recipes_running_containers_are_evidence() {
    evidence(
        "npm-scripts",
        "package.json",
        "script `db:up` runs `docker compose -f compose.dev.yml up -d`",
    );
    evidence("makefile", "Makefile", "line 6 runs `docker compose up -d`");
    evidence("makefile-run", "Makefile", "line 2 runs `docker run --rm");
}

#[test]
fn image_builds_alone_are_not_evidence() {
    no_evidence("build-only");
}

#[test]
fn commands_targeting_a_remote_docker_host_are_not_evidence() {
    no_evidence("remote-host");
}

#[test]
fn words_are_matched_whole_and_comments_and_heredocs_skipped() {
    no_evidence("word-boundary");
    no_evidence("plain");
    no_evidence("skip-dirs");
}

#[test]
fn explicit_standard_beats_evidence() {
    let s = select(
        &DirView::new(fixture("compose-root")),
        Some(RuntimeKind::Standard),
        &Limits::default(),
    );
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::Standard, Source::Explicit)
    );
    assert_eq!(s.setting.as_deref(), Some("create"));
    // The evidence it overrode is still shown.
    assert_eq!(s.evidence.len(), 1, "{s:?}");
}

#[test]
fn explicit_docker_compose_needs_no_evidence() {
    let s = select(
        &DirView::new(fixture("plain")),
        Some(RuntimeKind::DockerCompose),
        &Limits::default(),
    );
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::DockerCompose, Source::Explicit)
    );
    assert!(s.evidence.is_empty());
}

#[test]
fn settings_runtime_is_explicit_and_create_field_beats_it() {
    let s = sel("settings-runtime");
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::DockerCompose, Source::Explicit)
    );
    assert_eq!(s.setting.as_deref(), Some(SETTINGS));
    let s = sel("settings-standard");
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::Standard, Source::Explicit),
        "{s:?}"
    );
    assert!(s.evidence.iter().any(|e| e.file == "compose.yaml"));
    let s = select(
        &DirView::new(fixture("settings-standard")),
        Some(RuntimeKind::DockerCompose),
        &Limits::default(),
    );
    assert_eq!(
        (s.runtime, s.setting.as_deref()),
        (RuntimeKind::DockerCompose, Some("create"))
    );
}

#[test]
fn inspect_script_is_read_by_the_lifecycle_rules() {
    let view = DirView::new(fixture("plain"));
    let s = select_with_script(
        &view,
        None,
        Some(("ci/rehearse.sh", b"#!/bin/sh\ndocker compose up -d\n")),
    );
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::DockerCompose, Source::Evidence)
    );
    assert_eq!(
        s.evidence[0],
        Evidence {
            file: "ci/rehearse.sh".into(),
            reason: "line 2 runs `docker compose up -d`".into()
        }
    );
    let s = select_with_script(&view, None, Some(("ci/build.sh", b"docker build -t x .\n")));
    assert_eq!(s.source, Source::Default);
}

#[test]
fn names_and_serialisation_are_stable() {
    assert_eq!(
        "docker-compose".parse::<RuntimeKind>(),
        Ok(RuntimeKind::DockerCompose)
    );
    assert_eq!(RuntimeKind::Standard.to_string(), "standard");
    let err = "kubernetes".parse::<RuntimeKind>().expect_err("unknown");
    assert_eq!(
        err.to_string(),
        "unknown runtime `kubernetes`: expected `standard` or `docker-compose`"
    );
    let v = serde_json::to_value(sel("compose-root")).expect("json");
    assert_eq!(
        v,
        serde_json::json!({"runtime": "docker-compose", "source": "evidence", "truncated": false,
            "evidence": [{"file": "compose.yaml", "reason": "defines services"}]})
    );
}

#[test]
fn caps_bound_the_inspection_and_say_so() {
    // One file read: requirements-dev.txt (shallowest, then by name); requirements.txt is not.
    let limits = Limits {
        max_files: 1,
        ..Limits::default()
    };
    let s = select(&DirView::new(fixture("tc-requirements")), None, &limits);
    assert!(s.truncated && s.evidence.len() == 1, "{s:?}");
    // The total byte cap counts too: settings.json (setup script) fits, nothing after it.
    let limits = Limits {
        max_total_bytes: 120,
        ..Limits::default()
    };
    let s = select(&DirView::new(fixture("script-localstack")), None, &limits);
    assert!(s.truncated && s.evidence.len() == 1, "{s:?}");
    // A per-file cap that cuts the dependency line off.
    let limits = Limits {
        max_file_bytes: 30,
        ..Limits::default()
    };
    let s = select(&DirView::new(fixture("tc-requirements")), None, &limits);
    assert!(s.truncated && s.evidence.is_empty(), "{s:?}");
    // The entry cap stops the listing.
    let limits = Limits {
        max_entries: 1,
        ..Limits::default()
    };
    let s = select(&DirView::new(fixture("supabase-nested")), None, &limits);
    assert!(s.truncated && s.evidence.is_empty(), "{s:?}");
    // A reference chain deeper than max_depth stops there.
    let limits = Limits {
        max_depth: 0,
        ..Limits::default()
    };
    let s = select(&DirView::new(fixture("script-ref")), None, &limits);
    assert!(s.truncated && s.evidence.is_empty(), "{s:?}");
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dwselect")
        .tempdir_in("/tmp")
        .expect("tempdir")
}

#[test]
fn dir_view_never_reads_through_symlinks_or_fifos() {
    let dir = tempdir();
    let outside = tempdir();
    std::fs::write(
        outside.path().join("compose.yaml"),
        "services:\n  x:\n    image: y\n",
    )
    .expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("compose.yaml"),
        dir.path().join("compose.yaml"),
    )
    .expect("link");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("supabase")).expect("link");
    std::fs::write(outside.path().join("config.toml"), "x").expect("write");
    nix::unistd::mkfifo(
        &dir.path().join("docker-compose.yml"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("fifo");
    let view = DirView::new(dir.path());
    assert_eq!(view.read("compose.yaml", 100).expect("read"), None);
    assert_eq!(view.read("supabase/config.toml", 100).expect("read"), None);
    assert_eq!(view.read("docker-compose.yml", 100).expect("read"), None);
    assert!(view.list(5, 100).expect("list").files.is_empty());
    let s = select(&view, None, &Limits::default());
    assert_eq!(s.source, Source::Default, "{s:?}");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
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

#[test]
fn git_view_reads_the_revision_not_the_worktree() {
    let dir = tempdir();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("README.md"), "x\n").expect("write");
    std::fs::write(d.join("big.txt"), "y".repeat(10_000)).expect("write");
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "one"]);
    let first = git(d, &["rev-parse", "HEAD"]);
    std::fs::create_dir_all(d.join("web/supabase")).expect("mkdir");
    std::fs::write(d.join("web/supabase/config.toml"), "project_id = \"w\"\n").expect("write");
    std::fs::write(
        d.join("compose.yaml"),
        "services:\n  db:\n    image: postgres\n",
    )
    .expect("write");
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "two"]);
    // Uncommitted: gone from the worktree, still in HEAD.
    std::fs::remove_file(d.join("compose.yaml")).expect("rm");

    let at_first = GitView::open(d, &first, None).expect("open");
    let s = select(&at_first, None, &Limits::default());
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::Standard, Source::Default),
        "{s:?}"
    );

    let head = GitView::open(d, "main", None).expect("open");
    let s = select(&head, None, &Limits::default());
    assert_eq!(
        (s.runtime, s.source),
        (RuntimeKind::DockerCompose, Source::Evidence),
        "{s:?}"
    );
    let files: Vec<&str> = s.evidence.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(files, ["compose.yaml", "web/supabase/config.toml"]);

    // A cut read of a big blob leaves the batch reader usable for the next one.
    let blob = head.read("big.txt", 100).expect("read").expect("blob");
    assert_eq!((blob.data.len(), blob.truncated), (100, true));
    let blob = head.read("README.md", 100).expect("read").expect("blob");
    assert_eq!((blob.data, blob.truncated), (b"x\n".to_vec(), false));
    assert_eq!(head.read("nope", 100).expect("read"), None);
    assert!(GitView::open(d, "no-such-rev", None).is_err());
}

/// The attack of issue 23: a workspace's repository with a promisor remote whose
/// `core.sshCommand` (and every other key and hook that runs a program) is the user's, and a
/// missing blob the selector reads, so git would fetch it lazily. Selection runs git as the
/// workspace uid and nothing in the repository runs at all.
#[test]
fn a_promisor_remote_with_ssh_command_runs_nothing_during_selection() {
    use crate::gitsafe::tests as g;
    if !g::root() {
        return;
    }
    let dir = g::tempdir();
    let m = g::Markers::new(dir.path());
    let repo = g::hostile_repo(dir.path(), "ws", &m, true);
    g::chown_r(&repo, g::TEST_UID);
    let view = GitView::open(&repo, "HEAD", Some((g::TEST_UID, g::TEST_UID))).expect("open");
    let listed = view.list(5, 100).expect("list");
    assert!(
        listed.files.iter().any(|f| f == "compose.yaml"),
        "{listed:?}"
    );
    // Missing and not fetched; the reader stays usable.
    assert_eq!(view.read("compose.yaml", 1000).expect("read"), None);
    let readme = view.read("README.md", 100).expect("read").expect("blob");
    assert_eq!(readme.data, b"hello\n");
    let _ = select(&view, None, &Limits::default());
    drop(view);
    assert_eq!(m.left(), Vec::<String>::new());

    // A service that does not isolate users reads its own repository as itself: the other
    // walls (no transport, no lazy fetch, overrides) hold alone.
    let own = g::hostile_repo(dir.path(), "own", &m, true);
    let view = GitView::open(&own, "v1", None).expect("open");
    assert_eq!(view.read("compose.yaml", 1000).expect("read"), None);
    assert!(view.list(5, 100).is_ok());
    drop(view);
    assert_eq!(m.left(), Vec::<String>::new());
}

/// The selection's git runs as the owner: a private repository of another uid is not read.
#[test]
fn git_view_runs_as_the_workspace_uid() {
    use crate::gitsafe::tests as g;
    if !g::root() {
        return;
    }
    let dir = g::tempdir();
    let d = dir.path().join("r");
    std::fs::create_dir(&d).expect("mkdir");
    git(&d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("compose.yaml"), "services: {}\n").expect("write");
    git(&d, &["add", "."]);
    git(&d, &["commit", "-qm", "one"]);
    g::chown_r(&d, g::TEST_UID);
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let view = GitView::open(&d, "HEAD", Some((g::TEST_UID, g::TEST_UID))).expect("open");
    assert!(view.read("compose.yaml", 100).expect("read").is_some());
    let err = GitView::open(&d, "HEAD", Some((g::OTHER_UID, g::OTHER_UID)))
        .err()
        .expect("another uid cannot read it");
    assert!(err.to_string().contains("unknown revision `HEAD`"), "{err}");
    // Root would read it, but git refuses a repository that is not its user's.
    let err = GitView::open(&d, "HEAD", None)
        .err()
        .expect("root is refused");
    assert!(err.to_string().contains("dubious ownership"), "{err}");
}

#[test]
fn shell_commands_are_classified_by_what_they_reach() {
    use shell::Class::*;
    let cases: &[(&str, &[shell::Class])] = &[
        ("sudo -u app docker run x", &[Containers]),
        ("env -i PATH=/bin timeout 5 docker ps", &[Docker]),
        (
            "bash -ec 'docker compose up -d && docker compose logs'",
            &[Containers, Docker],
        ),
        ("echo \"$(docker ps -q)\"", &[Docker]),
        ("x=$(docker-compose ps -q) && echo $x", &[Docker]),
        (
            "DOCKER_HOST=unix:///run/docker.sock docker run x",
            &[Containers],
        ),
        ("DOCKER_HOST=$REMOTE docker run x", &[Remote]),
        (
            "export DOCKER_HOST=tcp://h:2375\ndocker run x\nunset DOCKER_HOST\ndocker run y",
            &[Remote, Containers],
        ),
        ("docker context use prod; docker compose up", &[Remote]),
        ("docker --context default compose up", &[Containers]),
        ("docker run -c 512 x", &[Containers]),
        (
            "docker compose build && docker compose push",
            &[BuildOnly, BuildOnly],
        ),
        (
            "docker image build . ; docker image ls",
            &[BuildOnly, Docker],
        ),
        (
            "supabase link --project-ref abc && supabase db push && supabase start",
            &[Containers],
        ),
        ("pnpm exec supabase functions serve", &[Containers]),
        ("lstk start; localstack --version", &[Containers]),
        ("docker run x > /tmp/log 2>&1 &", &[Containers]),
        ("#docker run\n  # docker run\nfoo # docker run", &[]),
        (
            "docker-composer install; dockerd; /usr/bin/docker ps",
            &[Docker],
        ),
        ("docker run a \\\n  -v x:y b", &[Containers]),
    ];
    for (text, want) in cases {
        let got: Vec<_> = shell::scan(text).hits.iter().map(|h| h.class).collect();
        assert_eq!(&got, want, "{text}");
    }
    let refs =
        shell::scan("sh scripts/a.sh; . ./env.sh; ./b.sh x; source $HOME/c.sh; /usr/bin/d.sh").refs;
    assert_eq!(refs, ["scripts/a.sh", "./env.sh", "./b.sh"]);
}
