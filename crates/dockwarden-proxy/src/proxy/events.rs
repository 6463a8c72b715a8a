//! The daemon's container event stream (`GET /events`), read as one event per JSON line:
//! the one reader behind the fact cache (`containers.rs`) and the chown-back watcher
//! (`hostfs/watch.rs`).

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::body;
use super::upstream::{self, Upstream};
use dockwarden_policy::api::pct;

/// One container event: what happened, to which container (full id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub action: String,
    pub id: String,
}

/// A subscription to container events, answered by the daemon.
pub struct Events {
    body: Incoming,
    buf: BytesMut,
}

/// Subscribes to the container events `actions` (`die`, `destroy`, ...).
pub async fn subscribe(up: &Upstream, actions: &[&str]) -> anyhow::Result<Events> {
    let filters = serde_json::json!({ "type": ["container"], "event": actions }).to_string();
    let path = format!("/events?filters={}", pct::component(&filters));
    let resp = up
        .request(http::Request::get(upstream::uri(&path)?).body(body::empty())?)
        .await?;
    anyhow::ensure!(
        resp.status().is_success(),
        "daemon answered {} to `/events`",
        resp.status()
    );
    Ok(Events {
        body: resp.into_body(),
        buf: BytesMut::new(),
    })
}

impl Events {
    /// The next event; `None` when the daemon ends the stream. Lines that are not an event
    /// are skipped. Cancel-safe: a partly read line stays buffered for the next call.
    pub async fn next(&mut self) -> anyhow::Result<Option<Event>> {
        loop {
            while let Some(nl) = self.buf.iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(nl + 1);
                if let Some(ev) = parse(&line) {
                    return Ok(Some(ev));
                }
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            if let Ok(data) = frame?.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

/// Pure: one line of the stream. The id is `Actor.ID`, or the legacy top-level `id`.
fn parse(line: &[u8]) -> Option<Event> {
    let ev = serde_json::from_slice::<serde_json::Value>(line).ok()?;
    let action = ev["Action"].as_str().unwrap_or_default().to_owned();
    let id = ev["Actor"]["ID"]
        .as_str()
        .or(ev["id"].as_str())
        .unwrap_or_default()
        .to_owned();
    Some(Event { action, id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_with_the_actor_id_or_the_legacy_id() {
        assert_eq!(
            parse(br#"{"Action":"die","Actor":{"ID":"abc"},"id":"old"}"#),
            Some(Event {
                action: "die".into(),
                id: "abc".into()
            })
        );
        assert_eq!(
            parse(br#"{"Action":"destroy","id":"old"}"#).map(|e| e.id),
            Some("old".into())
        );
        assert_eq!(parse(b"not json\n"), None);
    }
}
