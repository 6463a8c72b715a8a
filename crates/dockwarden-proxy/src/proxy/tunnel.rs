//! Raw byte relaying after the daemon switched protocols (attach, exec, BuildKit sessions).
//!
//! Each direction is copied on its own, and an EOF in one direction becomes a `shutdown`
//! (half-close) of the other side's write half, so `echo hi | docker run -i img cat` sees stdin
//! end and still gets its output.
//!
//! Both upgraded connections are taken back from hyper as the Unix streams they are
//! (`Upgraded::downcast`), with the bytes hyper had already read relayed first: the tunnel then
//! reads the sockets directly with 64 KiB buffers, instead of through hyper's wrapper and the
//! framing watcher's 16 KiB scratch copy (which has nothing left to watch after an upgrade).

use bytes::Bytes;
use hyper::upgrade::{Parts, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, copy_buf, split};
use tokio::net::UnixStream;

use super::framing::Watched;

/// Bytes moved per read/write pair. `tokio::io::copy` uses 8 KiB, which costs a syscall pair per
/// 8 KiB on `docker exec` and `attach` streams; 64 KiB cuts that eightfold.
const TUNNEL_BUF: usize = 64 * 1024;

/// Either end of a tunnel.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// One end: the bytes hyper read past the head (sent first), and the connection.
type End = (Bytes, Box<dyn Stream>);

type ClientParts = Result<Parts<Watched<TokioIo<UnixStream>>>, Upgraded>;
type DaemonParts = Result<Parts<TokioIo<UnixStream>>, Upgraded>;

/// The client's end: the accepted Unix stream, or hyper's wrapper if it is another type.
fn client_end(p: ClientParts) -> End {
    match p {
        Ok(p) => (p.read_buf, Box::new(p.io.into_inner().into_inner())),
        Err(up) => (Bytes::new(), Box::new(TokioIo::new(up))),
    }
}

/// The daemon's end: this connection's own daemon stream (`super::link`), or hyper's wrapper.
fn daemon_end(p: DaemonParts) -> End {
    match p {
        Ok(p) => (p.read_buf, Box::new(p.io.into_inner())),
        Err(up) => (Bytes::new(), Box::new(TokioIo::new(up))),
    }
}

/// Relays until both directions have finished: with `splice(2)` between the two Unix streams
/// (`super::splice`), or by copying when either end is not one.
pub async fn relay(client: Upgraded, daemon: Upgraded) {
    let (c, d): (ClientParts, DaemonParts) = (client.downcast(), daemon.downcast());
    match (c, d) {
        (Ok(c), Ok(d)) => {
            let (c_pre, c) = (c.read_buf, c.io.into_inner().into_inner());
            let (d_pre, d) = (d.read_buf, d.io.into_inner());
            let (a, b) = tokio::join!(
                super::splice::one_way(&c, &d, c_pre),
                super::splice::one_way(&d, &c, d_pre)
            );
            tracing::debug!(tunnel.up = ?a.ok(), tunnel.down = ?b.ok(), "tunnel closed");
        }
        (c, d) => copy(client_end(c), daemon_end(d)).await,
    }
}

/// The copying relay, 64 KiB a step each way.
async fn copy((c_pre, c): End, (d_pre, d): End) {
    let (cr, mut cw) = split(c);
    let (dr, mut dw) = split(d);
    let mut cr = BufReader::with_capacity(TUNNEL_BUF, std::io::Cursor::new(c_pre).chain(cr));
    let mut dr = BufReader::with_capacity(TUNNEL_BUF, std::io::Cursor::new(d_pre).chain(dr));
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
