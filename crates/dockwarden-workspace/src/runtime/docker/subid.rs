//! Container root is not host root: each docker-compose workspace's private dockerd runs with
//! `userns-remap`, so its containers live in a user namespace where uid 0 is the workspace's
//! own uid and uids 1..65535 are a subordinate range of the workspace alone
//! (`docs/isolation.md`).
//!
//! dockerd reads the mapping from the host's account files: it resolves the remap user in
//! `/etc/passwd` and `/etc/group` and takes its ranges from `/etc/subuid` and `/etc/subgid`
//! in file order (Engine 20.10 by name, 26.1 by uid first, then name). So each workspace gets
//! an account `dw<uid>` (no login shell, no home) and, in this order, the ranges
//! `dw<uid>:<uid>:1` (container 0 → the workspace uid) and `dw<uid>:<base>:65535`
//! (container 1..65535 → `base..base+65535`).
//!
//! INVARIANT: subordinate ranges never overlap: `base = 2^31 + (uid mod 2^15) * 2^16`, so uids
//! that differ by less than 2^15 get disjoint ranges, all above every ordinary uid. Before an
//! account is written, every other account's range in `/etc/subuid` and `/etc/subgid` is
//! checked against ours and against the workspace uid; an overlap is refused, never written.
//! INVARIANT: the files are changed under the shadow-utils lock (`/etc/.pwd.lock`, the fcntl
//! lock `lckpwdf` takes) and a process-wide mutex, each written whole to a temporary file and
//! renamed over the original with its mode and owner kept; only lines of `dw<uid>` are added
//! or removed.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// First host id of the subordinate ranges.
pub const SUB_BASE: u32 = 1 << 31;
/// Ids in one workspace's subordinate range (container ids 1..=65535).
pub const SUB_LEN: u32 = 65_535;
/// Workspace uids this many apart share a range slot; the service's uid range must be smaller.
pub const SLOTS: u32 = 1 << 15;

/// The ranges of one workspace, host side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranges {
    /// The workspace's uid (and gid): what container uid 0 maps to.
    pub uid: u32,
    pub gid: u32,
    /// First host id of container ids 1..=65535.
    pub base: u32,
}

impl Ranges {
    /// Pure: the ranges of the workspace with `uid`/`gid`.
    pub fn of(uid: u32, gid: u32) -> Ranges {
        Ranges {
            uid,
            gid,
            base: SUB_BASE + (uid % SLOTS) * (SUB_LEN + 1),
        }
    }

    /// The account name dockerd is told to remap to.
    pub fn name(&self) -> String {
        format!("dw{}", self.uid)
    }

    /// `START:COUNT` of the host ids container users other than root map to (what
    /// chown-back hands back to the workspace user besides uid 0).
    pub fn hand_back_range(&self) -> Option<dockwarden_proxy::hostfs::watch::IdRange> {
        dockwarden_proxy::hostfs::watch::IdRange::new(self.base, SUB_LEN)
    }

    /// The container's view as `(container, host, len)` triples, as dockerd builds it.
    pub fn uid_map(&self) -> [(u32, u32, u32); 2] {
        [(0, self.uid, 1), (1, self.base, SUB_LEN)]
    }
}

/// Where the account files are (the host's `/etc`; a temporary directory in tests).
#[derive(Debug, Clone)]
pub struct Files {
    pub dir: PathBuf,
}

impl Default for Files {
    fn default() -> Self {
        Files {
            dir: PathBuf::from("/etc"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubidError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error(
        "{file}: `{line}` overlaps the ids of workspace uid {uid} ({what}); \
         a workspace's container ids must belong to it alone: remove that range or move the \
         service's uid range (`serve --uid-base`)"
    )]
    Overlap {
        file: String,
        line: String,
        uid: u32,
        what: &'static str,
    },
    #[error("{file}: an account `{name}` exists with other ids (`{line}`); refusing to reuse it")]
    Foreign {
        file: String,
        name: String,
        line: String,
    },
}

static LOCK: Mutex<()> = Mutex::new(());

fn io(file: &Path) -> impl Fn(std::io::Error) -> SubidError + '_ {
    move |source| SubidError::Io {
        file: file.display().to_string(),
        source,
    }
}

/// Holds the shadow-utils lock (`lckpwdf`'s fcntl write lock on `.pwd.lock`) while alive.
struct PwdLock {
    _file: std::fs::File,
}

impl PwdLock {
    fn take(dir: &Path) -> Result<PwdLock, SubidError> {
        let path = dir.join(".pwd.lock");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        let lock = libc::flock {
            l_type: libc::F_WRLCK as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: 0,
            l_len: 0,
            l_pid: 0,
        };
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETLKW(&lock)).map_err(|e| {
            SubidError::Io {
                file: path.display().to_string(),
                source: e.into(),
            }
        })?;
        Ok(PwdLock { _file: file })
    }
}

/// Pure: the lines of `r` in each file, in the order they must appear.
fn lines_of(r: &Ranges) -> [(&'static str, Vec<String>); 4] {
    let n = r.name();
    [
        (
            "passwd",
            vec![format!(
                "{n}:x:{}:{}:dockwarden workspace:/nonexistent:/usr/sbin/nologin",
                r.uid, r.gid
            )],
        ),
        ("group", vec![format!("{n}:x:{}:", r.gid)]),
        (
            "subuid",
            vec![
                format!("{n}:{}:1", r.uid),
                format!("{n}:{}:{SUB_LEN}", r.base),
            ],
        ),
        (
            "subgid",
            vec![
                format!("{n}:{}:1", r.gid),
                format!("{n}:{}:{SUB_LEN}", r.base),
            ],
        ),
    ]
}

/// Pure: refuses a subordinate range of another account that overlaps `[start, start+len)`.
fn check_ranges(
    file: &str,
    text: &str,
    name: &str,
    ours: &[(u32, u64, &'static str)],
) -> Result<(), SubidError> {
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut parts = t.split(':');
        let (Some(owner), Some(start), Some(len)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if owner == name {
            continue;
        }
        let (Ok(start), Ok(len)) = (start.parse::<u64>(), len.parse::<u64>()) else {
            continue;
        };
        for &(s, l, what) in ours {
            let s = u64::from(s);
            if start < s + l && s < start + len {
                return Err(SubidError::Overlap {
                    file: file.into(),
                    line: t.into(),
                    uid: 0,
                    what,
                });
            }
        }
    }
    Ok(())
}

/// Pure: an existing line for `name` in passwd/group must be exactly ours.
fn check_account(file: &str, text: &str, name: &str, want: &[String]) -> Result<(), SubidError> {
    for line in text.lines() {
        if line.split(':').next() == Some(name) && !want.iter().any(|w| w == line) {
            return Err(SubidError::Foreign {
                file: file.into(),
                name: name.into(),
                line: line.into(),
            });
        }
    }
    Ok(())
}

/// Pure: `text` with `add` appended (those lines not present already) and every other line
/// of `name` that is not in `add` removed. `add` empty removes the account.
fn edited(text: &str, name: &str, add: &[String]) -> String {
    let prefix = format!("{name}:");
    let mut out = String::with_capacity(text.len() + 128);
    for line in text.lines() {
        if line.starts_with(&prefix) && !add.iter().any(|a| a == line) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    for a in add {
        if !out.lines().any(|l| l == a) {
            out.push_str(a);
            out.push('\n');
        }
    }
    out
}

fn read(path: &Path) -> Result<String, SubidError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io(path)(e)),
    }
}

/// Replaces `path` by `text` atomically, keeping its mode and owner (0644 root when new).
fn write(path: &Path, text: &str) -> Result<(), SubidError> {
    let (mode, uid, gid) = match std::fs::metadata(path) {
        Ok(m) => (m.mode() & 0o7777, m.uid(), m.gid()),
        Err(_) => (0o644, 0, 0),
    };
    let tmp = path.with_extension("dockwarden-new");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).map_err(io(&tmp))?;
    nix::unistd::chown(&tmp, Some(uid.into()), Some(gid.into())).map_err(|e| SubidError::Io {
        file: tmp.display().to_string(),
        source: e.into(),
    })?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

impl Files {
    /// Adds (or confirms) the account and ranges of `r`; idempotent.
    pub fn ensure(&self, r: &Ranges) -> Result<(), SubidError> {
        let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let _l = PwdLock::take(&self.dir)?;
        let name = r.name();
        let plan = lines_of(r);
        let mut texts = Vec::new();
        for (file, lines) in &plan {
            let path = self.dir.join(file);
            let text = read(&path)?;
            match *file {
                "passwd" | "group" => check_account(file, &text, &name, lines)?,
                _ => {
                    let id = if *file == "subuid" { r.uid } else { r.gid };
                    let ours = [
                        (id, 1, "the workspace's own id"),
                        (r.base, u64::from(SUB_LEN), "its subordinate range"),
                    ];
                    check_ranges(file, &text, &name, &ours).map_err(|e| match e {
                        SubidError::Overlap {
                            file, line, what, ..
                        } => SubidError::Overlap {
                            file,
                            line,
                            uid: r.uid,
                            what,
                        },
                        e => e,
                    })?;
                }
            }
            texts.push((path, text));
        }
        for ((path, text), (_, lines)) in texts.iter().zip(plan.iter()) {
            let new = edited(text, &name, lines);
            if &new != text {
                write(path, &new)?;
            }
        }
        Ok(())
    }

    /// Removes the account and ranges of the workspace with `uid`; idempotent.
    pub fn remove(&self, uid: u32) -> Result<(), SubidError> {
        let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let _l = PwdLock::take(&self.dir)?;
        let name = Ranges::of(uid, uid).name();
        for file in ["subgid", "subuid", "group", "passwd"] {
            let path = self.dir.join(file);
            let text = read(&path)?;
            let new = edited(&text, &name, &[]);
            if new != text {
                write(&path, &new)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (tempfile::TempDir, Files) {
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(d.path().join("passwd"), "root:x:0:0:root:/root:/bin/bash\n")
            .expect("passwd");
        std::fs::write(d.path().join("group"), "root:x:0:\n").expect("group");
        std::fs::write(d.path().join("subuid"), "user:100000:65536\n").expect("subuid");
        let f = Files {
            dir: d.path().to_path_buf(),
        };
        (d, f)
    }

    #[test]
    fn ranges_of_uids_closer_than_the_slot_count_never_overlap_and_stay_below_the_invalid_id() {
        let a = Ranges::of(43_000, 43_000);
        let b = Ranges::of(43_001, 43_001);
        assert_eq!(a.base + SUB_LEN, b.base - 1, "adjacent slots, one id apart");
        let last = Ranges::of(SLOTS - 1, 0);
        assert_eq!(
            u64::from(last.base) + u64::from(SUB_LEN) - 1,
            u64::from(u32::MAX) - 1
        );
        assert_eq!(
            Ranges::of(7, 7).uid_map(),
            [(0, 7, 1), (1, SUB_BASE + 7 * 65_536, 65_535)]
        );
        assert_eq!(
            Ranges::of(7, 7).hand_back_range(),
            dockwarden_proxy::hostfs::watch::IdRange::new(SUB_BASE + 7 * 65_536, 65_535)
        );
    }

    #[test]
    fn ensure_writes_the_account_and_ranges_in_order_once_and_remove_takes_only_them() {
        let (d, f) = files();
        let r = Ranges::of(43_210, 43_210);
        f.ensure(&r).expect("ensure");
        f.ensure(&r).expect("idempotent");
        let sub = std::fs::read_to_string(d.path().join("subuid")).expect("subuid");
        assert_eq!(
            sub,
            format!(
                "user:100000:65536\ndw43210:43210:1\ndw43210:{}:65535\n",
                r.base
            )
        );
        let gid = std::fs::read_to_string(d.path().join("subgid")).expect("subgid");
        assert_eq!(gid, format!("dw43210:43210:1\ndw43210:{}:65535\n", r.base));
        let pw = std::fs::read_to_string(d.path().join("passwd")).expect("passwd");
        assert!(
            pw.ends_with(
                "dw43210:x:43210:43210:dockwarden workspace:/nonexistent:/usr/sbin/nologin\n"
            ),
            "{pw}"
        );
        assert_eq!(pw.matches("dw43210:").count(), 1);
        f.remove(43_210).expect("remove");
        assert_eq!(
            std::fs::read_to_string(d.path().join("subuid")).expect("subuid"),
            "user:100000:65536\n"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("passwd")).expect("pw"),
            "root:x:0:0:root:/root:/bin/bash\n"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("group")).expect("group"),
            "root:x:0:\n"
        );
    }

    #[test]
    fn another_accounts_range_over_the_workspace_uid_or_its_range_is_refused_and_nothing_written() {
        let (d, f) = files();
        // `user:100000:65536` covers uid 120000.
        let e = f
            .ensure(&Ranges::of(120_000, 120_000))
            .expect_err("overlap");
        assert!(
            matches!(
                e,
                SubidError::Overlap {
                    what: "the workspace's own id",
                    ..
                }
            ),
            "{e}"
        );
        let r = Ranges::of(43_210, 43_210);
        std::fs::write(
            d.path().join("subuid"),
            format!("other:{}:10\n", r.base + 5),
        )
        .expect("subuid");
        let e = f.ensure(&r).expect_err("overlap");
        assert!(
            matches!(
                e,
                SubidError::Overlap {
                    what: "its subordinate range",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            !std::fs::read_to_string(d.path().join("passwd"))
                .expect("pw")
                .contains("dw43210")
        );
    }

    #[test]
    fn an_existing_account_of_that_name_with_other_ids_is_not_taken_over() {
        let (d, f) = files();
        std::fs::write(d.path().join("passwd"), "dw43210:x:0:0::/root:/bin/bash\n").expect("pw");
        let e = f.ensure(&Ranges::of(43_210, 43_210)).expect_err("foreign");
        assert!(matches!(e, SubidError::Foreign { .. }), "{e}");
    }
}
