//! Zero-copy relaying between two Unix streams with `splice(2)` through a pipe.
//!
//! A tunnel's bytes (exec and attach stdin/stdout) go socket → pipe → socket inside the kernel
//! and never through a user-space buffer: one `splice` in and one out per up-to-1-MiB step
//! instead of a read and a write of 64 KiB. nix's `splice` is the safe wrapper (the crate
//! denies `unsafe`). Readiness comes from tokio's reactor (`readable`/`writable` + `try_io`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use bytes::Bytes;
use nix::fcntl::{FcntlArg, OFlag, SpliceFFlags, fcntl, splice};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// Most bytes moved per `splice` pair; the pipe is grown to this size where the kernel allows.
const STEP: usize = 1 << 20;

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // A larger pipe means fewer round trips; the default (64 KiB) still works if refused.
    let _ = fcntl(&w, FcntlArg::F_SETPIPE_SZ(STEP as i32));
    Ok((r, w))
}

fn flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK
}

/// Writes `data` whole to `to`.
async fn write_all(to: &UnixStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        to.writable().await?;
        match to.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Moves everything from `from` to `to` (`prefix` first) until `from`'s EOF, then half-closes
/// `to` (a client's EOF on stdin becomes the daemon's, never a full close). Returns the count.
pub async fn one_way(from: &UnixStream, to: &UnixStream, prefix: Bytes) -> io::Result<u64> {
    let moved = move_all(from, to, prefix).await;
    // Also after an error, as the copying relay does: the other side sees this direction end.
    // (A peer that is gone already makes this fail; there is nothing to tell it then.)
    let _ = nix::sys::socket::shutdown(to.as_raw_fd(), nix::sys::socket::Shutdown::Write);
    moved
}

async fn move_all(from: &UnixStream, to: &UnixStream, prefix: Bytes) -> io::Result<u64> {
    write_all(to, &prefix).await?;
    let (pr, pw) = pipe()?;
    let mut total = prefix.len() as u64;
    loop {
        // The pipe is empty here, so EAGAIN can only mean the socket has nothing to read.
        let n = loop {
            from.readable().await?;
            match from.try_io(Interest::READABLE, || {
                splice(from.as_fd(), None, pw.as_fd(), None, STEP, flags()).map_err(io::Error::from)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            break;
        }
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            match to.try_io(Interest::WRITABLE, || {
                splice(pr.as_fd(), None, to.as_fd(), None, left, flags()).map_err(io::Error::from)
            }) {
                Ok(k) => left -= k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        total += n as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Real sockets, real kernel: bytes arrive in order, the prefix first, and EOF passes on as
    /// a half-close that leaves the other direction open.
    #[tokio::test(flavor = "current_thread")]
    async fn relays_in_order_and_passes_eof_on_as_a_half_close() {
        let (mut client, proxy_client) = tokio::net::UnixStream::pair().expect("pair");
        let (proxy_daemon, mut daemon) = tokio::net::UnixStream::pair().expect("pair");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = tokio::spawn(async move {
            client.write_all(&sent[5..]).await.expect("write");
            client.shutdown().await.expect("half-close");
            client
        });
        let relay = tokio::spawn(async move {
            let n = super::one_way(
                &proxy_client,
                &proxy_daemon,
                bytes::Bytes::copy_from_slice(&data[..5]),
            )
            .await;
            (n, proxy_client, proxy_daemon)
        });
        let mut got = Vec::new();
        daemon.read_to_end(&mut got).await.expect("read to EOF");
        let (n, _pc, mut pd) = relay.await.expect("relay");
        assert_eq!(n.expect("relayed"), 3_000_000);
        assert_eq!(got.len(), 3_000_000);
        assert!(
            got.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8),
            "bytes in order"
        );
        // The daemon can still answer: only the write direction was shut (a full close, or a
        // read shutdown, would make this write fail with EPIPE).
        daemon
            .write_all(b"bye")
            .await
            .expect("the other direction stays open");
        let mut back = [0u8; 3];
        pd.read_exact(&mut back)
            .await
            .expect("the proxy's daemon side reads the answer");
        assert_eq!(&back, b"bye");
        drop(writer.await.expect("writer"));
    }
}
