//! The pooled client to the daemon's Unix socket.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::UnixStream;

use super::body::ProxyBody;

/// The connection to the daemon: a Unix stream speaking HTTP/1.1.
pub struct UpstreamIo(TokioIo<UnixStream>);

impl Connection for UpstreamIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl Read for UpstreamIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl Write for UpstreamIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Dials the daemon socket for every new pooled connection.
#[derive(Clone)]
pub struct UnixConnector {
    path: PathBuf,
}

impl tower_service::Service<Uri> for UnixConnector {
    type Response = UpstreamIo;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<UpstreamIo>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _uri: Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { Ok(UpstreamIo(TokioIo::new(UnixStream::connect(path).await?))) })
    }
}

/// The daemon client type used across the proxy.
pub type Upstream = Client<UnixConnector, ProxyBody>;

/// Builds the pooled client for the daemon at `path`.
pub fn client(path: PathBuf) -> Upstream {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(std::time::Duration::from_secs(30))
        .pool_max_idle_per_host(64)
        .build(UnixConnector { path })
}

/// The URI used for every upstream request; the authority is ignored by the connector.
pub fn uri(path_and_query: &str) -> Result<Uri, http::Error> {
    Uri::builder()
        .scheme("http")
        .authority("docker")
        .path_and_query(path_and_query)
        .build()
}

/// The origin-form URI of a forwarded request (`super::link` writes it as-is).
pub fn origin(path_and_query: &str) -> Result<Uri, http::Error> {
    Uri::builder().path_and_query(path_and_query).build()
}
