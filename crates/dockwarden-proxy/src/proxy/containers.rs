//! What the proxy knows about the daemon's containers between requests:
//! - the containers it created, recorded in a root-only file beside the pin directory
//!   (`<pin dir>.created.json`), so a restarted proxy still knows them
//!   (`policy::facts::ContainerFact::created_here`);
//! - a cache of container inspect facts and exec → container look-ups, used only while
//!   subscribed to the daemon's container events, which invalidate it.
//!
//! INVARIANT: a cached fact is served only while the event stream is live, and a fact looked
//! up before an invalidating event is never stored after it (the generation check).

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use super::body::{self, ProxyBody};
use super::error::ProxyError;
use super::upstream::Upstream;
use crate::policy::facts::ContainerFact;

/// Cached look-ups kept at most; the cache is emptied when it grows past this.
const MAX_CACHED: usize = 4096;

#[derive(Default)]
struct Cache {
    live: bool,
    generation: u64,
    facts: HashMap<String, ContainerFact>,
    execs: HashMap<String, String>,
}

/// The proxy's containers and its cache of the daemon's.
pub struct Containers {
    path: Option<PathBuf>,
    created: Mutex<BTreeSet<String>>,
    cache: Mutex<Cache>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Containers {
    /// Loads the record at `path` (missing: none created yet). `None` keeps it in memory only.
    pub fn open(path: Option<PathBuf>) -> anyhow::Result<Self> {
        let created = match &path {
            None => BTreeSet::new(),
            Some(p) => match std::fs::read(p) {
                Ok(b) => serde_json::from_slice(&b)
                    .map_err(|e| anyhow::anyhow!("`{}`: {e}", p.display()))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
                Err(e) => return Err(anyhow::anyhow!("`{}`: {e}", p.display())),
            },
        };
        Ok(Self {
            path,
            created: Mutex::new(created),
            cache: Mutex::default(),
        })
    }

    pub fn created_here(&self, id: &str) -> bool {
        lock(&self.created).contains(id)
    }

    /// Records a container this proxy created, before its create answer reaches the client.
    pub fn record(&self, id: &str) {
        let mut g = lock(&self.created);
        if g.insert(id.to_owned()) {
            self.save(&g);
        }
    }

    fn save(&self, ids: &BTreeSet<String>) {
        let Some(path) = &self.path else { return };
        let write = || -> std::io::Result<()> {
            if ids.is_empty() {
                return std::fs::remove_file(path).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                });
            }
            let tmp = path.with_extension("json.tmp");
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec(ids).map_err(std::io::Error::other)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::warn!(path = %path.display(), "recording the containers this proxy created: {e}");
        }
    }

    /// A cached fact for `reference`, while the event stream is live; with the generation to
    /// pass back to [`store`](Self::store) after a fresh look-up.
    pub fn cached(&self, reference: &str) -> (Option<ContainerFact>, u64) {
        let g = lock(&self.cache);
        (
            g.live.then(|| g.facts.get(reference).cloned()).flatten(),
            g.generation,
        )
    }

    pub fn store(&self, reference: &str, fact: &ContainerFact, generation: u64) {
        let mut g = lock(&self.cache);
        if g.live && g.generation == generation {
            if g.facts.len() >= MAX_CACHED {
                g.facts.clear();
            }
            g.facts.insert(reference.to_owned(), fact.clone());
        }
    }

    pub fn cached_exec(&self, exec: &str) -> Option<String> {
        let g = lock(&self.cache);
        g.live.then(|| g.execs.get(exec).cloned()).flatten()
    }

    /// Exec instances never move to another container, so no generation check is needed.
    pub fn store_exec(&self, exec: &str, container: &str) {
        let mut g = lock(&self.cache);
        if g.live {
            if g.execs.len() >= MAX_CACHED {
                g.execs.clear();
            }
            g.execs.insert(exec.to_owned(), container.to_owned());
        }
    }

    /// A container event: `update` and `destroy` change what its ID's facts say; `create`,
    /// `rename` and `destroy` change what names and ID prefixes resolve to.
    fn invalidate(&self, action: &str, id: &str) {
        let mut g = lock(&self.cache);
        g.generation += 1;
        match action {
            "update" => g.facts.retain(|_, f| f.id != id),
            _ => g.facts.retain(|k, f| f.id != id && k == &f.id),
        }
        if action == "destroy" {
            g.execs.retain(|_, c| c != id);
        }
    }

    fn set_live(&self, live: bool) {
        let mut g = lock(&self.cache);
        g.generation += 1;
        g.live = live;
        g.facts.clear();
        g.execs.clear();
    }

    /// Forgets recorded containers that the daemon no longer has. `before` is the record taken
    /// before listing, so a container created meanwhile is kept.
    fn prune(&self, before: &BTreeSet<String>, existing: &BTreeSet<String>) {
        let mut g = lock(&self.created);
        let n = g.len();
        g.retain(|id| !before.contains(id) || existing.contains(id));
        if g.len() != n {
            self.save(&g);
        }
    }

    /// Follows the daemon's container events for as long as the runtime runs.
    pub fn spawn(self: &Arc<Self>, up: Upstream) {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = me.follow(&up).await {
                    tracing::warn!("container event stream for the fact cache: {e}; resubscribing");
                }
                me.set_live(false);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }

    async fn follow(&self, up: &Upstream) -> anyhow::Result<()> {
        let mut events =
            super::events::subscribe(up, &["create", "destroy", "rename", "update"]).await?;
        self.set_live(true);
        let before = lock(&self.created).clone();
        let list = super::facts::daemon_get(up, "/containers/json?all=1").await?;
        let existing: BTreeSet<String> = match &list {
            Some(crate::api::json::Json::Array(a)) => a
                .iter()
                .filter_map(|c| c.as_object()?.str("Id").ok().flatten().map(str::to_owned))
                .collect(),
            _ => anyhow::bail!("unexpected container list"),
        };
        self.prune(&before, &existing);
        while let Some(super::events::Event { action, id }) = events.next().await? {
            self.invalidate(&action, &id);
            if action == "destroy" {
                self.prune(&BTreeSet::from([id]), &BTreeSet::new());
            }
        }
        Ok(())
    }
}

/// After the daemon answered a container create: records the new container as this proxy's.
pub async fn after_create(
    containers: &Containers,
    resp: Result<Response<ProxyBody>, ProxyError>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let resp = match resp {
        Ok(r) if r.status() == StatusCode::CREATED => r,
        other => return other,
    };
    let (parts, b) = resp.into_parts();
    let bytes: Bytes = b
        .collect()
        .await
        .map_err(|e| ProxyError::Internal(format!("reading the create answer: {e}")))?
        .to_bytes();
    match serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["Id"].as_str().map(str::to_owned))
    {
        Some(id) => containers.record(&id),
        None => tracing::warn!(
            "create answer without an `Id`: the container is not recorded as this proxy's"
        ),
    }
    Ok(Response::from_parts(parts, body::full(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::json::Json;

    fn fact(id: &str) -> ContainerFact {
        ContainerFact {
            id: id.to_owned(),
            host_config: Json::Null,
            labels: Vec::new(),
            created_here: false,
            volumes: Vec::new(),
        }
    }

    fn live() -> Containers {
        let c = Containers::open(None).expect("in memory");
        c.set_live(true);
        c
    }

    #[test]
    fn a_look_up_started_before_an_invalidating_event_is_not_stored_after_it() {
        let c = live();
        let (hit, generation) = c.cached("web");
        assert!(hit.is_none());
        // The rename event (a foreign container took the name) lands while the inspect of
        // `web` is in flight: its answer may describe the old holder of the name.
        c.invalidate("rename", "foreign-id");
        c.store("web", &fact("own-id"), generation);
        assert!(c.cached("web").0.is_none(), "a stale look-up was cached");
        // A look-up that started after the event is stored.
        let (_, generation) = c.cached("web");
        c.store("web", &fact("foreign-id"), generation);
        assert_eq!(
            c.cached("web").0.map(|f| f.id).as_deref(),
            Some("foreign-id")
        );
    }

    #[test]
    fn rename_create_and_destroy_drop_every_name_keyed_fact_and_update_drops_the_ids() {
        for (action, name_kept, other_id_kept) in [
            ("rename", false, true),
            ("create", false, true),
            ("destroy", false, true),
            ("update", true, true),
        ] {
            let c = live();
            let g = c.cached("x").1;
            c.store("web", &fact("own-id"), g);
            c.store("own-id", &fact("own-id"), g);
            c.store("other-id", &fact("other-id"), g);
            c.store("db", &fact("other-id"), g);
            // An event about a third container: names may now resolve elsewhere.
            c.invalidate(action, "third-id");
            assert_eq!(c.cached("web").0.is_some(), name_kept, "{action}: `web`");
            assert_eq!(c.cached("db").0.is_some(), name_kept, "{action}: `db`");
            assert_eq!(c.cached("other-id").0.is_some(), other_id_kept, "{action}");
            assert!(
                c.cached("own-id").0.is_some(),
                "{action}: an ID still names its container"
            );
            // An event about the container itself drops its ID's facts too.
            c.invalidate(action, "own-id");
            assert!(c.cached("own-id").0.is_none(), "{action}: its own event");
        }
    }

    #[test]
    fn nothing_is_served_or_stored_while_the_event_stream_is_down() {
        let c = live();
        let g = c.cached("web").1;
        c.store("web", &fact("own-id"), g);
        c.store_exec("e1", "own-id");
        c.set_live(false);
        assert!(c.cached("web").0.is_none());
        assert!(c.cached_exec("e1").is_none());
        let g = c.cached("web").1;
        c.store("web", &fact("own-id"), g);
        c.store_exec("e1", "own-id");
        c.set_live(true);
        assert!(c.cached("web").0.is_none(), "stored while down");
        assert!(c.cached_exec("e1").is_none(), "stored while down");
    }
}
