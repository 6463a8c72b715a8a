//! The process listening on a Unix socket: the peer of a fresh connection (`SO_PEERCRED`).
//! The proxy uses it to find its daemon's process (its routes, its settings).

use std::os::unix::net::UnixStream;
use std::path::Path;

/// Why the listener's pid could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("connecting to {}: {source}", path.display())]
    Connect {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("SO_PEERCRED: {0}")]
    Cred(nix::errno::Errno),
    /// The listener lives in a PID namespace this process cannot see into.
    #[error("its pid is not visible in this PID namespace")]
    NotVisible,
}

/// The pid of the process listening on `socket`, as this process's PID namespace numbers it.
pub fn listener_pid(socket: &Path) -> Result<i32, PeerError> {
    let s = UnixStream::connect(socket).map_err(|source| PeerError::Connect {
        path: socket.to_owned(),
        source,
    })?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(PeerError::Cred)?;
    match cred.pid() {
        p if p > 0 => Ok(p),
        _ => Err(PeerError::NotVisible),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_of_a_socket_is_this_process() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        assert_eq!(listener_pid(&path).expect("pid"), std::process::id() as i32);
    }

    #[test]
    fn a_socket_nobody_listens_on_is_a_connect_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = listener_pid(&dir.path().join("none.sock")).expect_err("no listener");
        assert!(matches!(e, PeerError::Connect { .. }), "{e:?}");
        assert!(e.to_string().contains("none.sock"), "{e}");
    }
}
