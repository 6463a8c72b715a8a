//! Gathers the facts the policy asked for: host-path resolutions and daemon look-ups.

use std::path::Path;
use std::sync::Arc;

use http_body_util::BodyExt;

use super::body;
use super::containers::Containers;
use super::upstream::{self, Upstream};
use crate::api::json::{self, Json};
use crate::hostfs::PinStore;
use crate::policy::FactQuery;
use crate::policy::facts::{ContainerFact, Facts, ImageFact, NetworkFact, VolumeFact};
use dockwarden_policy::api::pct;

/// Why a fact could not be gathered; the request is refused (never allowed) when this happens.
#[derive(Debug, thiserror::Error)]
pub enum FactError {
    #[error("daemon look-up `{what}` failed: {reason}")]
    Daemon { what: String, reason: String },
}

/// GETs a daemon path. `Ok(None)` is a 404.
pub async fn daemon_get(up: &Upstream, path: &str) -> Result<Option<Json>, FactError> {
    let err = |reason: String| FactError::Daemon {
        what: path.to_owned(),
        reason,
    };
    let uri = upstream::uri(path).map_err(|e| err(e.to_string()))?;
    let req = http::Request::get(uri)
        .body(body::empty())
        .map_err(|e| err(e.to_string()))?;
    let resp = up.request(req).await.map_err(|e| err(e.to_string()))?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| err(e.to_string()))?
        .to_bytes();
    if status == http::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(err(format!("status {status}")));
    }
    json::parse(&bytes)
        .map(Some)
        .map_err(|e| err(e.to_string()))
}

fn str_pairs(o: Option<&json::Object>, field: &str) -> Vec<(String, String)> {
    o.and_then(|o| o.str_map(field).ok().flatten())
        .unwrap_or_default()
}

fn text(o: Option<&json::Object>, field: &str) -> String {
    o.and_then(|o| o.str(field).ok().flatten())
        .unwrap_or_default()
        .to_owned()
}

/// Inspects a container (or takes the cached inspect), and says whether this proxy made it.
async fn container_fact(
    up: &Upstream,
    known: Option<&Containers>,
    r: &str,
) -> Result<Option<ContainerFact>, FactError> {
    let (cached, generation) = known.map(|k| k.cached(r)).unwrap_or((None, 0));
    let fact = match cached {
        Some(f) => Some(f),
        None => {
            let v = daemon_get(up, &format!("/containers/{}/json", pct::component(r))).await?;
            let fact = v.as_ref().and_then(Json::as_object).map(|o| ContainerFact {
                id: text(Some(o), "Id"),
                host_config: o.get("HostConfig").cloned().unwrap_or(Json::Null),
                labels: str_pairs(o.object("Config").ok().flatten(), "Labels"),
                created_here: false,
                volumes: o
                    .object_list("Mounts")
                    .ok()
                    .flatten()
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| m.str("Type").ok().flatten() == Some("volume"))
                    .filter_map(|m| {
                        m.str("Name")
                            .ok()
                            .flatten()
                            .filter(|n| !n.is_empty())
                            .map(str::to_owned)
                    })
                    .collect(),
            });
            if let (Some(k), Some(f)) = (known, &fact) {
                k.store(r, f, generation);
            }
            fact
        }
    };
    Ok(fact.map(|mut f| {
        f.created_here = known.is_some_and(|k| k.created_here(&f.id));
        f
    }))
}

/// Gathers every queried fact into `facts`. With a pin store, each host path inside the
/// workspace is also pinned (the descriptor checked is the one mounted); the caller releases
/// the pins in `facts.pins` that the permitted request does not use.
pub async fn gather(
    up: &Upstream,
    pins: Option<&Arc<PinStore>>,
    known: Option<&Containers>,
    qs: Vec<FactQuery>,
    facts: &mut Facts,
) -> Result<(), FactError> {
    for q in qs {
        match q {
            FactQuery::HostPath(p) => {
                if facts.host_paths.contains_key(&p) {
                    continue;
                }
                // Counted before this request's first pin (`container.bind.pin_limit`).
                if let (Some(s), None) = (pins, facts.pins_in_use) {
                    facts.pins_in_use = Some(s.held());
                }
                let ws = facts.env.workspace.clone();
                let mut sockets = facts.env.daemon_sockets.clone();
                sockets.push(facts.env.proxy_socket.clone());
                let (p2, store) = (p.clone(), pins.cloned());
                let (fact, pin) = tokio::task::spawn_blocking(move || match store {
                    Some(s) => s.pin(&p2, &sockets),
                    None => (crate::hostfs::resolve(Path::new(&ws), &p2, &sockets), None),
                })
                .await
                .map_err(|e| FactError::Daemon {
                    what: p.clone(),
                    reason: e.to_string(),
                })?;
                if let Some(pin) = pin {
                    facts.pins.insert(crate::hostfs::clean(&p), pin);
                }
                facts.host_paths.insert(p, fact);
            }
            FactQuery::Container(r) => {
                let fact = container_fact(up, known, &r).await?;
                facts.containers.insert(r, fact);
            }
            FactQuery::Exec(id) => {
                let cid = match known.and_then(|k| k.cached_exec(&id)) {
                    Some(c) => Some(c),
                    None => {
                        let v =
                            daemon_get(up, &format!("/exec/{}/json", pct::component(&id))).await?;
                        let cid = v
                            .as_ref()
                            .and_then(Json::as_object)
                            .map(|o| text(Some(o), "ContainerID"));
                        if let (Some(k), Some(c)) = (known, &cid) {
                            k.store_exec(&id, c);
                        }
                        cid
                    }
                };
                facts.execs.insert(id, cid);
            }
            FactQuery::Network(r) => {
                let v = daemon_get(up, &format!("/networks/{}", pct::component(&r))).await?;
                let fact = v.as_ref().and_then(Json::as_object).map(|o| NetworkFact {
                    id: text(Some(o), "Id"),
                    name: text(Some(o), "Name"),
                    driver: text(Some(o), "Driver"),
                    options: str_pairs(Some(o), "Options"),
                    raw: Json::Object(o.clone()),
                });
                facts.networks.insert(r, fact);
            }
            FactQuery::Volume(r) => {
                let v = daemon_get(up, &format!("/volumes/{}", pct::component(&r))).await?;
                let fact = v.as_ref().and_then(Json::as_object).map(|o| VolumeFact {
                    name: text(Some(o), "Name"),
                    driver: text(Some(o), "Driver"),
                    options: str_pairs(Some(o), "Options"),
                });
                facts.volumes.insert(r, fact);
            }
            FactQuery::Image(r) => {
                let v = daemon_get(up, &format!("/images/{}/json", pct::component(&r))).await?;
                let fact = v.as_ref().and_then(Json::as_object).map(|o| {
                    let cfg = o.object("Config").ok().flatten();
                    let ports = cfg.and_then(|c| c.object("ExposedPorts").ok().flatten());
                    ImageFact {
                        exposed_ports: ports
                            .map(|p| p.entries().map(|(k, _)| k.to_owned()).collect())
                            .unwrap_or_default(),
                    }
                });
                facts.images.insert(r, fact);
            }
            FactQuery::ContainerCount => {
                let v = daemon_get(up, "/containers/json?all=1").await?;
                let n = match v {
                    Some(Json::Array(a)) => a.len() as u64,
                    _ => {
                        return Err(FactError::Daemon {
                            what: "container count".into(),
                            reason: "unexpected answer".into(),
                        });
                    }
                };
                facts.container_count = Some(n);
            }
            FactQuery::SwarmState => {
                let info = daemon_get(up, "/info").await?;
                let state = info
                    .as_ref()
                    .and_then(Json::as_object)
                    .and_then(|o| o.object("Swarm").ok().flatten())
                    .map(|s| text(Some(s), "LocalNodeState"));
                facts.swarm_state = Some(state.unwrap_or_default());
            }
            // Surface issue: the host's routes, for network subnets.
            FactQuery::HostRoutes => {
                // The daemon's namespace, not the proxy's; `daemon_sockets[0]` is the upstream
                // socket (`cli::proxy`).
                let socket = facts
                    .env
                    .daemon_sockets
                    .first()
                    .cloned()
                    .unwrap_or_default();
                let routes = tokio::task::spawn_blocking(move || {
                    crate::hostnet::daemon_routes(Path::new(&socket))
                })
                .await
                .map_err(|e| FactError::Daemon {
                    what: "host routes".into(),
                    reason: e.to_string(),
                })?
                .map_err(|e| FactError::Daemon {
                    what: "host routes".into(),
                    reason: e.to_string(),
                })?;
                facts.host_routes = Some(routes);
            }
        }
    }
    Ok(())
}
