//! Preparing a workspace's directories: clone, ownership, and the home directory.

use std::fs;
use std::os::unix::fs::{PermissionsExt, lchown};
use std::path::Path;

use crate::workspace::error::{WsError, WsResult};

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
/// Git runs as the service with a private global config that trusts the source repository
/// (which may belong to another user, for example another workspace); `-c` is not enough
/// because git clears it for the local `upload-pack`.
pub async fn clone(
    repo: &str,
    revision: Option<&str>,
    dest: &Path,
    scratch: &Path,
) -> WsResult<()> {
    let fail = |detail: String| WsError::Clone {
        repo: repo.to_string(),
        detail,
    };
    if repo.starts_with('-') || revision.is_some_and(|r| r.starts_with('-')) {
        return Err(fail(
            "repository and revision must not start with `-`".into(),
        ));
    }
    let config = scratch.join("clone.gitconfig");
    fs::write(&config, "[safe]\n\tdirectory = *\n").map_err(|e| WsError::io(&config, e))?;
    let result = clone_with(repo, revision, dest, &config).await;
    let _ = fs::remove_file(&config);
    result
}

async fn clone_with(
    repo: &str,
    revision: Option<&str>,
    dest: &Path,
    config: &Path,
) -> WsResult<()> {
    let fail = |detail: String| WsError::Clone {
        repo: repo.to_string(),
        detail,
    };
    let mut args: Vec<&str> = vec!["clone", "--quiet", "--", repo];
    let dest_s = dest
        .to_str()
        .ok_or_else(|| fail("state directory path is not utf-8".into()))?;
    args.push(dest_s);
    git(&args, None, config).await.map_err(fail)?;
    if let Some(rev) = revision {
        git(&["checkout", "--quiet", rev, "--"], Some(dest), config)
            .await
            .map_err(|e| fail(format!("revision `{rev}`: {e}")))?;
    }
    Ok(())
}

async fn git(args: &[&str], cwd: Option<&Path>, config: &Path) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_GLOBAL", config)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}
