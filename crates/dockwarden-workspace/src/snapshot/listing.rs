//! One directory's entry names and types, read with `getdents64` through the walker's
//! descriptor into a buffer each walker reuses.
//!
//! A listing borrows the directory's descriptor (no `dup`, no second descriptor to close)
//! and keeps every name in one arena, so listing a directory allocates nothing once the
//! walker's buffers have grown. The type comes from the directory entry (`d_type`): the
//! walk needs no `fstatat` to tell a subdirectory from a file; `Unknown` (a filesystem that
//! does not fill `d_type`) means the caller must stat the name.

use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::os::fd::OwnedFd;

use rustix::fs::{FileType, RawDir};

/// `getdents64` buffer: a few hundred entries a call.
const BUF: usize = 32 << 10;

/// The names of one directory, `.` and `..` left out, in byte order once [`Listing::read`]
/// returns.
pub(super) struct Listing {
    buf: Vec<MaybeUninit<u8>>,
    /// Every name, each followed by its NUL.
    names: Vec<u8>,
    /// Where each name is in `names` (NUL excluded), and its type.
    // INVARIANT: sorted by name after `read`.
    ents: Vec<(Range<usize>, FileType)>,
}

impl Default for Listing {
    fn default() -> Self {
        Listing {
            buf: vec![MaybeUninit::uninit(); BUF],
            names: Vec::new(),
            ents: Vec::new(),
        }
    }
}

impl Listing {
    /// Lists the directory open at `fd` (freshly opened: read from its current offset),
    /// replacing what was listed before. The I/O error is kept as is (a directory removed while open lists as `NotFound`).
    pub fn read(&mut self, fd: &OwnedFd) -> std::io::Result<()> {
        self.names.clear();
        self.ents.clear();
        let mut dir = RawDir::new(fd, &mut self.buf);
        while let Some(ent) = dir.next() {
            let ent = ent?;
            let name = ent.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let start = self.names.len();
            self.names.extend_from_slice(name);
            self.ents.push((start..self.names.len(), ent.file_type()));
            self.names.push(0);
        }
        let names = &self.names;
        self.ents
            .sort_unstable_by(|a, b| names[a.0.clone()].cmp(&names[b.0.clone()]));
        Ok(())
    }

    /// The names (with their terminating NUL, for the `*at` calls) and types, in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&CStr, FileType)> {
        self.ents.iter().filter_map(|(r, ty)| {
            let with_nul = self.names.get(r.start..=r.end)?;
            Some((CStr::from_bytes_with_nul(with_nul).ok()?, *ty))
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lists_names_in_byte_order_with_their_types_and_reuses_its_buffers() {
        let dir = tempfile::tempdir().unwrap();
        // More names than one getdents64 buffer holds, so the listing takes several calls.
        for i in (0..3000).rev() {
            std::fs::write(dir.path().join(format!("f{i:05}-{}", "x".repeat(40))), b"").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("f00000", dir.path().join("link")).unwrap();
        let mut l = Listing::default();
        for _ in 0..2 {
            // The second listing reuses the first one's buffers and replaces its names.
            let fd: OwnedFd = std::fs::File::open(dir.path()).unwrap().into();
            l.read(&fd).unwrap();
            let got: Vec<(String, FileType)> = l
                .iter()
                .map(|(n, t)| (n.to_str().unwrap().to_string(), t))
                .collect();
            assert_eq!(got.len(), 3002);
            assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "byte order");
            assert!(got.iter().all(|(n, _)| n != "." && n != ".."));
            let ty = |name: &str| got.iter().find(|(n, _)| n == name).unwrap().1;
            // ext4, XFS, btrfs and tmpfs fill d_type; a filesystem that does not says Unknown.
            for (name, want) in [
                ("sub", FileType::Directory),
                ("link", FileType::Symlink),
                (
                    "f00000-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                    FileType::RegularFile,
                ),
            ] {
                assert!(ty(name) == want || ty(name) == FileType::Unknown, "{name}");
            }
        }
    }
}
