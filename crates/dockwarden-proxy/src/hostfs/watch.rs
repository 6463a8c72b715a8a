//! The pin and chown-back watcher. It follows the daemon's container events (`die`, `stop`,
//! `destroy`), releases pins when their container is destroyed, and hands container-written
//! files back (uid 0, and the daemon's remapped range when it has one: [`Owner`]) once no
//! container that uses a bind source is running, restarting or paused.
//!
//! `die` also fires before a restart-policy restart. The daemon marks the container
//! `restarting` before it emits `die`, and inspect (which waits for the container's lock)
//! tells the two apart. Events are buffered only briefly by the daemon, so the watcher
//! subscribes first, then reconciles with the container list, and reconciles again after every
//! reconnect and every few minutes.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use crate::proxy::events;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

pub use super::chown::{IdRange, Owner};
use super::chown::{Summary, Walker};
use super::pins::{PinEntry, PinStore};
use super::plan::{self, Plan};
use crate::proxy::body;
use crate::proxy::upstream::{self, Upstream};
use dockwarden_policy::api::pct;

/// Entries per blocking step of a chown walk.
const STEP: u64 = 10_000;
/// Entries per chown job; a larger tree is finished by the next event or reconciliation.
const LIMIT: u64 = 2_000_000;
const RECONCILE_EVERY: Duration = Duration::from_secs(300);

struct Job {
    root: OwnedFd,
    entry: PinEntry,
    why: &'static str,
}

/// Queues chown-back outside the event flow (after an archive was put into a container).
#[derive(Clone)]
pub struct HandBack {
    store: Arc<PinStore>,
    tx: mpsc::UnboundedSender<Job>,
}

impl HandBack {
    /// Hands back every bind source of `container` now, whatever its state: a `PUT archive`
    /// writes with the tar's owners and modes, and a created container that never starts
    /// sends no stop event.
    pub fn container(&self, container: &str, why: &'static str) {
        for entry in self.store.pins_of(container) {
            match self.store.open_root(&entry) {
                Ok(root) => {
                    let _ = self.tx.send(Job { root, entry, why });
                }
                Err(err) => {
                    tracing::warn!(pin = %entry.pin, "cannot open pin for chown-back: {err}")
                }
            }
        }
    }
}

/// Starts the watcher and its chown worker; they run until the runtime stops.
pub fn spawn(store: Arc<PinStore>, up: Upstream, owner: Owner) -> HandBack {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(worker(rx, owner));
    tokio::spawn(follow(store.clone(), up, tx.clone()));
    HandBack { store, tx }
}

/// The daemon's containers: id → state, and pin path → id for every mount source that is one
/// of our pins.
struct Listing {
    states: BTreeMap<String, String>,
    referenced: BTreeMap<String, String>,
    /// Every mount source of every container (for orphaned pins of other proxies).
    sources: BTreeSet<String>,
}

async fn get_json(up: &Upstream, path: &str) -> anyhow::Result<serde_json::Value> {
    let req = http::Request::get(upstream::uri(path)?).body(body::empty())?;
    let resp = up.request(req).await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "daemon answered {} to `{path}`",
        resp.status()
    );
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok(serde_json::from_slice(&bytes)?)
}

async fn list(up: &Upstream, store: &PinStore) -> anyhow::Result<Listing> {
    let v = get_json(up, "/containers/json?all=1").await?;
    let prefix = format!("{}/", store.dir().display());
    let mut l = Listing {
        states: BTreeMap::new(),
        referenced: BTreeMap::new(),
        sources: BTreeSet::new(),
    };
    for c in v.as_array().map(Vec::as_slice).unwrap_or_default() {
        let id = c["Id"].as_str().unwrap_or_default().to_owned();
        l.states.insert(
            id.clone(),
            c["State"].as_str().unwrap_or_default().to_owned(),
        );
        for m in c["Mounts"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let Some(src) = m["Source"].as_str() else {
                continue;
            };
            if src.starts_with(&prefix) {
                l.referenced.insert(src.to_owned(), id.clone());
            }
            l.sources.insert(src.to_owned());
        }
    }
    Ok(l)
}

/// Carries a plan out: opens every chown-back root first (through the pin), then releases,
/// then queues the walks.
fn execute(store: &PinStore, tx: &mpsc::UnboundedSender<Job>, plan: Plan) {
    let mut jobs = Vec::new();
    for (entry, why) in plan.chown {
        match store.open_root(&entry) {
            Ok(root) => jobs.push(Job { root, entry, why }),
            Err(err) => tracing::warn!(pin = %entry.pin, "cannot open pin for chown-back: {err}"),
        }
    }
    let release: Vec<String> = plan.release.into_iter().map(|e| e.pin).collect();
    store.release_all(&release);
    for j in jobs {
        let _ = tx.send(j);
    }
}

/// Brings pins in line with the daemon: orphans are handed back and released, pins of
/// stopped containers are handed back, and pins of proxies that are gone are collected.
async fn reconcile(
    store: &PinStore,
    up: &Upstream,
    tx: &mpsc::UnboundedSender<Job>,
) -> anyhow::Result<()> {
    let before = store.settled();
    let l = list(up, store).await?;
    store.adopt(&l.referenced);
    let p = plan::reconcile(&before, &store.entries(), &l.referenced, &l.states);
    let released = p.release.len();
    execute(store, tx, p);
    let orphans = store.collect_orphans(&l.sources);
    tracing::info!(
        pins = store.entries().len(),
        released,
        orphans,
        "pins reconciled with the daemon"
    );
    Ok(())
}

async fn on_event(
    store: &PinStore,
    up: &Upstream,
    tx: &mpsc::UnboundedSender<Job>,
    action: &str,
    id: &str,
) -> anyhow::Result<()> {
    if store.pins_of(id).is_empty() {
        return Ok(());
    }
    let mut l = list(up, store).await?;
    if action != "destroy" {
        // The list is a snapshot the daemon may not have updated when it emits `die`; inspect
        // takes the container's lock, so it answers after the exit was recorded (`exited`, or
        // `restarting` when a restart policy will bring it back).
        let v = get_json(up, &format!("/containers/{}/json", pct::component(id))).await?;
        l.states.insert(
            id.to_owned(),
            v["State"]["Status"].as_str().unwrap_or_default().to_owned(),
        );
    }
    tracing::debug!(
        container.id = id,
        event = action,
        state = l.states.get(id).map(String::as_str).unwrap_or("gone"),
        "container event"
    );
    execute(
        store,
        tx,
        plan::on_event(action, id, &store.entries(), &l.states),
    );
    Ok(())
}

/// Subscribes to container events, reconciles, then follows; reconnects with backoff.
async fn follow(store: Arc<PinStore>, up: Upstream, tx: mpsc::UnboundedSender<Job>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        match follow_once(&store, &up, &tx).await {
            Ok(()) => tracing::info!("daemon event stream ended; resubscribing"),
            Err(e) => tracing::warn!("daemon event stream: {e}; resubscribing"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn follow_once(
    store: &PinStore,
    up: &Upstream,
    tx: &mpsc::UnboundedSender<Job>,
) -> anyhow::Result<()> {
    let mut events = events::subscribe(up, &["die", "stop", "destroy"]).await?;
    reconcile(store, up, tx).await?;
    let mut tick = tokio::time::interval(RECONCILE_EVERY);
    tick.reset();
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev?,
            _ = tick.tick() => {
                if let Err(e) = reconcile(store, up, tx).await {
                    tracing::warn!("periodic pin reconciliation: {e}");
                }
                continue;
            }
        };
        let Some(events::Event { action, id }) = ev else {
            return Ok(());
        };
        if let Err(e) = on_event(store, up, tx, &action, &id).await {
            tracing::warn!(
                container.id = id,
                event = action,
                "handling container event: {e}"
            );
        }
    }
}

/// Runs chown jobs one at a time, each in bounded blocking steps.
async fn worker(mut rx: mpsc::UnboundedReceiver<Job>, owner: Owner) {
    while let Some(job) = rx.recv().await {
        let mut w = match Walker::new(job.root, owner) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(pin = %job.entry.pin, "chown-back cannot start: {e}");
                continue;
            }
        };
        loop {
            let res = tokio::task::spawn_blocking(move || {
                let done = w.step(STEP);
                (w, done)
            })
            .await;
            let Ok((back, done)) = res else { break };
            w = back;
            if done || w.summary.visited >= LIMIT {
                log_summary(&job.entry, job.why, &w.summary);
                break;
            }
        }
    }
}

fn log_summary(e: &PinEntry, why: &str, s: &Summary) {
    tracing::info!(
        pin = %e.pin,
        host.path = %e.source,
        container.id = e.container.as_deref().unwrap_or(""),
        reason = why,
        visited = s.visited,
        chowned = s.chowned,
        skipped.other_fs = s.skipped_other_fs,
        removed.devices = s.removed_devices,
        skipped.hardlinks = s.skipped_hardlinks,
        skipped.deep = s.skipped_deep,
        cleared.setid = s.cleared_setid,
        errors = s.errors,
        complete = s.complete,
        "chown-back"
    );
}
