//! `POST /grpc` inspected, not tunnelled: after the daemon's `101`, the proxy is an HTTP/2
//! server to the client and an HTTP/2 client to the daemon, and relays each gRPC call (one
//! stream) only after `policy::grpc` has judged it.
//!
//! - Allowed methods stream both ways as they are (Status, ListenBuildHistory, large messages),
//!   trailers included.
//! - Judged methods (Solve) are unary: their one request message is read whole under
//!   [`MAX_MESSAGE`], parsed, judged, and forwarded as the client's bytes or the policy's rewrite.
//! - A refusal is a trailers-only gRPC response: `grpc-status` 7 (`PERMISSION_DENIED`) with the
//!   rule id and hint, 3 (`INVALID_ARGUMENT`) for a message that cannot be read, 8
//!   (`RESOURCE_EXHAUSTED`) for one over the cap. Nothing refused reaches the daemon.
//!
//! `DOCKWARDEN_GRPC_CAPTURE=<dir>` (debugging, and how `fixtures/grpc/` was made) writes every
//! judged request message to `<dir>/<n>-<method>.bin`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Buf, Bytes};
use http::{HeaderMap, HeaderValue, Request, Response, Uri};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioExecutor;

use super::audit::{Peer, Record, Timestamp};
use super::body::{self, ProxyBody};
use super::server::Shared;
use crate::policy::grpc::{self, Call, Judged, MAX_MESSAGE, Refusal};
use dockwarden_policy::api::pct;

/// Headers that HTTP/2 forbids or that belong to one hop.
const HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
];

/// gRPC status codes the proxy answers with.
const INVALID_ARGUMENT: u32 = 3;
const PERMISSION_DENIED: u32 = 7;
const RESOURCE_EXHAUSTED: u32 = 8;
/// The audit record of an allowed call could not be written.
const UNAVAILABLE: u32 = 14;

static CAPTURED: AtomicU64 = AtomicU64::new(0);

/// Serves one upgraded `/grpc` connection until either side ends it.
pub async fn serve(client: Upgraded, daemon: Upgraded, shared: Arc<Shared>, peer: Peer) {
    let mut h2c = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    h2c.adaptive_window(true).max_frame_size(1 << 20);
    let (sender, conn) = match h2c.handshake(daemon).await {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!(error = %e, "HTTP/2 handshake with the daemon's /grpc failed");
            return;
        }
    };
    let daemon_conn = tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "daemon /grpc connection ended");
        }
    });
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (sender, shared) = (sender.clone(), shared.clone());
        async move { Ok::<_, std::convert::Infallible>(call(req, sender, &shared, peer).await) }
    });
    let mut h2s = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2s.adaptive_window(true)
        .max_frame_size(1 << 20)
        .max_header_list_size(64 << 10);
    if let Err(e) = h2s.serve_connection(client, service).await {
        tracing::debug!(error = %e, "client /grpc connection ended");
    }
    daemon_conn.abort();
}

/// One gRPC call.
async fn call(
    req: Request<Incoming>,
    mut sender: hyper::client::conn::http2::SendRequest<ProxyBody>,
    shared: &Shared,
    peer: Peer,
) -> Response<ProxyBody> {
    let method = req.uri().path().to_owned();
    // Refusals go out even when their record fails (logged loudly); an allowed call whose
    // record fails is refused (below).
    let audit = |decision: &str, rules: Vec<&str>, rewrites: Vec<String>| {
        shared.audit.write(&Record {
            time: Timestamp::now(),
            peer,
            method: "POST",
            path: &method,
            api_version: None,
            endpoint: "Grpc",
            decision,
            rules,
            rewrites,
        })
    };
    let (parts, incoming) = req.into_parts();
    let mut rewrites = Vec::new();
    // Set once a dry-run `would-deny` record is written, so the call is not also audited as allowed.
    let mut audited = false;
    let fwd_body: ProxyBody = match grpc::classify(&method, &shared.policy) {
        Call::Allow => incoming.boxed(),
        Call::Deny(d) => {
            if !shared.dry_run {
                let _ = audit("deny", vec![d.rule], Vec::new());
                tracing::info!(rule.id = d.rule, grpc.method = %method, "denied: {}", d.message);
                return status_response(PERMISSION_DENIED, &d.client_message());
            }
            if let Err(e) = audit("would-deny", vec![d.rule], Vec::new()) {
                return status_response(
                    UNAVAILABLE,
                    &format!("dockwarden: {e}; the call was not forwarded"),
                );
            }
            audited = true;
            tracing::warn!(rule.id = d.rule, grpc.method = %method, "DRY RUN: would deny, forwarding anyway: {}", d.message);
            incoming.boxed()
        }
        Call::Judge(j) => {
            let payload = match read_unary(incoming).await {
                Ok(p) => p,
                Err((code, msg)) => {
                    let _ = audit("deny", vec!["request.body.invalid"], Vec::new());
                    tracing::info!(grpc.method = %method, "refused an unreadable gRPC request: {msg}");
                    return status_response(code, &msg);
                }
            };
            capture(j, &payload);
            match grpc::decide(j, &payload, &shared.env) {
                Ok(a) => {
                    super::warn_unbudgeted(a.rewrites());
                    rewrites = a
                        .rewrites()
                        .iter()
                        .map(|r| format!("{}: {}", r.rule, r.what))
                        .collect();
                    let msg = a
                        .message()
                        .map(<[u8]>::to_vec)
                        .unwrap_or_else(|| payload.to_vec());
                    body::full(frame(&msg))
                }
                Err(Refusal::Invalid(m)) => {
                    let _ = audit("deny", vec!["request.body.invalid"], Vec::new());
                    tracing::info!(grpc.method = %method, "refused an unreadable gRPC message: {m}");
                    return status_response(INVALID_ARGUMENT, &format!("dockwarden: {m}"));
                }
                Err(Refusal::Denied(d)) if !shared.dry_run => {
                    let _ = audit("deny", vec![d.rule], Vec::new());
                    tracing::info!(rule.id = d.rule, grpc.method = %method, "denied: {}", d.message);
                    return status_response(PERMISSION_DENIED, &d.client_message());
                }
                Err(Refusal::Denied(d)) => {
                    if let Err(e) = audit("would-deny", vec![d.rule], Vec::new()) {
                        return status_response(
                            UNAVAILABLE,
                            &format!("dockwarden: {e}; the call was not forwarded"),
                        );
                    }
                    audited = true;
                    tracing::warn!(rule.id = d.rule, grpc.method = %method, "DRY RUN: would deny, forwarding anyway: {}", d.message);
                    body::full(frame(&payload))
                }
            }
        }
    };
    if !audited {
        let rules = if rewrites.is_empty() {
            Vec::new()
        } else {
            vec!["limits.cgroup_parent"]
        };
        if let Err(e) = audit("allow", rules, rewrites) {
            return status_response(
                UNAVAILABLE,
                &format!("dockwarden: {e}; the call was not forwarded"),
            );
        }
    }
    let uri = match Uri::builder()
        .scheme("http")
        .authority(parts.uri.authority().map_or("localhost", |a| a.as_str()))
        .path_and_query(method.as_str())
        .build()
    {
        Ok(u) => u,
        Err(_) => return status_response(INVALID_ARGUMENT, "dockwarden: bad gRPC method path"),
    };
    let mut up = Request::builder().method(parts.method).uri(uri);
    if let Some(h) = up.headers_mut() {
        *h = forward_headers(&parts.headers);
    }
    let Ok(up) = up.body(fwd_body) else {
        return status_response(INVALID_ARGUMENT, "dockwarden: bad gRPC request");
    };
    match sender.send_request(up).await {
        Ok(resp) => {
            let (p, b) = resp.into_parts();
            Response::from_parts(p, b.boxed())
        }
        Err(e) => {
            tracing::warn!(error = %e, grpc.method = %method, "daemon /grpc call failed");
            status_response(14, "dockwarden: the daemon's BuildKit did not answer")
        }
    }
}

fn forward_headers(src: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in src {
        if HOP.contains(&k.as_str()) || (k == "te" && v != "trailers") {
            continue;
        }
        out.append(k.clone(), v.clone());
    }
    out
}

/// Reads the one message of a unary call: a 5-byte prefix (compression flag, big-endian
/// length) and exactly that many bytes, then the end of the stream.
async fn read_unary(b: Incoming) -> Result<Bytes, (u32, String)> {
    let cap = MAX_MESSAGE + 5;
    let mut all = match Limited::new(b, cap).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err((
                RESOURCE_EXHAUSTED,
                format!("dockwarden: gRPC message exceeds the {MAX_MESSAGE}-byte limit"),
            ));
        }
        Err(e) => {
            return Err((
                INVALID_ARGUMENT,
                format!("dockwarden: cannot read the gRPC request: {e}"),
            ));
        }
    };
    parse_unary(&mut all)
}

/// The payload of exactly one uncompressed gRPC frame.
pub fn parse_unary(all: &mut Bytes) -> Result<Bytes, (u32, String)> {
    let bad = |m: &str| (INVALID_ARGUMENT, format!("dockwarden: {m}"));
    if all.len() < 5 {
        return Err(bad("a unary gRPC call needs one length-prefixed message"));
    }
    let flag = all.get_u8();
    let len = all.get_u32() as usize;
    if flag != 0 {
        return Err(bad(
            "compressed gRPC messages are not accepted on judged calls",
        ));
    }
    if len > MAX_MESSAGE {
        return Err((
            RESOURCE_EXHAUSTED,
            format!("dockwarden: gRPC message exceeds the {MAX_MESSAGE}-byte limit"),
        ));
    }
    if all.len() != len {
        return Err(bad("a unary gRPC call carries exactly one message"));
    }
    Ok(all.split_to(len))
}

/// A gRPC frame around `msg`.
fn frame(msg: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(msg.len() + 5);
    out.push(0);
    out.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(msg);
    out.into()
}

/// A trailers-only gRPC response.
fn status_response(code: u32, message: &str) -> Response<ProxyBody> {
    let mut r = Response::new(body::empty());
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("grpc-status", HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(&pct::encode(message, pct::GRPC_MESSAGE)) {
        h.insert("grpc-message", v);
    }
    r
}

fn capture(j: Judged, payload: &[u8]) {
    let Some(dir) = std::env::var_os("DOCKWARDEN_GRPC_CAPTURE") else {
        return;
    };
    let n = CAPTURED.fetch_add(1, Ordering::SeqCst);
    let path = std::path::Path::new(&dir).join(format!("{n:03}-{j:?}.bin"));
    if let Err(e) = std::fs::write(&path, payload) {
        tracing::warn!(error = %e, "cannot write a gRPC capture");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_frames_are_read_exactly() {
        let ok = |b: &[u8]| {
            parse_unary(&mut Bytes::copy_from_slice(b))
                .map(|p| p.to_vec())
                .map_err(|e| e.0)
        };
        assert_eq!(ok(&[0, 0, 0, 0, 2, 8, 1]), Ok(vec![8, 1]));
        assert_eq!(ok(&[0, 0, 0, 0, 0]), Ok(vec![]));
        assert_eq!(ok(&[0, 0, 0, 0, 3, 8, 1]), Err(INVALID_ARGUMENT));
        assert_eq!(
            ok(&[0, 0, 0, 0, 1, 8, 1]),
            Err(INVALID_ARGUMENT),
            "two messages or trailing bytes"
        );
        assert_eq!(ok(&[1, 0, 0, 0, 1, 8]), Err(INVALID_ARGUMENT), "compressed");
        assert_eq!(ok(&[0, 0xff, 0, 0, 0]), Err(RESOURCE_EXHAUSTED));
        assert_eq!(ok(&[0, 0]), Err(INVALID_ARGUMENT));
    }

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(
            pct::encode("a b%c\n→", pct::GRPC_MESSAGE),
            "a b%25c%0A%E2%86%92"
        );
    }
}
