//! The proxy's side of bind pins: release the pins a decision did not use, and after a
//! create, record which container uses the rest (or release them if the create failed).

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use super::body::{self, ProxyBody};
use super::error::ProxyError;
use super::server::Shared;
use crate::policy::{Effect, Verdict};

/// Pins made while gathering facts: cleaned host path → pin path.
pub type Made = BTreeMap<String, String>;

/// Splits the pins made for this request into those the permitted request uses (returned)
/// and the rest, which are released now. A denial uses none.
pub fn keep_used(shared: &Shared, verdict: &Verdict, made: Made) -> Vec<String> {
    let Some(store) = &shared.pins else {
        return Vec::new();
    };
    let used: Vec<String> = match verdict {
        Verdict::Allow(p) => p
            .effects()
            .iter()
            .filter_map(|e| match e {
                Effect::PinBindSource { host_path } => {
                    made.get(&crate::hostfs::clean(host_path)).cloned()
                }
            })
            .collect(),
        Verdict::Deny(_) => Vec::new(),
    };
    let unused: Vec<String> = made.into_values().filter(|p| !used.contains(p)).collect();
    store.release_all(&unused);
    used
}

/// Releases every pin in `made` (the request failed before a decision was forwarded).
pub fn release(shared: &Shared, made: &Made) {
    if let Some(store) = &shared.pins {
        store.release_all(&made.values().cloned().collect::<Vec<_>>());
    }
}

/// After the daemon answered a create that carries pins: claim them for the new container,
/// or release them when no container was created.
pub async fn after_create(
    shared: &Shared,
    used: Vec<String>,
    resp: Result<Response<ProxyBody>, ProxyError>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let Some(store) = &shared.pins else {
        return resp;
    };
    if used.is_empty() {
        return resp;
    }
    let resp = match resp {
        Ok(r) if r.status() == StatusCode::CREATED => r,
        other => {
            store.release_all(&used);
            return other;
        }
    };
    let (parts, b) = resp.into_parts();
    let bytes: Bytes = match b.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            // The container exists but we cannot tell which: reconciliation claims the pins
            // from the daemon's container list (or releases them once they are stale).
            tracing::warn!("reading the create answer: {e}");
            return Err(ProxyError::Upstream {
                socket: shared.upstream_path.clone(),
                reason: e.to_string(),
            });
        }
    };
    let id = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("Id").and_then(|i| i.as_str()).map(str::to_owned));
    match id {
        Some(id) => store.claim(&used, &id),
        None => tracing::warn!(
            "create answer without an `Id`; reconciliation will claim or release its pins"
        ),
    }
    Ok(Response::from_parts(parts, body::full(bytes)))
}
