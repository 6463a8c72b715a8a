//! Raw byte relaying after the daemon switched protocols (attach, exec, BuildKit sessions).
//!
//! Each direction is copied on its own, and an EOF in one direction becomes a `shutdown`
//! (half-close) of the other side's write half, so `echo hi | docker run -i img cat` sees stdin
//! end and still gets its output.

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncWriteExt, copy, split};

/// Relays until both directions have finished.
pub async fn relay(client: Upgraded, daemon: Upgraded) {
    let (mut cr, mut cw) = split(TokioIo::new(client));
    let (mut dr, mut dw) = split(TokioIo::new(daemon));
    let up = async {
        let n = copy(&mut cr, &mut dw).await;
        // INVARIANT: the client's EOF is passed on as a half-close, never a full close.
        let _ = dw.shutdown().await;
        n
    };
    let down = async {
        let n = copy(&mut dr, &mut cw).await;
        let _ = cw.shutdown().await;
        n
    };
    let (a, b) = tokio::join!(up, down);
    tracing::debug!(tunnel.up = ?a.ok(), tunnel.down = ?b.ok(), "tunnel closed");
}
