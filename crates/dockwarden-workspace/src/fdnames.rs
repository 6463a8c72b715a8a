//! Listing the names in a directory held open as a descriptor.
//!
//! Reads `/proc/self/fd/<n>`, which refers to the open directory itself (not to a path that
//! could be swapped), because the `dir` feature of nix is not enabled in this build.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{WsError, WsResult};

/// Sorted entry names of the directory open at `fd` (without `.` and `..`).
pub fn names(fd: &OwnedFd, shown: &str) -> WsResult<Vec<CString>> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let rd = std::fs::read_dir(&path).map_err(|e| WsError::io(shown, e))?;
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| WsError::io(shown, e))?;
        let name = CString::new(ent.file_name().as_bytes())
            .map_err(|_| WsError::Internal(format!("nul in a name under `{shown}`")))?;
        out.push(name);
    }
    out.sort();
    Ok(out)
}
