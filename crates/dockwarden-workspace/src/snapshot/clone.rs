//! Copy-on-write restores of raw loose blobs: `FICLONE` (rustix's safe wrapper) shares
//! the blob's extents with the restored file on XFS (reflink) and btrfs, so a fork writes
//! no data. Packed objects and compressed blobs cannot be shared; this is why a store whose
//! filesystem can clone keeps files above the pack limit as raw blobs (`blob.rs` probes it
//! once per store). The clone is still checked: the blob is read and hashed (reading is
//! much cheaper than writing), and a mismatch fails the restore.

use std::fs::File;

/// Whether a clone was made; `false` means the filesystem cannot share these extents
/// (ext4, tmpfs, different filesystems) and the caller copies.
pub(super) fn try_clone(dst: &File, src: &File) -> std::io::Result<bool> {
    use rustix::io::Errno;
    match rustix::fs::ioctl_ficlone(dst, src) {
        Ok(()) => Ok(true),
        Err(e)
            if [
                Errno::OPNOTSUPP,
                Errno::XDEV,
                Errno::INVAL,
                Errno::NOTTY,
                Errno::PERM,
            ]
            .contains(&e) =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
