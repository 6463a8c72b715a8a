//! What the selector reads a repository through: a directory tree or one git revision.
//!
//! Both views list regular files only and never follow a symlink: a worktree is the workspace
//! user's, and the (root) service must not read a FIFO, a device or a file outside it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use dockwarden_sys::beneath;
use nix::errno::Errno;

use crate::gitsafe;

/// Directories never listed: dependency and build trees, whose manifests are not the project's.
pub const SKIP_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "vendor",
    "bower_components",
    ".venv",
    "venv",
    ".tox",
    "__pycache__",
    "target",
];

/// Regular files of a tree, as `/`-separated paths relative to its root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub files: Vec<String>,
    /// The entry cap stopped the listing.
    pub truncated: bool,
}

/// A bounded read of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub data: Vec<u8>,
    /// The file is longer than what was read.
    pub truncated: bool,
}

/// A repository as the selector sees it.
pub trait RepoView {
    /// Regular files at most `max_components` path components deep, visiting at most
    /// `max_entries` tree entries.
    fn list(&self, max_components: usize, max_entries: usize) -> io::Result<Listing>;
    /// At most `max_bytes` of the regular file `path`; `None` if it is absent or not a regular
    /// file (a symlink, a directory, a submodule).
    fn read(&self, path: &str, max_bytes: usize) -> io::Result<Option<Blob>>;
}

fn skipped(name: &str) -> bool {
    SKIP_DIRS.contains(&name)
}

fn read_capped(r: impl Read, max: usize) -> io::Result<Blob> {
    let mut data = Vec::new();
    r.take(max as u64 + 1).read_to_end(&mut data)?;
    let truncated = data.len() > max;
    data.truncate(max);
    Ok(Blob { data, truncated })
}

/// A directory tree: fixtures, or a workspace's worktree.
#[derive(Debug, Clone)]
pub struct DirView {
    root: PathBuf,
}

impl DirView {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirView { root: root.into() }
    }
}

impl RepoView for DirView {
    fn list(&self, max_components: usize, max_entries: usize) -> io::Result<Listing> {
        let mut out = Listing::default();
        let mut queue = VecDeque::from([(String::new(), 1usize)]);
        let mut seen = 0usize;
        while let Some((dir, depth)) = queue.pop_front() {
            let mut entries: Vec<_> =
                std::fs::read_dir(self.root.join(&dir))?.collect::<Result<_, _>>()?;
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                seen += 1;
                if seen > max_entries {
                    out.truncated = true;
                    return Ok(out);
                }
                let Some(name) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let rel = if dir.is_empty() {
                    name.clone()
                } else {
                    format!("{dir}/{name}")
                };
                // file_type() does not follow symlinks: a symlink is neither.
                let ft = e.file_type()?;
                if ft.is_file() {
                    out.files.push(rel);
                } else if ft.is_dir() && depth < max_components && !skipped(&name) {
                    queue.push_back((rel, depth + 1));
                }
            }
        }
        Ok(out)
    }

    fn read(&self, path: &str, max_bytes: usize) -> io::Result<Option<Blob>> {
        let root = beneath::dir(&self.root)?;
        let fd = match beneath::path(&root, Path::new(path)) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EXDEV) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // Only a regular file is opened for reading: never a FIFO or a device node.
        let st = nix::sys::stat::fstat(&fd)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(None);
        }
        // Reopening the O_PATH descriptor reads the very inode that was checked.
        let file = File::open(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
        read_capped(file, max_bytes).map(Some)
    }
}

/// One git revision of a repository (a worktree or a bare repository).
///
/// Runs only plumbing that reads objects (`rev-parse`, `ls-tree`, `cat-file --batch`), as the
/// repository's owner and unable to start anything its configuration names
/// (`workspace::gitsafe`): the repository is the workspace user's.
pub struct GitView {
    repo: PathBuf,
    owner: Option<(u32, u32)>,
    commit: String,
    batch: Mutex<Option<Batch>>,
}

struct Batch {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Batch {
    fn drop(&mut self) {
        gitsafe::stop(&mut self.child);
    }
}

impl GitView {
    /// Resolves `rev` to a commit of `repo`, running git as `owner` (uid, gid; `None`: as the
    /// service, only where it does not isolate users); an unknown revision is an error here,
    /// not an empty repository later.
    pub fn open(
        repo: impl Into<PathBuf>,
        rev: &str,
        owner: Option<(u32, u32)>,
    ) -> io::Result<GitView> {
        let repo = repo.into();
        let spec = format!("{rev}^{{commit}}");
        let out = gitsafe::output(gitsafe::on_repo(&repo, owner).args([
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ]))?;
        let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || commit.is_empty() {
            let why = gitsafe::first_line(&out.stderr);
            let sep = if why.is_empty() { "" } else { ": " };
            return Err(io::Error::other(format!(
                "unknown revision `{rev}`{sep}{why}"
            )));
        }
        Ok(GitView {
            repo,
            owner,
            commit,
            batch: Mutex::new(None),
        })
    }

    /// The commit this view reads.
    pub fn commit(&self) -> &str {
        &self.commit
    }

    fn git(&self) -> Command {
        gitsafe::on_repo(&self.repo, self.owner)
    }

    fn spawn_batch(&self) -> io::Result<Batch> {
        let mut child = gitsafe::spawn(
            self.git()
                .args(["cat-file", "--batch"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        Ok(Batch {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }
}

impl RepoView for GitView {
    fn list(&self, max_components: usize, max_entries: usize) -> io::Result<Listing> {
        let mut child = gitsafe::spawn(
            self.git()
                .args(["ls-tree", "-r", "-z", "--full-tree", &self.commit])
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let mut r = BufReader::new(stdout);
        let mut out = Listing::default();
        let mut entry = Vec::new();
        let mut seen = 0usize;
        loop {
            entry.clear();
            if r.read_until(0, &mut entry)? == 0 {
                break;
            }
            seen += 1;
            if seen > max_entries {
                out.truncated = true;
                gitsafe::stop(&mut child);
                return Ok(out);
            }
            let entry = entry.strip_suffix(b"\0").unwrap_or(&entry);
            // "<mode> SP <type> SP <object> TAB <path>"; regular blobs only (no 120000 symlink,
            // no 160000 submodule).
            let Some(tab) = entry.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let (meta, path) = (&entry[..tab], &entry[tab + 1..]);
            let Ok(path) = std::str::from_utf8(path) else {
                continue;
            };
            let regular = meta.starts_with(b"100644 blob ") || meta.starts_with(b"100755 blob ");
            let shallow = path.split('/').count() <= max_components;
            let hidden = path.split('/').rev().skip(1).any(skipped);
            if regular && shallow && !hidden && !path.contains('\n') {
                out.files.push(path.to_string());
            }
        }
        let status = child.wait()?;
        if !status.success() {
            return Err(io::Error::other(format!("git ls-tree failed: {status}")));
        }
        Ok(out)
    }

    fn read(&self, path: &str, max_bytes: usize) -> io::Result<Option<Blob>> {
        if path.contains('\n') {
            return Ok(None);
        }
        let mut guard = self
            .batch
            .lock()
            .map_err(|_| io::Error::other("git batch lock poisoned"))?;
        if guard.is_none() {
            *guard = Some(self.spawn_batch()?);
        }
        let Some(b) = guard.as_mut() else {
            return Ok(None);
        };
        let res = batch_read(b, &self.commit, path, max_bytes);
        // After an error or a cut read the stream is out of step: start a fresh process next time.
        if !matches!(
            res,
            Ok(None)
                | Ok(Some(Blob {
                    truncated: false,
                    ..
                }))
        ) {
            *guard = None;
        }
        res
    }
}

fn batch_read(b: &mut Batch, commit: &str, path: &str, max: usize) -> io::Result<Option<Blob>> {
    writeln!(b.stdin, "{commit}:{path}")?;
    b.stdin.flush()?;
    let mut header = String::new();
    b.stdout.read_line(&mut header)?;
    let fields: Vec<&str> = header.split_whitespace().collect();
    let [_, kind, size] = fields[..] else {
        // "<name> missing" (or "ambiguous"): nothing follows.
        return Ok(None);
    };
    let size: usize = size
        .parse()
        .map_err(|_| io::Error::other("bad git cat-file header"))?;
    if kind != "blob" {
        let mut rest = Vec::new();
        (&mut b.stdout)
            .take(size as u64 + 1)
            .read_to_end(&mut rest)?;
        return Ok(None);
    }
    let want = size.min(max);
    let mut data = vec![0u8; want];
    b.stdout.read_exact(&mut data)?;
    if size > max {
        return Ok(Some(Blob {
            data,
            truncated: true,
        }));
    }
    let mut lf = [0u8; 1];
    b.stdout.read_exact(&mut lf)?;
    Ok(Some(Blob {
        data,
        truncated: false,
    }))
}
