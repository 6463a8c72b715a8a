//! The HTTP/JSON API on a Unix socket. The socket's permissions are its authorization.

mod body;
mod files_api;
mod handlers;
pub mod query;
pub mod response;
pub mod routes;
mod stream;

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tracing::{Instrument, debug, info, info_span};

use crate::error::{WsError, WsResult};
use crate::service::Service;

/// Binds the socket (replacing a stale one) and restricts it to `mode`.
pub fn bind(path: &Path, mode: u32) -> WsResult<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(WsError::Invalid(format!(
                "`{}` exists and is not a socket",
                path.display()
            )));
        }
        // Never take over a socket a service still answers on.
        crate::lock::refuse_live_socket(path)?;
        std::fs::remove_file(path).map_err(|e| WsError::io(path, e))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| WsError::io(path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| WsError::io(path, e))?;
    Ok(listener)
}

/// Serves the API until `shutdown` resolves.
pub async fn run(listener: UnixListener, svc: Arc<Service>, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    let mut conn_id: u64 = 0;
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        conn_id += 1;
        let svc = svc.clone();
        let span = info_span!("conn", conn.id = conn_id);
        tokio::spawn(
            async move {
                let service = service_fn(move |req| {
                    let svc = svc.clone();
                    let span = info_span!("request", http.method = %req.method(), http.path = req.uri().path());
                    async move { Ok::<_, std::convert::Infallible>(handlers::handle(svc, req).await) }.instrument(span)
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    debug!(error = %e, "connection ended with an error");
                }
            }
            .instrument(span),
        );
    }
    info!("api stopped accepting connections");
}
