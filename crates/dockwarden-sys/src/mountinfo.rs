//! `/proc/<pid>/mountinfo`: the one reader of the kernel's mount table, with its octal
//! escapes undone (`\040` space, `\011` tab, `\012` newline, `\134` backslash, and any other
//! `\ooo`).

use std::path::{Path, PathBuf};

/// One line of mountinfo (proc(5)): the fields dockwarden reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Field 1: the mount's id (later mounts have larger ids on one point).
    pub id: u64,
    /// Field 5: where it is mounted, unescaped.
    pub point: PathBuf,
    /// Field 6: per-mount options (`rw,nosuid,nodev,...`).
    pub options: String,
    /// The first field after ` - `: the filesystem type (`nsfs`, `overlay`, ...).
    pub fstype: String,
}

/// Pure: the mounts of a mountinfo text, in its order; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let f: Vec<&str> = head.split(' ').collect();
            Some(Mount {
                id: f.first()?.parse().ok()?,
                point: PathBuf::from(unescape(f.get(4)?)),
                options: (*f.get(5)?).to_owned(),
                fstype: tail.split(' ').next()?.to_owned(),
            })
        })
        .collect()
}

/// The mounts this process sees; empty when `/proc` cannot be read.
pub fn own() -> Vec<Mount> {
    parse(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// The mounts process `pid` sees (its mount namespace).
pub fn of(pid: u32) -> std::io::Result<Vec<Mount>> {
    Ok(parse(&std::fs::read_to_string(format!(
        "/proc/{pid}/mountinfo"
    ))?))
}

/// Pure: the mount points of `mounts` at `dir` or beneath it, deepest first, each once.
pub fn at_or_beneath(mounts: &[Mount], dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mounts
        .iter()
        .filter(|m| m.point.starts_with(dir))
        .map(|m| m.point.clone())
        .collect();
    out.sort_by(|a, b| b.as_os_str().len().cmp(&a.as_os_str().len()).then(a.cmp(b)));
    out.dedup();
    out
}

/// Pure: the mount points of `mounts` directly inside `dir` (one component below), each
/// once, in mount order.
pub fn children(mounts: &[Mount], dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for m in mounts {
        let direct = m
            .point
            .strip_prefix(dir)
            .is_ok_and(|rest| rest.components().count() == 1);
        if direct && !out.contains(&m.point) {
            out.push(m.point.clone());
        }
    }
    out
}

/// Pure: the topmost (last mounted) mount exactly at `point`.
pub fn at<'a>(mounts: &'a [Mount], point: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| m.point == point)
        .max_by_key(|m| m.id)
}

/// Pure: the mount `path` is on: the deepest mount point at or above it, the last one
/// mounted there.
pub fn containing<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| (m.point.components().count(), m.id))
}

/// Detaches every mount at or beneath `dir` this process sees, deepest first
/// (`MNT_DETACH`: a busy mount goes from the namespace at once and is freed when its last
/// user goes), never following a symlink in a mount point's last component. What a killed
/// daemon, a crashed create or a crashed service left mounted.
pub fn detach_beneath(dir: &Path) {
    use nix::mount::{MntFlags, umount2};
    for m in at_or_beneath(&own(), dir) {
        let _ = umount2(&m, MntFlags::MNT_DETACH | MntFlags::UMOUNT_NOFOLLOW);
    }
}

/// Undoes mountinfo's octal escapes.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:4 net:[4026532] /state/ws/a/netns rw shared:2 - nsfs nsfs rw
31 22 0:40 / /state/ws/a/pins/p\\0401 rw,nosuid,nodev - overlay overlay rw
32 31 0:41 / /state/ws/a/pins/p\\0401/deep rw - tmpfs tmpfs rw
33 22 0:42 / /state/ws/ab rw - tmpfs tmpfs rw
34 22 0:43 / /state/ws/a/netns ro shared:3 - nsfs nsfs rw
garbage line
";

    #[test]
    fn escapes_are_undone() {
        assert_eq!(unescape(r"/run/a\040b"), "/run/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape(r"/t\011\012"), "/t\t\n");
        assert_eq!(unescape("/plain\\04"), "/plain\\04");
    }

    #[test]
    fn lines_parse_with_their_type_and_options() {
        let m = parse(TEXT);
        assert_eq!(m.len(), 6, "the garbage line is skipped");
        assert_eq!(m[1].fstype, "nsfs");
        assert_eq!(m[2].point, Path::new("/state/ws/a/pins/p 1"));
        assert_eq!(m[2].options, "rw,nosuid,nodev");
    }

    #[test]
    fn beneath_is_by_component_and_deepest_first() {
        let m = parse(TEXT);
        let got = at_or_beneath(&m, Path::new("/state/ws/a"));
        assert_eq!(
            got,
            vec![
                PathBuf::from("/state/ws/a/pins/p 1/deep"),
                PathBuf::from("/state/ws/a/pins/p 1"),
                PathBuf::from("/state/ws/a/netns"),
            ],
            "/state/ws/ab is not beneath /state/ws/a"
        );
        assert_eq!(
            children(&m, Path::new("/state/ws/a/pins")),
            vec![PathBuf::from("/state/ws/a/pins/p 1")]
        );
        assert_eq!(
            at(&m, Path::new("/state/ws/a/netns")).map(|m| m.id),
            Some(34)
        );
        let on = |p: &str| containing(&m, Path::new(p)).map(|m| m.id);
        assert_eq!(on("/state/ws/a/pins/p 1/deep/x"), Some(32));
        assert_eq!(on("/state/ws/abc"), Some(22), "by component, not by prefix");
    }
}
