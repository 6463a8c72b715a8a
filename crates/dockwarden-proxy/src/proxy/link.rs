//! A client connection's own daemon connection, for the requests it forwards.
//!
//! hyper serves the requests of one HTTP/1.1 client connection one at a time, in order, so that
//! connection can own one daemon connection instead of checking one out of hyper-util's pool
//! for every request (a lock, a keyed idle list, a pooled-connection wrapper and its drop-time
//! check-in). The daemon connection is dialled on the first forwarded request and kept until the
//! client connection ends. A protocol switch (exec, attach, `/grpc`, sessions) consumes it; the
//! next request dials a new one. Fact look-ups keep using the pool (`Shared::upstream`).

use std::path::PathBuf;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::sync::Mutex;

use super::body::ProxyBody;

/// Why a request could not be sent to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("connect: {0}")]
    Connect(#[from] std::io::Error),
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

/// One client connection's daemon connection.
pub struct Link {
    path: PathBuf,
    sender: Mutex<Option<SendRequest<ProxyBody>>>,
}

impl Link {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            sender: Mutex::new(None),
        }
    }

    /// Dials the daemon and spawns the connection's driver (on this runtime's one thread).
    async fn dial(&self) -> Result<SendRequest<ProxyBody>, LinkError> {
        let io = TokioIo::new(UnixStream::connect(&self.path).await?);
        let (sender, conn) = http1::handshake(io).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "daemon connection ended with an error");
            }
        });
        Ok(sender)
    }

    /// Sends `req` (origin-form URI, with a `Host` header). A request the connection did not
    /// start to send (the daemon closed an idle connection) is sent once more on a new one.
    pub async fn request(&self, req: Request<ProxyBody>) -> Result<Response<Incoming>, LinkError> {
        match self.try_once(req).await {
            Ok(resp) => Ok(resp),
            Err((e, Some(back))) => {
                tracing::debug!(error = %e, "daemon connection closed before the request was sent; redialling");
                self.try_once(back).await.map_err(|(e, _)| e)
            }
            Err((e, None)) => Err(e),
        }
    }

    /// One attempt; on failure, the request back when it was not sent on a reused connection.
    async fn try_once(
        &self,
        req: Request<ProxyBody>,
    ) -> Result<Response<Incoming>, (LinkError, Option<Request<ProxyBody>>)> {
        let (pending, reused) = {
            let mut slot = self.sender.lock().await;
            // Reuse only a connection that is ready now: one still writing the body of a request
            // the daemon answered early is dropped (closed) rather than waited for.
            let mut kept = slot.take();
            let reused = match kept.as_mut() {
                Some(s) => ready_now(s).await,
                None => false,
            };
            let mut s = match kept {
                Some(s) if reused => s,
                _ => self.dial().await.map_err(|e| (e, None))?,
            };
            let pending = s.try_send_request(req);
            *slot = Some(s);
            (pending, reused)
        };
        pending.await.map_err(|mut e| {
            let back = e.take_message().filter(|_| reused);
            (LinkError::Http(e.into_error()), back)
        })
    }
}

/// Whether the connection can take a request without waiting (polls it once).
async fn ready_now(s: &mut SendRequest<ProxyBody>) -> bool {
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(matches!(s.poll_ready(cx), std::task::Poll::Ready(Ok(()))))
    })
    .await
}
