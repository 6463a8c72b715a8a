//! One request through the pipeline: frame checks → route → body → decode → facts → decide →
//! forward → audit.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Version, header};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tracing::Instrument;

use super::audit::{Peer, Record, Timestamp};
use super::body::{self, ProxyBody};
use super::error::ProxyError;
use super::server::{ConnInfo, Shared};
use super::upstream;
use crate::api::json;
use crate::api::path::{CanonicalPath, PathError};
use crate::api::query::Query;
use crate::api::route::{self, Endpoint, Route};
use crate::policy::{self, BodyNeed, Denial, Facts, Permitted, Verdict};
use std::sync::atomic::Ordering;

/// Hop-by-hop headers never forwarded as-is.
const HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
];

/// Entry point from hyper. Never fails: errors become Docker-style responses.
pub async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    conn: Arc<ConnInfo>,
) -> Result<Response<ProxyBody>, std::convert::Infallible> {
    // DEBUG, not INFO: an enabled span formats its fields on every request (a measurable share
    // of the proxy's CPU under load, see benches/README.md). The INFO and WARN lines a request
    // can produce carry the method and path themselves.
    let span =
        tracing::debug_span!("request", http.method = %req.method(), http.path = %req.uri().path());
    let index = conn.requests.fetch_add(1, Ordering::SeqCst);
    if conn.verdicts.is_ambiguous(index) {
        let e = ProxyError::BadRequest(
            "ambiguous framing: Content-Length with Transfer-Encoding, or repeated Content-Length"
                .into(),
        );
        tracing::info!(peer.uid = ?conn.peer.uid, "refused a request with ambiguous framing");
        let mut resp = e.into_response();
        // The client and we may disagree on where the next request starts: end the connection.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Ok(resp);
    }
    Ok(handle_inner(req, shared, &conn)
        .instrument(span)
        .await
        .unwrap_or_else(ProxyError::into_response))
}

struct Audit<'a> {
    shared: &'a Shared,
    peer: Peer,
    // The request's own method and URI (cheap clones: a standard method is a tag, the URI's
    // bytes are shared), not fresh `String`s per request.
    method: http::Method,
    uri: http::Uri,
}

impl Audit<'_> {
    /// Writes the record. The caller forwards nothing whose record failed (`ProxyError::Audit`).
    fn log(
        &self,
        route: Option<&Route>,
        decision: &str,
        verdict: Option<&Verdict>,
    ) -> Result<(), super::audit::AuditError> {
        match verdict {
            Some(Verdict::Allow(p)) => self.log_permitted(route, decision, p),
            v => self.write(
                route,
                decision,
                v.map(Verdict::rule_ids).unwrap_or_default(),
                Vec::new(),
            ),
        }
    }

    /// The record of an allowed request: its rules and rewrites.
    fn log_permitted(
        &self,
        route: Option<&Route>,
        decision: &str,
        p: &Permitted,
    ) -> Result<(), super::audit::AuditError> {
        super::warn_unbudgeted(p.rewrites());
        let rewrites = p
            .rewrites()
            .iter()
            .map(|r| format!("{}: {}", r.rule, r.what))
            .collect();
        self.write(route, decision, p.rules(), rewrites)
    }

    fn write(
        &self,
        route: Option<&Route>,
        decision: &str,
        rules: Vec<&str>,
        rewrites: Vec<String>,
    ) -> Result<(), super::audit::AuditError> {
        let endpoint = route.map_or("Unclassified", |r| r.endpoint.name());
        self.shared.audit.write(&Record {
            time: Timestamp::now(),
            peer: self.peer,
            method: self.method.as_str(),
            path: self.uri.path(),
            api_version: route.and_then(|r| r.version.as_ref()).map(|v| v.as_str()),
            endpoint,
            decision,
            rules,
            rewrites,
        })
    }
}

/// Refuses framing that Go's server and ours could read differently.
fn check_framing(req: &Request<Incoming>) -> Result<(), ProxyError> {
    let h = req.headers();
    let te = h.get_all(header::TRANSFER_ENCODING).iter().count();
    let cl = h.get_all(header::CONTENT_LENGTH).iter().count();
    if te > 0 && cl > 0 {
        return Err(ProxyError::BadRequest(
            "both Content-Length and Transfer-Encoding are set".into(),
        ));
    }
    if cl > 1 {
        return Err(ProxyError::BadRequest(
            "more than one Content-Length header".into(),
        ));
    }
    if te > 1
        || h.get(header::TRANSFER_ENCODING)
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Err(ProxyError::BadRequest(
            "only a single `Transfer-Encoding: chunked` is accepted".into(),
        ));
    }
    if req.version() != Version::HTTP_11 && te > 0 {
        return Err(ProxyError::BadRequest(
            "Transfer-Encoding on an HTTP/1.0 request".into(),
        ));
    }
    if req.uri().scheme().is_some() || req.uri().authority().is_some() {
        return Err(ProxyError::BadRequest(
            "absolute-form request targets are not accepted".into(),
        ));
    }
    let ct = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.starts_with("application/x-www-form-urlencoded") || ct.starts_with("multipart/form-data")
    {
        return Err(Denial::new(
            "request.form_body",
            "form-encoded request bodies are not accepted",
        )
        .into());
    }
    Ok(())
}

fn classify(req: &Request<Incoming>) -> Result<(Route, Query), ProxyError> {
    let path = CanonicalPath::parse(req.uri().path()).map_err(|e| match e {
        PathError::BadEscape | PathError::BadBytes | PathError::NotOriginForm => {
            ProxyError::BadRequest(e.to_string())
        }
        PathError::ShapeChangingEscape | PathError::NotClean => {
            Denial::new("route.noncanonical", e.to_string()).into()
        }
    })?;
    let query = Query::parse(req.uri().query())
        .map_err(|e| Denial::new("request.query.invalid", e.to_string()))?;
    Ok((route::classify(req.method().as_str(), &path), query))
}

/// Reads a JSON body whole, under the cap.
async fn read_json_body(b: Incoming, cap: usize) -> Result<Bytes, ProxyError> {
    match Limited::new(b, cap).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ProxyError::TooLarge(cap)),
        Err(e) => Err(ProxyError::BadRequest(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

async fn handle_inner(
    mut req: Request<Incoming>,
    shared: Arc<Shared>,
    conn: &ConnInfo,
) -> Result<Response<ProxyBody>, ProxyError> {
    let peer = conn.peer;
    let audit = Audit {
        shared: &shared,
        peer,
        method: req.method().clone(),
        uri: req.uri().clone(),
    };
    let (route, query) = match check_framing(&req).and_then(|()| classify(&req)) {
        Ok(x) => x,
        Err(e) => {
            let d = if let ProxyError::Denied(d) = &e {
                Some(Verdict::Deny(d.clone()))
            } else {
                None
            };
            // A refusal stays a refusal even when its record cannot be written (logged loudly).
            let _ = audit.log(None, "deny", d.as_ref());
            return Err(e);
        }
    };
    // A create counts under the admission lock, held until it is admitted or refused
    // (`super::admission`: the container cap without serialising the daemon's creates).
    let mut count_lock = if route.endpoint == Endpoint::ContainerCreate {
        Some(shared.creates.lock().await)
    } else {
        None
    };
    let need = policy::body_need(&route.endpoint);
    let mut stream_body = None;
    let mut raw_body = Bytes::new();
    let wants_upgrade = req.headers().contains_key(header::UPGRADE);
    let upgrade = if route.endpoint.hijacks() && wants_upgrade {
        Some(hyper::upgrade::on(&mut req))
    } else {
        None
    };
    let (parts, incoming) = req.into_parts();
    match need {
        BodyNeed::Json => raw_body = read_json_body(incoming, shared.policy.max_json_body).await?,
        BodyNeed::Stream => stream_body = Some(incoming),
    }
    let decoded = if raw_body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(json::parse(&raw_body))
    };
    if route.endpoint.hijacks()
        && !wants_upgrade
        && !is_detached_exec(&route.endpoint, decoded.as_ref())
    {
        // Without `Upgrade`, dockerd answers a length-less 200 and then treats the client's
        // following bytes as stdin; hyper cannot hand that connection over, so we refuse
        // rather than relay a stream the client would misread. Every Docker client sends it.
        return Err(ProxyError::BadRequest(
            "attach and exec start need an `Upgrade: tcp` header".into(),
        ));
    }
    // Surface issue: a refused BuildKit build ends its session; a session tunnel can be ended.
    let build_session = (route.endpoint == Endpoint::Build)
        .then(|| query.get("session").map(str::to_owned))
        .flatten();
    let session = (route.endpoint == Endpoint::Session)
        .then(|| {
            parts
                .headers
                .get("x-docker-expose-session-uuid")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .flatten()
        .map(|id| (shared.sessions.handle(&id), id));
    let (body, undecodable) = match decoded {
        Some(Ok(j)) => (Some(j), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    // The route moves into the policy's request and is borrowed back from it (no copy).
    let preq = policy::Request {
        method: parts.method.to_string(),
        route,
        query,
        body,
        has_body: !raw_body.is_empty(),
    };
    let (verdict, made) = match undecodable {
        Some(e) => (Verdict::Deny(Denial::from(e)), Default::default()),
        None => {
            let pending = if count_lock.is_some() {
                shared.creates.pending()
            } else {
                0
            };
            match decide_with_facts(&shared, &preq, pending).await? {
                // Counted with creates pending, a refusal by the cap may be an overcount: wait
                // for them (the lock is held, so none is admitted meanwhile) and count again,
                // exactly.
                (Verdict::Deny(d), made)
                    if pending > 0 && d.rule == policy::limits::CONTAINERS_RULE =>
                {
                    super::pins::release(&shared, &made);
                    shared.creates.settled().await;
                    decide_with_facts(&shared, &preq, 0).await?
                }
                decided => decided,
            }
        }
    };
    let route = &preq.route;
    // Pins the decision does not use (all of them on a denial) are released here.
    let pinned = super::pins::keep_used(&shared, &verdict, made);
    let permitted = match verdict {
        Verdict::Allow(p) => {
            if let Err(e) = audit.log_permitted(Some(route), "allow", &p) {
                if let Some(store) = &shared.pins {
                    store.release_all(&pinned);
                }
                return Err(e.into());
            }
            tracing::debug!(docker.endpoint = %route.endpoint.name(), "allowed");
            Some(p)
        }
        Verdict::Deny(ref d) if shared.dry_run => {
            if let Err(e) = audit.log(Some(route), "would-deny", Some(&verdict)) {
                if let Some(store) = &shared.pins {
                    store.release_all(&pinned);
                }
                return Err(e.into());
            }
            tracing::warn!(rule.id = d.rule, http.method = %audit.method, http.path = %audit.uri.path(), "DRY RUN: would deny, forwarding anyway: {}", d.message);
            None
        }
        Verdict::Deny(d) => {
            // Surface issue: keep reading an unread streaming body (a build context) while the
            // refusal goes out, so the client sees the 403 rather than a broken pipe.
            if let Some(s) = stream_body.take() {
                tokio::spawn(drain(s));
            }
            if let Some(id) = &build_session {
                shared.sessions.end(id);
            }
            let _ = audit.log(Some(route), "deny", Some(&Verdict::Deny(d.clone())));
            tracing::info!(rule.id = d.rule, docker.endpoint = %route.endpoint.name(), http.method = %audit.method, http.path = %audit.uri.path(), "denied: {}", d.message);
            return Err(d.into());
        }
    };
    // An admitted create is pending (counted by the next ones) until its answer is handled.
    let _create_slot = count_lock.take().map(|held| shared.creates.admit(held));
    let fwd_body = match (permitted.as_ref().and_then(|p| p.body()), stream_body) {
        (Some(j), _) => body::full(j.to_bytes()),
        (None, Some(s)) => s.boxed(),
        (None, None) => body::full(raw_body),
    };
    let query = permitted
        .as_ref()
        .and_then(|p| p.query())
        .map(Query::encode);
    // `/grpc` is served as HTTP/2 by the proxy itself once upgraded (`super::grpc`).
    let grpc = (route.endpoint == Endpoint::Grpc).then(|| (shared.clone(), peer));
    let resp = forward(
        &shared, &conn.link, parts, query, fwd_body, upgrade, session, grpc,
    )
    .await;
    let resp = super::pins::after_create(&shared, pinned, resp).await;
    match &route.endpoint {
        Endpoint::ContainerCreate => {
            super::containers::after_create(&shared.containers, resp).await
        }
        Endpoint::ContainerArchivePut(r) => super::archive::after_put(&shared, r, resp).await,
        Endpoint::ContainerInspect(_) | Endpoint::ContainerList => resp.map(|r| unpin(&shared, r)),
        _ => resp,
    }
}

/// Container inspect and list answers show workspace paths, not pins (`super::unpin`).
fn unpin(shared: &Shared, resp: Response<ProxyBody>) -> Response<ProxyBody> {
    let Some(store) = shared
        .pins
        .as_ref()
        .filter(|_| !shared.show_pins && resp.status() == StatusCode::OK)
    else {
        return resp;
    };
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let entries = if json { store.entries() } else { Vec::new() };
    // No pins, nothing to rewrite: the map (and its formatted pin-dir prefix) is not built.
    if entries.is_empty() {
        return resp;
    }
    let map = super::unpin::PinMap::new(
        &shared.env.pin_dir,
        entries.into_iter().map(|e| (e.pin, e.source)),
    );
    if map.is_empty() {
        return resp;
    }
    let (mut parts, b) = resp.into_parts();
    // The length changes; hyper frames the rewritten body itself.
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, super::unpin::Unpinned::new(b, map).boxed())
}

/// Reads and discards a refused request's body, up to a cap, then drops the connection's body.
async fn drain(mut b: Incoming) {
    const CAP: usize = 64 << 20;
    let mut seen = 0usize;
    let read = async {
        while let Some(Ok(frame)) = b.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len());
            if seen > CAP {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
}

/// `POST /exec/{id}/start` with `"Detach": true` answers a plain 200 and never hijacks.
fn is_detached_exec(e: &Endpoint, body: Option<&Result<json::Json, json::DecodeError>>) -> bool {
    let Some(Ok(json::Json::Object(o))) = body else {
        return false;
    };
    matches!(e, Endpoint::ExecStart(_)) && o.bool("Detach") == Ok(Some(true))
}

/// Gathers the facts `req` needs and decides; `pending` creates (admitted, not yet answered)
/// are added to the daemon's container count.
async fn decide_with_facts(
    shared: &Shared,
    req: &policy::Request,
    pending: u64,
) -> Result<(Verdict, super::pins::Made), ProxyError> {
    let qs = match policy::needs(req, &shared.policy) {
        Ok(q) => q,
        Err(d) => return Ok((Verdict::Deny(d), Default::default())),
    };
    let mut facts = Facts {
        env: shared.env.clone(),
        ..Facts::default()
    };
    // Follow-up facts depend on earlier ones (an exec's container); two more rounds at most.
    let mut round = Some(qs);
    for _ in 0..3 {
        let Some(qs) = round.take().filter(|q| !q.is_empty()) else {
            break;
        };
        if let Err(e) = super::facts::gather(
            &shared.upstream,
            shared.pins.as_ref(),
            Some(&shared.containers),
            qs,
            &mut facts,
        )
        .await
        {
            super::pins::release(shared, &facts.pins);
            return Err(ProxyError::Upstream {
                socket: shared.upstream_path.clone(),
                reason: e.to_string(),
            });
        }
        round = Some(
            policy::needs_more(req, &facts)
                .into_iter()
                .filter(|q| !facts.has(q))
                .collect(),
        );
    }
    if let Some(n) = facts.container_count.as_mut() {
        *n += pending;
    }
    let verdict = policy::decide(req, &facts, &shared.policy);
    Ok((verdict, std::mem::take(&mut facts.pins)))
}

/// The request's own header map, minus hop-by-hop headers and `Content-Length` (hyper frames
/// the forwarded body itself), removed in place by the names found: building a second map
/// cost an insert per header.
fn forward_headers(mut h: HeaderMap, upgrade: bool) -> HeaderMap {
    let wanted = if upgrade {
        h.get(header::UPGRADE).cloned()
    } else {
        None
    };
    let mut found: Vec<HeaderName> = Vec::new();
    for k in h.keys() {
        if (HOP.contains(&k.as_str()) || k == header::CONTENT_LENGTH) && !found.contains(k) {
            found.push(k.clone());
        }
    }
    for k in &found {
        h.remove(k);
    }
    if let Some(u) = wanted {
        h.insert(header::UPGRADE, u);
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    h
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the pieces of a decided request"
)]
async fn forward(
    shared: &Shared,
    link: &super::link::Link,
    parts: http::request::Parts,
    query: Option<String>,
    fwd_body: ProxyBody,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    session: Option<(Arc<tokio::sync::Notify>, String)>,
    grpc: Option<(Arc<Shared>, Peer)>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let pq = match query.as_deref().or(parts.uri.query()) {
        Some(q) if !q.is_empty() => format!("{}?{}", parts.uri.path(), q),
        _ => parts.uri.path().to_owned(),
    };
    let internal = |e: http::Error| ProxyError::Internal(e.to_string());
    let mut up = Request::builder()
        .method(parts.method.clone())
        .uri(upstream::origin(&pq).map_err(internal)?);
    if let Some(h) = up.headers_mut() {
        *h = forward_headers(parts.headers, upgrade.is_some());
        // As the pooled client did: a request without `Host` (HTTP/1.0) gets the URI's.
        h.entry(header::HOST)
            .or_insert(HeaderValue::from_static("docker"));
    }
    let up = up.body(fwd_body).map_err(internal)?;
    let mut resp = link.request(up).await.map_err(|e| ProxyError::Upstream {
        socket: shared.upstream_path.clone(),
        reason: e.to_string(),
    })?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_up) = upgrade else {
            return Err(ProxyError::Internal(
                "daemon switched protocols on a non-hijack endpoint".into(),
            ));
        };
        let daemon_up = hyper::upgrade::on(&mut resp);
        let sessions = shared.sessions.clone();
        tokio::spawn(async move {
            let relay = async {
                match (client_up.await, daemon_up.await) {
                    (Ok(c), Ok(d)) => match grpc {
                        Some((shared, peer)) => super::grpc::serve(c, d, shared, peer).await,
                        None => super::tunnel::relay(c, d).await,
                    },
                    (c, d) => {
                        tracing::debug!(client = ?c.err(), daemon = ?d.err(), "upgrade failed")
                    }
                }
            };
            match session {
                None => relay.await,
                Some((end, id)) => {
                    tokio::select! {
                        () = relay => {},
                        () = end.notified() => tracing::info!(buildkit.session = %id, "session ended: its build was refused"),
                    }
                    sessions.forget(&id);
                }
            }
        });
        let (p, _) = resp.into_parts();
        return Ok(Response::from_parts(p, body::empty()));
    }
    let (mut p, b) = resp.into_parts();
    // One pass over the answer's headers, then remove only the hop-by-hop names found, by
    // their parsed `HeaderName`: removing each of the nine names by `&str` parsed and hashed
    // every one (~2,800 instructions of a chunked answer such as container inspect).
    let mut found: Vec<HeaderName> = Vec::new();
    for k in p.headers.keys() {
        if HOP.contains(&k.as_str()) && !found.contains(k) {
            found.push(k.clone());
        }
    }
    for k in &found {
        p.headers.remove(k);
    }
    Ok(Response::from_parts(p, b.boxed()))
}
