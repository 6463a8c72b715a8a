//! Host-path facts: is a path beneath the workspace, with no symlink in any component?
//!
//! This walks the path one component at a time with `lstat`, starting from the canonical
//! workspace root, so a sibling such as `<ws>-evil` or a `..` never passes a string-prefix test.

use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path};

use crate::policy::facts::HostPathFact;

/// Resolves `path` (absolute, as the daemon will `path.Clean` it) against `workspace`.
pub fn resolve(workspace: &Path, path: &str, sockets: &[String]) -> HostPathFact {
    let cleaned = clean(path);
    if sockets.iter().any(|s| clean(s) == cleaned) {
        return HostPathFact::DockerSocket;
    }
    let Ok(rest) = Path::new(&cleaned).strip_prefix(workspace) else {
        return HostPathFact::Outside;
    };
    let mut cur = workspace.to_path_buf();
    for comp in rest.components() {
        let Component::Normal(name) = comp else { return HostPathFact::Outside };
        cur.push(name);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return HostPathFact::ThroughSymlink,
            Ok(m) if m.file_type().is_socket() => return HostPathFact::Unusable("a socket".into()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return HostPathFact::Missing,
            Err(e) => return HostPathFact::Unusable(e.to_string()),
        }
    }
    match std::fs::symlink_metadata(&cur) {
        Ok(m) => HostPathFact::Inside { is_dir: m.is_dir() },
        Err(e) => HostPathFact::Unusable(e.to_string()),
    }
}

/// Go's `path.Clean` for absolute paths: lexical, `..` at the root stays at the root.
pub fn clean(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_is_lexical_like_go() {
        assert_eq!(clean("/ws/../etc"), "/etc");
        assert_eq!(clean("/../../x//y/."), "/x/y");
        assert_eq!(clean("/"), "/");
    }

    #[test]
    fn siblings_symlinks_and_escapes_are_not_inside() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("data")).expect("mkdir");
        std::fs::create_dir_all(root.join("ws-evil")).expect("mkdir");
        std::os::unix::fs::symlink("/", ws.join("link")).expect("symlink");
        let w = |p: &Path| p.to_str().expect("utf8").to_owned();
        assert_eq!(resolve(&ws, &w(&ws.join("data")), &[]), HostPathFact::Inside { is_dir: true });
        assert_eq!(resolve(&ws, &w(&root.join("ws-evil")), &[]), HostPathFact::Outside);
        assert_eq!(resolve(&ws, &format!("{}/../ws-evil", w(&ws)), &[]), HostPathFact::Outside);
        assert_eq!(resolve(&ws, &w(&ws.join("link/etc")), &[]), HostPathFact::ThroughSymlink);
        assert_eq!(resolve(&ws, &w(&ws.join("nope/x")), &[]), HostPathFact::Missing);
        assert_eq!(resolve(&ws, "/var/run/docker.sock", &["/var/run/docker.sock".into()]), HostPathFact::DockerSocket);
    }
}
