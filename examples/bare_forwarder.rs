//! A bare hyper 1 forwarder with no policy, no audit and no logging: the practical limit for an
//! HTTP/1.1 proxy built on the same stack as dockwarden, kept beside it in `benches/e2e.sh`.
//!
//! `bare_forwarder LISTEN_SOCKET UPSTREAM_SOCKET`
//!
//! One current-thread runtime. Each client connection gets its own daemon connection, and both
//! connections are driven by the same task, so a request and its answer never cross a task
//! boundary. A protocol switch (exec, attach) is relayed byte for byte; the next request on that
//! client connection dials a new daemon connection.

use std::path::PathBuf;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Mutex;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Sender = SendRequest<Incoming>;

/// Opens a daemon connection; the returned future drives it (with upgrades).
async fn dial(path: &PathBuf) -> Result<(Sender, impl Future<Output = ()> + Send + use<>), Error> {
    let io = TokioIo::new(UnixStream::connect(path).await?);
    let (sender, conn) = hyper::client::conn::http1::handshake(io).await?;
    Ok((sender, async move {
        let _ = conn.with_upgrades().await;
    }))
}

/// Sends one request on the connection's daemon link, dialling a new one if it is gone.
async fn forward(
    mut req: Request<Incoming>,
    link: Arc<Mutex<Option<Sender>>>,
    up: Arc<PathBuf>,
) -> Result<Response<Incoming>, Error> {
    let client_up = hyper::upgrade::on(&mut req);
    let pending = {
        let mut slot = link.lock().await;
        let usable = match slot.as_mut() {
            Some(s) => s.ready().await.is_ok(),
            None => false,
        };
        if !usable {
            let (s, conn) = dial(&up).await?;
            tokio::spawn(conn);
            *slot = Some(s);
        }
        let Some(s) = slot.as_mut() else {
            return Err("no daemon connection".into());
        };
        s.send_request(req)
    };
    let mut resp = pending.await?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let daemon_up = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            if let (Ok(c), Ok(d)) = (client_up.await, daemon_up.await) {
                let _ =
                    tokio::io::copy_bidirectional(&mut TokioIo::new(c), &mut TokioIo::new(d)).await;
            }
        });
    }
    Ok(resp)
}

async fn serve(client: UnixStream, up: Arc<PathBuf>) {
    let (link, upstream_conn) = match dial(&up).await {
        Ok((s, conn)) => (Arc::new(Mutex::new(Some(s))), conn),
        Err(e) => return eprintln!("bare_forwarder: cannot reach the daemon: {e}"),
    };
    let svc = service_fn(move |req| forward(req, link.clone(), up.clone()));
    let server = http1::Builder::new()
        .serve_connection(TokioIo::new(client), svc)
        .with_upgrades();
    tokio::pin!(server, upstream_conn);
    let mut upstream_done = false;
    loop {
        tokio::select! {
            _ = &mut server => break,
            () = &mut upstream_conn, if !upstream_done => upstream_done = true,
        }
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let [_, listen, upstream] = args.as_slice() else {
        return Err("usage: bare_forwarder LISTEN_SOCKET UPSTREAM_SOCKET".into());
    };
    let _ = std::fs::remove_file(listen);
    let up = Arc::new(PathBuf::from(upstream));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = UnixListener::bind(listen)?;
        loop {
            let (s, _) = listener.accept().await?;
            tokio::spawn(serve(s, up.clone()));
        }
    })
}
