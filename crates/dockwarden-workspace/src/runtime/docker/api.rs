//! The runtime's own client of a workspace's private dockerd (and of the proxy in front of
//! it): `/_ping`, listing and stopping containers, loading an image. hyper's HTTP/1.1 client
//! over the Unix socket, one connection per call, as `crate::client` talks to the service.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::UnixStream;

/// How long an image load (upload and the daemon's answer) may take.
const LOAD_WITHIN: Duration = Duration::from_secs(600);

/// Sends `req` on a new connection to `socket`; returns the status and the whole body.
async fn exchange<B>(socket: &Path, req: Request<B>) -> io::Result<(u16, Bytes)>
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = UnixStream::connect(socket).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    // The connection is driven here, not in a spawned task: it ends with the call (answered,
    // failed or timed out by the caller), so no connection outlives it.
    let call = async move {
        let resp = sender.send_request(req).await.map_err(io::Error::other)?;
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map_err(io::Error::other)?;
        Ok((status, body.to_bytes()))
    };
    tokio::pin!(conn);
    tokio::pin!(call);
    tokio::select! {
        biased;
        r = &mut call => return r,
        c = &mut conn => c.map_err(io::Error::other)?,
    }
    // The connection ended cleanly (the daemon closed it): what it answered is buffered, and
    // a request it never answered fails in `send_request`.
    call.await
}

/// A request to the Docker API at `path` (the authority is the socket's).
fn request<B>(method: Method, path: &str, body: B) -> io::Result<Request<B>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "docker")
        .body(body)
        .map_err(io::Error::other)
}

/// Sends one bodiless request and returns the status and body.
pub async fn call(
    socket: &Path,
    method: Method,
    path: &str,
    timeout: Duration,
) -> io::Result<(u16, Vec<u8>)> {
    let req = request(method, path, Empty::<Bytes>::new())?;
    let (status, body) = tokio::time::timeout(timeout, exchange(socket, req))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "docker API call timed out"))??;
    Ok((status, body.to_vec()))
}

/// A file sent as a request body, read as hyper asks for it (never whole in memory).
struct FileBody {
    file: tokio::fs::File,
    len: u64,
    buf: Box<[u8]>,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = self.get_mut();
        let mut read = ReadBuf::new(&mut this.buf);
        match Pin::new(&mut this.file).poll_read(cx, &mut read) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) if read.filled().is_empty() => Poll::Ready(None),
            Poll::Ready(Ok(())) => {
                let chunk = Bytes::copy_from_slice(read.filled());
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    /// Exact, so the request carries a `Content-Length`.
    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// `POST /images/load` with the tar at `tar` as the body, streamed.
pub async fn load_image(socket: &Path, tar: &Path) -> io::Result<()> {
    let file = tokio::fs::File::open(tar).await?;
    let len = file.metadata().await?.len();
    let body = FileBody {
        file,
        len,
        buf: vec![0; 64 << 10].into_boxed_slice(),
    };
    let mut req = request(Method::POST, "/images/load?quiet=1", body)?;
    req.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-tar"),
    );
    let (status, body) = tokio::time::timeout(LOAD_WITHIN, exchange(socket, req))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "image load timed out"))??;
    // A refused archive can still answer 200, with the error in the progress stream.
    let text = String::from_utf8_lossy(&body);
    if status == 200 && !text.contains("\"errorDetail\"") {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "image load refused: HTTP {status}: {}",
            text.lines().last().unwrap_or_default()
        )))
    }
}

/// True when the socket answers `/_ping` with 200.
pub async fn ping(socket: &Path) -> bool {
    matches!(
        call(socket, Method::GET, "/_ping", Duration::from_secs(2)).await,
        Ok((200, _))
    )
}

/// Waits until `/_ping` answers, checking `alive` between tries; false on timeout or death.
pub async fn wait_ping(socket: &Path, within: Duration, mut alive: impl FnMut() -> bool) -> bool {
    use dockwarden_sys::poll::{Probe, poll_until};
    poll_until(within, Duration::from_millis(10), || {
        let dead = !alive();
        async move {
            match (ping(socket).await, dead) {
                (true, _) => Probe::Done,
                (false, true) => Probe::Stop,
                (false, false) => Probe::Retry,
            }
        }
    })
    .await
    .is_done()
}

/// Ids and names of every container, running or not.
pub async fn containers(socket: &Path) -> io::Result<Vec<(String, String, bool)>> {
    let (status, body) = call(
        socket,
        Method::GET,
        "/containers/json?all=1",
        Duration::from_secs(10),
    )
    .await?;
    if status != 200 {
        return Err(io::Error::other(format!(
            "listing containers: HTTP {status}"
        )));
    }
    let list: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(list
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    let id = c["Id"].as_str().unwrap_or_default().to_string();
                    let name = c["Names"][0]
                        .as_str()
                        .unwrap_or_default()
                        .trim_start_matches('/')
                        .to_string();
                    (id, name, c["State"] == "running")
                })
                .collect()
        })
        .unwrap_or_default())
}
