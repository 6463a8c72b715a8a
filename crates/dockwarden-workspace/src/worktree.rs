//! Preparing a workspace's directories: clone, ownership, and the home directory.

use std::fs;
use std::os::unix::fs::{PermissionsExt, lchown};
use std::path::{Path, PathBuf};

use crate::error::{WsError, WsResult};
use crate::gitsafe;

/// Creates the workspace directory (root-owned, so the user cannot replace the worktree
/// itself; group = the workspace gid with mode 0710, so other workspaces' users cannot
/// enter it) and a private home owned by the workspace user.
pub fn prepare_dirs(ws_dir: &Path, home: &Path, owner: Option<(u32, u32)>) -> WsResult<()> {
    fs::create_dir_all(ws_dir).map_err(|e| WsError::io(ws_dir, e))?;
    let mode = if owner.is_some() { 0o710 } else { 0o755 };
    fs::set_permissions(ws_dir, fs::Permissions::from_mode(mode))
        .map_err(|e| WsError::io(ws_dir, e))?;
    if let Some((_, gid)) = owner {
        lchown(ws_dir, Some(0), Some(gid)).map_err(|e| WsError::io(ws_dir, e))?;
    }
    fs::create_dir_all(home).map_err(|e| WsError::io(home, e))?;
    fs::set_permissions(home, fs::Permissions::from_mode(0o700))
        .map_err(|e| WsError::io(home, e))?;
    if let Some((uid, gid)) = owner {
        lchown(home, Some(uid), Some(gid)).map_err(|e| WsError::io(home, e))?;
    }
    Ok(())
}

/// Gives a freshly made tree (not yet reachable by the workspace user) to `owner`.
pub fn chown_tree(root: &Path, owner: Option<(u32, u32)>) -> WsResult<()> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    lchown(root, Some(uid), Some(gid)).map_err(|e| WsError::io(root, e))?;
    let meta = fs::symlink_metadata(root).map_err(|e| WsError::io(root, e))?;
    if meta.is_dir() {
        for ent in fs::read_dir(root).map_err(|e| WsError::io(root, e))? {
            let ent = ent.map_err(|e| WsError::io(root, e))?;
            chown_tree(&ent.path(), owner)?;
        }
    }
    Ok(())
}

/// Clones `repo` (a local path or URL) into `dest` and checks out `revision`.
///
/// The receiving side runs as the service, into a fresh directory no one else can write, with
/// `--no-local`: nothing of the source is copied or hard-linked as root (a hard-linked object
/// would be chowned to the new workspace with `chown_tree`, source and all), objects arrive as
/// a pack on a pipe. The sending side (`upload-pack`, which reads the source's own config and
/// `objects/info/alternates`) runs as the uid whose content a local source is
/// (`source_owner`): another workspace's repository can run nothing as root and read nothing
/// its owner cannot. No `safe.directory` is passed, so git itself still refuses to serve a
/// repository not owned by the uid it runs as. Both sides get `gitsafe::environment`: no
/// lazy fetch, no system or global config, and only the transport the source needs.
pub async fn clone(repo: &str, revision: Option<&str>, dest: &Path) -> WsResult<()> {
    let fail = |detail: String| WsError::Clone {
        repo: repo.to_string(),
        detail,
    };
    if repo.starts_with('-') || revision.is_some_and(|r| r.starts_with('-')) {
        return Err(fail(
            "repository and revision must not start with `-`".into(),
        ));
    }
    let dest_s = dest
        .to_str()
        .ok_or_else(|| fail("state directory path is not utf-8".into()))?;
    let source = local_path(repo);
    let mut args = vec!["clone", "--quiet", "--no-local"];
    let upload_pack = source.as_deref().and_then(source_owner).map(|(uid, gid)| {
        format!(
            "setpriv --reuid={uid} --regid={gid} --clear-groups --no-new-privs -- git upload-pack"
        )
    });
    if let Some(up) = &upload_pack {
        args.extend(["--upload-pack", up]);
    }
    args.extend(["--", repo, dest_s]);
    let reach = if source.is_some() {
        Reach::Local
    } else {
        Reach::Remote
    };
    git(&args, None, reach).await.map_err(fail)?;
    if let Some(rev) = revision {
        git(
            &["checkout", "--quiet", rev, "--"],
            Some(dest),
            Reach::Nothing,
        )
        .await
        .map_err(|e| fail(format!("revision `{rev}`: {e}")))?;
    }
    Ok(())
}

/// The path of a source git reads on this machine, as git tells one from a URL: `file://`, or
/// no `scheme://` and no `:` before the first `/` (`host:path` is ssh, `helper::x` a remote
/// helper).
pub(crate) fn local_path(repo: &str) -> Option<PathBuf> {
    if let Some(rest) = repo.strip_prefix("file://") {
        return Some(PathBuf::from(rest));
    }
    if repo.contains("://") {
        return None;
    }
    match (repo.find(':'), repo.find('/')) {
        (Some(colon), slash) if slash.is_none_or(|s| colon < s) => None,
        _ => Some(PathBuf::from(repo)),
    }
}

/// Who controls a local source, if not root: the deepest owner other than root among the
/// path's components (by `lstat`, so a symlink's owner counts), what it names and its `.git`.
/// That uid's gid is its passwd group, or the uid itself (a workspace's, as `Service::owner`).
/// `None` (all root's) is an operator's repository, served as the service.
pub(crate) fn source_owner(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let abs = std::path::absolute(path).ok()?;
    let mut owner = None;
    let mut prefix = PathBuf::new();
    for c in abs.components() {
        prefix.push(c);
        if let Ok(m) = fs::symlink_metadata(&prefix)
            && m.uid() != 0
        {
            owner = Some(m.uid());
        }
    }
    for m in [fs::metadata(&abs), fs::symlink_metadata(abs.join(".git"))] {
        if let Ok(m) = m
            && m.uid() != 0
        {
            owner = Some(m.uid());
        }
    }
    let uid = owner?;
    let gid = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or(uid, |u| u.gid.as_raw());
    Some((uid, gid))
}

/// What a git run by `clone` may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Nothing,
    /// A repository on this machine (`file`).
    Local,
    /// The transports an operator names a remote by (never `ext`, never a remote helper).
    Remote,
}

impl Reach {
    fn protocols(self) -> &'static str {
        match self {
            Reach::Nothing => "",
            Reach::Local => "file",
            Reach::Remote => "http:https:ssh:git",
        }
    }
}

/// git as the service on a repository it made (`dest`) or is making, in the hardened
/// environment with hooks and fsmonitor off. A remote source keeps the service's HOME and
/// agent (ssh keys, `known_hosts`) and proxy settings: the operator named it.
async fn git(args: &[&str], repo: Option<&Path>, reach: Reach) -> Result<(), String> {
    let mut cmd = std::process::Command::new("git");
    if let Some(repo) = repo {
        cmd.arg("-C").arg(repo);
    }
    cmd.args([
        "-c",
        "core.hooksPath=/dev/null",
        "-c",
        "core.fsmonitor=false",
    ])
    .args(args);
    let remote = reach == Reach::Remote;
    let home = std::env::var_os("HOME")
        .filter(|_| remote)
        .unwrap_or_else(|| gitsafe::NO_HOME.into());
    gitsafe::environment(&mut cmd, &home, reach.protocols());
    if remote {
        for var in PASSED_TO_REMOTE {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
    }
    cmd.current_dir("/").stdin(std::process::Stdio::null());
    let out = tokio::process::Command::from(cmd)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The service's variables a clone from a remote keeps.
const PASSED_TO_REMOTE: &[&str] = &[
    "SSH_AUTH_SOCK",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "all_proxy",
    "ALL_PROXY",
];
