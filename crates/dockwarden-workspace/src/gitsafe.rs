//! Git on repositories whose content a workspace user controls: run as that user, and unable
//! to start any program the repository names (transport, lazy fetch, hooks, fsmonitor, pager).
//!
//! A repository's `.git/config` and hooks are the user's: `core.sshCommand` with a promisor
//! remote runs on the first missing object, `core.fsmonitor` on any index read. So there are
//! two walls, each enough alone against that config:
//!
//! - **Who runs it.** [`on_repo`] runs git as the workspace uid (gid = uid, no supplementary
//!   groups; std's `uid()` clears them when the service is root), from a thread that set
//!   `PR_SET_NO_NEW_PRIVS`: whatever git might start runs as the user it belongs to and can
//!   gain nothing by exec. Running as the owner also means git's own ownership check
//!   (`safe.directory`) is met without trusting every directory, so it is not passed.
//! - **What it may start.** No transport at all (`GIT_ALLOW_PROTOCOL` empty: the environment
//!   overrides a repository's `protocol.<name>.allow`, which `-c protocol.allow=never` would
//!   not), no lazy fetch (`GIT_NO_LAZY_FETCH`), no system or global config, the service's
//!   environment cleared, and [`OVERRIDES`] on the command line (read last, so they beat the
//!   repository's single-valued keys).
//!
//! Callers run only plumbing that reads objects (`rev-parse`, `ls-tree`, `cat-file --batch`
//! without `--filters`/`--textconv`): no index, no worktree, no filter or diff driver.

use std::ffi::OsStr;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The PATH of every git the service runs (the service's own is not passed on).
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A HOME with nothing in it: no `~/.gitconfig`, no `~/.ssh/config`.
pub const NO_HOME: &str = "/nonexistent";

/// Longest a git on a workspace repository lives: a FIFO where git expects a file (`HEAD`,
/// a loose object) would otherwise block the caller, and the verb waiting on it, for ever.
const DEADLINE_SECS: &str = "120";

/// `-c` settings for git on a workspace repository. Each names a key that can run a program;
/// most are only reachable through a transport (already off), they are here so that no
/// single setting is the only wall. Multi-valued keys whose first value wins (`core.gitProxy`)
/// cannot be overridden this way: only the transport being off stops them.
pub const OVERRIDES: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.sshCommand=false",
    "core.askPass=",
    "core.pager=cat",
    "core.editor=false",
    "core.alternateRefsCommand=true",
    "credential.helper=",
    "diff.external=",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "protocol.file.allow=never",
    "protocol.git.allow=never",
    "protocol.http.allow=never",
    "protocol.https.allow=never",
    "protocol.ssh.allow=never",
    "protocol.ext.allow=never",
];

/// The environment of every git the service runs: none of the service's own variables (no
/// `GIT_DIR`, `GIT_SSH_COMMAND`, `GIT_ASKPASS`, `SSH_ASKPASS`, `GIT_EXEC_PATH`, ...), no system
/// or global config, no prompt, no lazy fetch, only the transports in `protocols`
/// (colon-separated; empty: none).
pub fn environment(cmd: &mut Command, home: &OsStr, protocols: &str) {
    cmd.env_clear()
        .env("PATH", PATH)
        .env("LC_ALL", "C")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_ALLOW_PROTOCOL", protocols)
        .env("GIT_OPTIONAL_LOCKS", "0");
}

/// `git -C <repo>` for reading a repository whose content a workspace user controls, as
/// `owner` (uid, gid) when the service isolates users, else as the service itself (which is
/// then no more privileged than the user). Bounded by a deadline (`timeout(1)`: SIGKILL to git;
/// a TERM sent to it by [`stop`] is passed on). Start it with [`spawn`] or [`output`].
pub fn on_repo(repo: &Path, owner: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.args(["--signal=KILL", "--kill-after=2", DEADLINE_SECS, "git"]);
    cmd.arg("-C").arg(repo);
    for o in OVERRIDES {
        cmd.args(["-c", o]);
    }
    environment(&mut cmd, OsStr::new(NO_HOME), "");
    cmd.env("GIT_NO_REPLACE_OBJECTS", "1");
    // Discovery stops at the repository: a `.git` removed under the caller does not send
    // git up into the (root-owned) state directory.
    if let Some(parent) = std::path::absolute(repo)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        cmd.env("GIT_CEILING_DIRECTORIES", parent);
    }
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
    cmd.current_dir("/").stdin(Stdio::null());
    cmd
}

/// Starts `cmd` from a short-lived thread that set `PR_SET_NO_NEW_PRIVS` first: the child
/// inherits it, so no setuid or file-capability program it execs gains anything, and the
/// service's own threads keep their attribute unchanged.
pub fn spawn(cmd: &mut Command) -> io::Result<Child> {
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)?;
            cmd.spawn()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("git spawn thread panicked")))
    })
}

/// [`spawn`], then all of its output (stdout and stderr piped).
pub fn output(cmd: &mut Command) -> io::Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    spawn(cmd)?.wait_with_output()
}

/// Ends a child started by [`spawn`] that is not needed any more: TERM (passed on to git by
/// `timeout`), then reaps it. The child is not reaped yet, so its pid is still its own.
pub fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait()
        && let Ok(pid) = i32::try_from(child.id())
    {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = child.wait();
}

/// The first line git wrote to stderr, for an error message.
pub fn first_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
pub(crate) mod tests;
