//! cgroupfs v1 and v2: where a cgroup's files are, writing them (with the v1 memory/swap
//! order), enabling v2 controllers, listing and removing a cgroup tree, and starting a
//! process inside a cgroup. Nothing here knows what the limits mean: the proxy's shared
//! budget (`dockwarden_proxy::limits`) and the workspace sizes
//! (`dockwarden_workspace::resources::cgroup`) decide the values.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Where the machine mounts its cgroup hierarchy.
pub const ROOT: &str = "/sys/fs/cgroup";

/// Which cgroup hierarchy, and where it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// `<root>/<controller>/<name>`.
    V1 { root: PathBuf },
    /// `<root>/<name>`.
    V2 { root: PathBuf },
}

impl Hierarchy {
    /// The hierarchy mounted at `root`: v2 when it is cgroup2, v1 when it has a `memory`
    /// controller directory; `None` otherwise.
    pub fn detect_at(root: &Path) -> Option<Hierarchy> {
        let root = root.to_owned();
        if root.join("cgroup.controllers").exists() {
            Some(Hierarchy::V2 { root })
        } else if root.join("memory").join("memory.limit_in_bytes").exists() {
            Some(Hierarchy::V1 { root })
        } else {
            None
        }
    }

    /// The hierarchy of this machine ([`ROOT`]).
    pub fn detect() -> Option<Hierarchy> {
        Self::detect_at(Path::new(ROOT))
    }

    /// Directory of cgroup `name` for `controller` (ignored on v2).
    pub fn dir(&self, name: &str, controller: &str) -> PathBuf {
        match self {
            Hierarchy::V1 { root } => root.join(controller).join(name),
            Hierarchy::V2 { root } => root.join(name),
        }
    }

    /// The directories of cgroup `name`: one per v1 controller in `controllers`, or the one
    /// v2 directory.
    pub fn dirs(&self, name: &str, controllers: &[&str]) -> Vec<PathBuf> {
        match self {
            Hierarchy::V1 { .. } => controllers.iter().map(|c| self.dir(name, c)).collect(),
            Hierarchy::V2 { .. } => vec![self.dir(name, "")],
        }
    }

    /// Moves the calling thread into cgroup `name` (v1: `tasks` of every controller in
    /// `controllers`). A process forked by this thread starts inside it. v2 domain cgroups
    /// take whole processes only: see [`Hierarchy::move_process`].
    pub fn join_current_thread(&self, name: &str, controllers: &[&str]) -> io::Result<()> {
        let tid = nix::unistd::gettid().to_string();
        match self {
            Hierarchy::V1 { .. } => {
                for d in self.dirs(name, controllers) {
                    write(&d.join("tasks"), &tid)?;
                }
                Ok(())
            }
            Hierarchy::V2 { .. } => Err(io::Error::other("v2 moves processes, not threads")),
        }
    }

    /// Moves a whole process into cgroup `name` (`cgroup.procs`).
    pub fn move_process(&self, name: &str, controllers: &[&str], pid: u32) -> io::Result<()> {
        for d in self.dirs(name, controllers) {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Spawns with `spawn` so that the new process starts inside cgroup `name`. v1: from a
    /// short-lived thread that joined the cgroup first, so nothing runs outside it. v2: the
    /// process is moved right after the fork.
    pub fn spawn_joined<T: Send>(
        &self,
        name: &str,
        controllers: &[&str],
        spawn: impl FnOnce() -> io::Result<T> + Send,
        pid_of: impl Fn(&T) -> Option<u32>,
    ) -> io::Result<T> {
        match self {
            Hierarchy::V1 { .. } => {
                let handle = tokio::runtime::Handle::try_current().ok();
                std::thread::scope(|s| {
                    s.spawn(|| {
                        let _ctx = handle.as_ref().map(|h| h.enter());
                        self.join_current_thread(name, controllers)?;
                        spawn()
                    })
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("cgroup spawn thread panicked")))
                })
            }
            Hierarchy::V2 { .. } => {
                let child = spawn()?;
                if let Some(pid) = pid_of(&child) {
                    self.move_process(name, controllers, pid)?;
                }
                Ok(child)
            }
        }
    }
}

/// The freezer's view of a cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freezer {
    Thawed,
    /// Asked to freeze; some tasks are not stopped yet (v1 `FREEZING`, v2 `frozen 0`).
    Freezing,
    Frozen,
}

impl Hierarchy {
    /// The file that freezes cgroup `name`: v1 `freezer/<name>/freezer.state`, v2
    /// `<name>/cgroup.freeze`.
    fn freeze_file(&self, name: &str) -> PathBuf {
        match self {
            Hierarchy::V1 { .. } => self.dir(name, "freezer").join("freezer.state"),
            Hierarchy::V2 { .. } => self.dir(name, "").join("cgroup.freeze"),
        }
    }

    /// Whether cgroup `name` can be frozen (it has a freezer).
    pub fn can_freeze(&self, name: &str) -> bool {
        self.freeze_file(name).exists()
    }

    /// Asks the kernel to freeze every task of cgroup `name` and of its descendants. The
    /// freeze completes asynchronously: poll [`Hierarchy::freezer`] for `Frozen`.
    pub fn freeze(&self, name: &str) -> io::Result<()> {
        let value = match self {
            Hierarchy::V1 { .. } => "FROZEN",
            Hierarchy::V2 { .. } => "1",
        };
        write(&self.freeze_file(name), value)
    }

    /// Thaws cgroup `name` and its descendants; takes effect at once.
    pub fn thaw(&self, name: &str) -> io::Result<()> {
        let value = match self {
            Hierarchy::V1 { .. } => "THAWED",
            Hierarchy::V2 { .. } => "0",
        };
        write(&self.freeze_file(name), value)
    }

    /// Where cgroup `name` stands.
    pub fn freezer(&self, name: &str) -> io::Result<Freezer> {
        match self {
            Hierarchy::V1 { .. } => {
                let state = std::fs::read_to_string(self.freeze_file(name))?;
                Ok(parse_v1_freezer(&state))
            }
            Hierarchy::V2 { .. } => {
                let asked = read_u64(&self.freeze_file(name)) == Some(1);
                let frozen = keyed(&self.dir(name, "").join("cgroup.events"), "frozen") == Some(1);
                Ok(match (asked, frozen) {
                    (_, true) => Freezer::Frozen,
                    (true, false) => Freezer::Freezing,
                    (false, false) => Freezer::Thawed,
                })
            }
        }
    }
}

/// Pure: v1's `freezer.state` text.
pub fn parse_v1_freezer(state: &str) -> Freezer {
    match state.trim() {
        "FROZEN" => Freezer::Frozen,
        "FREEZING" => Freezer::Freezing,
        _ => Freezer::Thawed,
    }
}

/// Writes one cgroup file; the error names the file and the value.
pub fn write(path: &Path, value: &str) -> io::Result<()> {
    std::fs::write(path, value).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing `{value}` to {}: {e}", path.display()),
        )
    })
}

/// Writes v1's `memory.limit_in_bytes` and, when the kernel accounts swap, the
/// `memory.memsw.limit_in_bytes` beside it. memory+swap must stay >= memory: lowering
/// writes memory first, raising writes swap first.
pub fn write_v1_memory(limit: &Path, value: &str) -> io::Result<()> {
    let memsw = limit.with_file_name("memory.memsw.limit_in_bytes");
    if !memsw.exists() {
        return write(limit, value);
    }
    write(limit, value)
        .and_then(|()| write(&memsw, value))
        .or_else(|_| write(&memsw, value).and_then(|()| write(limit, value)))
}

/// v2: enables `controllers` for the children of `dir` (`cgroup.subtree_control`), each
/// only when it is not on already.
pub fn enable_controllers(dir: &Path, controllers: &[&str]) -> io::Result<()> {
    let ctl = dir.join("cgroup.subtree_control");
    let have = std::fs::read_to_string(&ctl).unwrap_or_default();
    for c in controllers {
        if !have.split_whitespace().any(|x| x == *c) {
            write(&ctl, &format!("+{c}"))?;
        }
    }
    Ok(())
}

/// A file holding one number (`pids.current`, `memory.max`, ...). `max` reads as `None`.
pub fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// One value of a `key value` file (`cpu.stat`, `memory.events`, `memory.oom_control`).
pub fn keyed(p: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(p).ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key)).then(|| it.next()?.parse().ok())?
    })
}

/// Every directory of cgroup `name` under `root`, whatever the layout: `<root>/<name>` (v2)
/// and `<root>/<hierarchy>/<name>` for every mounted v1 hierarchy (a daemon makes its
/// cgroup parent on all of them). Only those that exist.
pub fn every_dir(root: &Path, name: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root.join(name)];
    if let Ok(rd) = std::fs::read_dir(root) {
        dirs.extend(rd.flatten().map(|e| e.path().join(name)));
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Pure: the pids of a `cgroup.procs` text, without `own` (a service never kills itself:
/// one of its threads may be in a cgroup for a moment while it spawns).
pub fn parse_procs(text: &str, own: i32) -> Vec<i32> {
    text.lines()
        .filter_map(|l| l.trim().parse::<i32>().ok())
        .filter(|p| *p > 0 && *p != own)
        .collect()
}

/// Every process in `dirs` or any cgroup beneath them, except the calling process.
pub fn procs_beneath(dirs: Vec<PathBuf>) -> BTreeSet<i32> {
    let own = std::process::id() as i32;
    let mut out = BTreeSet::new();
    let mut stack = dirs;
    while let Some(d) = stack.pop() {
        if let Ok(text) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(parse_procs(&text, own));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

/// Removes a cgroup directory and its child cgroups, deepest first (cgroupfs only allows
/// `rmdir`, and only of an empty cgroup). A missing directory is fine; a symlink is never
/// followed.
pub fn remove_tree(d: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(d) {
        Ok(m) if m.is_dir() => {}
        _ => return Ok(()),
    }
    if let Ok(entries) = std::fs::read_dir(d) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path())?;
            }
        }
    }
    match std::fs::remove_dir(d) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caller_is_never_listed() {
        assert_eq!(parse_procs("12\n700\n\n 31 \nx\n0\n", 700), vec![12, 31]);
        assert_eq!(parse_procs("", 1), Vec::<i32>::new());
    }

    #[test]
    fn keyed_and_numbers() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = d.path().join("memory.events");
        std::fs::write(&f, "low 0\nmax 7\noom_kill 2\n").expect("seed");
        assert_eq!(keyed(&f, "max"), Some(7));
        assert_eq!(keyed(&f, "oom"), None);
        std::fs::write(&f, "max\n").expect("seed");
        assert_eq!(read_u64(&f), None);
    }

    #[test]
    fn v1_memory_is_raised_swap_first() {
        let d = tempfile::tempdir().expect("tempdir");
        let limit = d.path().join("memory.limit_in_bytes");
        std::fs::write(d.path().join("memory.memsw.limit_in_bytes"), "1").expect("seed");
        write_v1_memory(&limit, "4096").expect("writes");
        assert_eq!(read_u64(&limit), Some(4096));
        assert_eq!(
            read_u64(&d.path().join("memory.memsw.limit_in_bytes")),
            Some(4096)
        );
    }

    #[test]
    fn every_dir_finds_v1_and_v2_layouts_and_remove_tree_clears_them() {
        let root = tempfile::tempdir().expect("tempdir");
        for d in [
            "memory/ws_1/containers/x",
            "pids/ws_1",
            "ws_1/child",
            "cpu/other",
        ] {
            std::fs::create_dir_all(root.path().join(d)).expect("mkdir");
        }
        let mut dirs = every_dir(root.path(), "ws_1");
        dirs.sort();
        let want: Vec<PathBuf> = ["memory/ws_1", "pids/ws_1", "ws_1"]
            .iter()
            .map(|d| root.path().join(d))
            .collect();
        assert_eq!(dirs, want);
        for d in &dirs {
            remove_tree(d).expect("removes");
        }
        assert!(every_dir(root.path(), "ws_1").is_empty());
        assert!(root.path().join("cpu/other").is_dir());
    }

    #[test]
    fn freezer_files_per_layout() {
        let root = tempfile::tempdir().expect("tempdir");
        let v1 = Hierarchy::V1 {
            root: root.path().to_owned(),
        };
        assert!(!v1.can_freeze("ws_1"));
        let d = root.path().join("freezer/ws_1");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("freezer.state"), "THAWED\n").expect("seed");
        assert!(v1.can_freeze("ws_1"));
        v1.freeze("ws_1").expect("freeze");
        assert_eq!(read_u64(&d.join("freezer.state")), None);
        assert_eq!(v1.freezer("ws_1").expect("state"), Freezer::Frozen);
        v1.thaw("ws_1").expect("thaw");
        assert_eq!(v1.freezer("ws_1").expect("state"), Freezer::Thawed);
        assert_eq!(parse_v1_freezer("FREEZING\n"), Freezer::Freezing);

        let v2 = Hierarchy::V2 {
            root: root.path().to_owned(),
        };
        let d = root.path().join("ws_2");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("cgroup.freeze"), "0\n").expect("seed");
        std::fs::write(d.join("cgroup.events"), "populated 1\nfrozen 0\n").expect("seed");
        v2.freeze("ws_2").expect("freeze");
        assert_eq!(v2.freezer("ws_2").expect("state"), Freezer::Freezing);
        std::fs::write(d.join("cgroup.events"), "populated 1\nfrozen 1\n").expect("seed");
        assert_eq!(v2.freezer("ws_2").expect("state"), Freezer::Frozen);
    }

    #[test]
    fn detect_reads_the_layout() {
        let root = tempfile::tempdir().expect("tempdir");
        assert_eq!(Hierarchy::detect_at(root.path()), None);
        std::fs::create_dir_all(root.path().join("memory")).expect("mkdir");
        std::fs::write(root.path().join("memory/memory.limit_in_bytes"), "1").expect("seed");
        assert!(matches!(
            Hierarchy::detect_at(root.path()),
            Some(Hierarchy::V1 { .. })
        ));
        std::fs::write(root.path().join("cgroup.controllers"), "memory").expect("seed");
        assert!(matches!(
            Hierarchy::detect_at(root.path()),
            Some(Hierarchy::V2 { .. })
        ));
    }
}
