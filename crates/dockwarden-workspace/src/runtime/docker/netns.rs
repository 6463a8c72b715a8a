//! The workspace's network namespace: created with `unshare(CLONE_NEWNET)` on a thread of
//! its own and kept by bind-mounting that thread's namespace file; entered with `setns` of
//! the network namespace only (never `ip netns exec`, which also remounts `/sys` and hides
//! the cgroup mounts dockerd needs).
//!
//! A namespace belongs to a thread, and `fork` copies the calling thread's: so a child is
//! started in a namespace by spawning it from a short-lived thread that joined it first. No
//! `pre_exec` (and no `unsafe`) is needed, and the service's own threads never move.

use std::fs::File;
use std::io;
use std::path::Path;

use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;

fn on_thread<T: Send>(f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")))
    })
}

/// Runs `spawn` on a fresh thread that joined the network namespace at `ns` first; the
/// process it starts lives in that namespace. Keeps the tokio runtime context.
pub fn spawn_in<T: Send>(ns: &Path, spawn: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    let handle = tokio::runtime::Handle::try_current().ok();
    let file = File::open(ns)?;
    on_thread(move || {
        let _ctx = handle.as_ref().map(|h| h.enter());
        nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        spawn()
    })
}

/// Whether `ns` is a mounted namespace file (not just the empty mount point).
pub fn exists(ns: &Path) -> bool {
    nix::sys::statfs::statfs(ns)
        .map(|s| s.filesystem_type() == nix::sys::statfs::NSFS_MAGIC)
        .unwrap_or(false)
}

/// Creates a new network namespace kept at `ns` (an empty file is made for the mount), with
/// its loopback up. An existing one is kept as is.
pub fn create(ns: &Path) -> io::Result<()> {
    create_then(ns, || {
        // The loopback of a new namespace is down; `ip` runs in this thread's namespace.
        let st = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .stdin(std::process::Stdio::null())
            .status()?;
        if st.success() {
            Ok(())
        } else {
            Err(io::Error::other(
                "`ip link set lo up` failed in the new namespace",
            ))
        }
    })
}

/// Like [`create`], without touching the new namespace (its loopback stays down): for a
/// caller that configures it with one `ip` of its own (`wsnet`).
pub fn create_bare(ns: &Path) -> io::Result<()> {
    create_then(ns, || Ok(()))
}

fn create_then(ns: &Path, then: impl FnOnce() -> io::Result<()> + Send) -> io::Result<()> {
    if exists(ns) {
        return Ok(());
    }
    File::create(ns)?;
    let target = ns.to_path_buf();
    on_thread(move || {
        nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from)?;
        let own = format!("/proc/self/task/{}/ns/net", nix::unistd::gettid());
        nix::mount::mount(
            Some(own.as_str()),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(io::Error::from)?;
        then()
    })
    .inspect_err(|_| {
        let _ = release(ns);
    })
}

/// Unmounts the namespace file and removes it; the namespace ends with its last process.
pub fn release(ns: &Path) -> io::Result<()> {
    while exists(ns) {
        nix::mount::umount2(ns, MntFlags::MNT_DETACH).map_err(io::Error::from)?;
    }
    match std::fs::remove_file(ns) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
