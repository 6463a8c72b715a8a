//! After `PUT /containers/{id}/archive`: the daemon extracted the tar as root, keeping its
//! owners and modes, into whatever the path reaches, bind mounts of workspace paths included.
//! The container's bind sources are handed back to the workspace user right away (root-owned
//! entries chowned, setuid/setgid bits of files that would run as anyone else cleared): a
//! container that was created and never started sends no stop event, so the watcher alone
//! would wait until it is removed (`docs/binds.md`).

use http::{Response, StatusCode};

use super::body::ProxyBody;
use super::error::ProxyError;
use super::server::Shared;
use crate::api::json::Json;
use dockwarden_policy::api::pct;

pub async fn after_put(
    shared: &Shared,
    reference: &str,
    resp: Result<Response<ProxyBody>, ProxyError>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (Ok(r), Some(hb), Some(pins)) = (&resp, &shared.hand_back, &shared.pins) else {
        return resp;
    };
    if r.status() != StatusCode::OK || pins.entries().is_empty() {
        return resp;
    }
    let id = match shared.containers.cached(reference).0 {
        Some(f) => Some(f.id),
        None => match super::facts::daemon_get(
            &shared.upstream,
            &format!("/containers/{}/json", pct::component(reference)),
        )
        .await
        {
            Ok(Some(Json::Object(o))) => o.str("Id").ok().flatten().map(str::to_owned),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(
                    container = reference,
                    "looking up the container an archive was put into: {e}"
                );
                None
            }
        },
    };
    if let Some(id) = id {
        hb.container(&id, "archive put");
    }
    resp
}
