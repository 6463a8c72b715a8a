//! Raw byte relaying after the daemon switched protocols (attach, exec, BuildKit sessions).
//!
//! Each direction is copied on its own, and an EOF in one direction becomes a `shutdown`
//! (half-close) of the other side's write half, so `echo hi | docker run -i img cat` sees stdin
//! end and still gets its output.

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncWriteExt, BufReader, copy_buf, split};

/// Bytes moved per read/write pair. `tokio::io::copy` uses 8 KiB, which costs a syscall pair per
/// 8 KiB on `docker exec` and `attach` streams; 64 KiB cuts that eightfold.
const TUNNEL_BUF: usize = 64 * 1024;

/// Relays until both directions have finished.
pub async fn relay(client: Upgraded, daemon: Upgraded) {
    let (cr, mut cw) = split(TokioIo::new(client));
    let (dr, mut dw) = split(TokioIo::new(daemon));
    let (mut cr, mut dr) = (BufReader::with_capacity(TUNNEL_BUF, cr), BufReader::with_capacity(TUNNEL_BUF, dr));
    let up = async {
        let n = copy_buf(&mut cr, &mut dw).await;
        // INVARIANT: the client's EOF is passed on as a half-close, never a full close.
        let _ = dw.shutdown().await;
        n
    };
    let down = async {
        let n = copy_buf(&mut dr, &mut cw).await;
        let _ = cw.shutdown().await;
        n
    };
    let (a, b) = tokio::join!(up, down);
    tracing::debug!(tunnel.up = ?a.ok(), tunnel.down = ?b.ok(), "tunnel closed");
}
