//! Accept loop: connection limits, peer credentials, HTTP/1.1 with upgrades, graceful shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tracing::Instrument;

use std::sync::atomic::AtomicU64;

use super::audit::{AuditLog, Peer};
use super::framing::{Verdicts, Watched};
use super::upstream::Upstream;
use crate::policy::Policy;
use crate::policy::facts::Environment;

/// State shared by every connection.
pub struct Shared {
    pub policy: Policy,
    pub upstream: Upstream,
    pub upstream_path: String,
    pub audit: AuditLog,
    pub dry_run: bool,
    pub env: Arc<Environment>,
    /// Admission of creates under the container cap (`admission`): concurrent creates
    /// cannot overshoot it, and the daemon still makes them in parallel.
    pub creates: super::admission::Creates,
    /// BuildKit sessions a refused build must end (surface issue; see `sessions`).
    pub sessions: Arc<super::sessions::Sessions>,
    /// Where checked bind sources are pinned; `None` means binds beneath the workspace are
    /// refused (`container.bind.pin_failed`).
    pub pins: Option<Arc<crate::hostfs::PinStore>>,
    /// The containers this proxy created, and the cache of container facts (`containers`).
    pub containers: Arc<super::containers::Containers>,
    /// Chown-back on demand (after `PUT archive`); `None` without pins.
    pub hand_back: Option<crate::hostfs::watch::HandBack>,
    /// Container inspect and list answers keep the pin paths (`--show-pins`, for reviewers)
    /// instead of showing the workspace paths they were made from (`unpin`).
    pub show_pins: bool,
}

/// Per-connection facts the handler needs.
pub struct ConnInfo {
    pub peer: Peer,
    /// Which requests on this connection had ambiguous framing (see `framing`).
    pub verdicts: Verdicts,
    /// Requests seen so far on this connection; hyper serves them in order.
    pub requests: AtomicU64,
    /// This connection's own daemon connection for forwarded requests (`link`).
    pub link: super::link::Link,
}

/// Transport limits.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time a client has to send a complete request head (also bounds idle keep-alive).
    pub header_timeout: Duration,
    /// Most connections served at once; more wait in the kernel backlog.
    pub max_connections: usize,
    /// How long in-flight requests may run after shutdown begins.
    pub shutdown_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves until `shutdown` completes, then drains connections within the grace period.
pub async fn run(
    listener: UnixListener,
    shared: Arc<Shared>,
    opts: Options,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Each connection task holds a clone of `done_tx`; once all are dropped, `done_rx` ends.
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let slots = Arc::new(Semaphore::new(opts.max_connections));
    let closed = Arc::new(AtomicU64::new(0));
    let trimmer = dockwarden_sys::memory::spawn_trimmer(closed.clone());
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let peer = stream
            .peer_cred()
            .map(|c| Peer {
                uid: Some(c.uid()),
                gid: Some(c.gid()),
                pid: c.pid(),
            })
            .unwrap_or_default();
        let shared = shared.clone();
        let verdicts = Verdicts::default();
        let link = super::link::Link::new(&shared.upstream_path);
        let conn_info = Arc::new(ConnInfo {
            peer,
            verdicts: verdicts.clone(),
            requests: AtomicU64::new(0),
            link,
        });
        let svc =
            service_fn(move |req| super::handler::handle(req, shared.clone(), conn_info.clone()));
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(opts.header_timeout)
            .keep_alive(true)
            // INVARIANT: a client EOF ends the connection, as in Go's net/http (dockerd cancels
            // the request when the client goes away): with half-close kept open, a closed
            // `/events` stream would hold both sockets until the daemon's next event.
            .half_close(false)
            .serve_connection(Watched::new(TokioIo::new(stream), verdicts), svc)
            .with_upgrades();
        let span = tracing::info_span!("conn", peer.uid = ?peer.uid, peer.pid = ?peer.pid);
        let (done, mut stop, closed) = (done_tx.clone(), stop_rx.clone(), closed.clone());
        tokio::spawn(
            async move {
                tokio::pin!(conn);
                let res = tokio::select! {
                    r = conn.as_mut() => r,
                    () = async { let _ = stop.wait_for(|s| *s).await; } => {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = res {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                closed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                drop((permit, done));
            }
            .instrument(span),
        );
    }
    drop(listener);
    trimmer.abort();
    let _ = stop_tx.send(true);
    drop(done_tx);
    tokio::select! {
        _ = done_rx.recv() => tracing::info!("all connections drained"),
        () = tokio::time::sleep(opts.shutdown_grace) => tracing::warn!("shutdown grace period ended with connections open"),
    }
    Ok(())
}
