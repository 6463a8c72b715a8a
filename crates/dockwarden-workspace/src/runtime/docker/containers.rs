//! Stopping a workspace's running containers at `down`, all at once and with a short grace.
//!
//! `POST /containers/{id}/stop?t=N` counts its grace in whole seconds, and a PID 1 that
//! ignores SIGTERM (`sleep`, many shells) always waits it out: two such containers made a
//! kill take 3.4 s at `t=3`. So each container is stopped the way `stop` does it, with the
//! grace in milliseconds: its own stop signal (`Config.StopSignal`, else SIGTERM) through
//! `POST /kill`, which also marks it stopped by hand (no restart policy brings it back), then
//! `POST /wait?condition=not-running` for at most [`GRACE`], then `stop?t=0` (SIGKILL, and
//! dockerd's own cleanup) for one still running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Method;

use super::api;

/// How long a container gets to exit on its stop signal before it is killed.
pub const GRACE: Duration = Duration::from_millis(400);
/// How long one API call may take (a kill, an inspect).
const CALL_WITHIN: Duration = Duration::from_secs(10);
/// How long the forced stop may take (SIGKILL, then dockerd's cleanup).
const FORCE_WITHIN: Duration = Duration::from_secs(30);

/// Why a container could not be stopped.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    #[error("{what} of container {id}: {source}")]
    Call {
        what: &'static str,
        id: String,
        source: std::io::Error,
    },
    #[error("{what} of container {id}: HTTP {status}: {body}")]
    Refused {
        what: &'static str,
        id: String,
        status: u16,
        body: String,
    },
}

/// Stops every container in `ids` concurrently, each with `grace`; returns one result per
/// container, in no particular order.
pub async fn stop_all(
    socket: &Path,
    ids: &[String],
    grace: Duration,
) -> Vec<Result<(), StopError>> {
    let mut calls = tokio::task::JoinSet::new();
    for id in ids {
        calls.spawn(stop_one(socket.to_path_buf(), id.clone(), grace));
    }
    let mut out = Vec::with_capacity(ids.len());
    // A panicked task is dropped: its container is left to dockerd's own shutdown.
    while let Some(r) = calls.join_next().await {
        if let Ok(r) = r {
            out.push(r);
        }
    }
    out
}

/// Stop signal, `grace`, then the force for one still running.
async fn stop_one(socket: PathBuf, id: String, grace: Duration) -> Result<(), StopError> {
    // Gone (`--rm`, or removed meanwhile): nothing to stop.
    let Some(signal) = stop_signal(&socket, &id).await? else {
        return Ok(());
    };
    let path = format!(
        "/containers/{id}/kill?signal={}",
        dockwarden_policy::api::pct::component(&signal)
    );
    // 409: not running (any more); 404: gone. Nothing to wait for.
    let sent = checked(
        &socket,
        &id,
        "signalling",
        &path,
        CALL_WITHIN,
        &[204, 404, 409],
    )
    .await?;
    if sent != 204 {
        return Ok(());
    }
    let wait = format!("/containers/{id}/wait?condition=not-running");
    if let Ok((200 | 404, _)) = api::call(&socket, Method::POST, &wait, grace).await {
        return Ok(());
    }
    let force = format!("/containers/{id}/stop?t=0");
    checked(
        &socket,
        &id,
        "killing",
        &force,
        FORCE_WITHIN,
        &[204, 304, 404],
    )
    .await?;
    Ok(())
}

/// The container's own stop signal (`Config.StopSignal`), SIGTERM when it has none; `None`
/// when the container is gone.
async fn stop_signal(socket: &Path, id: &str) -> Result<Option<String>, StopError> {
    let path = format!("/containers/{id}/json");
    let (status, body) = api::call(socket, Method::GET, &path, CALL_WITHIN)
        .await
        .map_err(|source| StopError::Call {
            what: "inspecting",
            id: id.to_string(),
            source,
        })?;
    match status {
        200 => Ok(Some(signal_of(&body))),
        404 => Ok(None),
        _ => Err(refused("inspecting", id, status, &body)),
    }
}

/// Pure: the stop signal in an inspect answer, SIGTERM when it names none.
fn signal_of(inspect: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(inspect)
        .ok()
        .and_then(|v| v["Config"]["StopSignal"].as_str().map(str::to_string))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "SIGTERM".into())
}

/// A POST whose status must be one of `ok`; returns the status.
async fn checked(
    socket: &Path,
    id: &str,
    what: &'static str,
    path: &str,
    within: Duration,
    ok: &[u16],
) -> Result<u16, StopError> {
    let (status, body) = api::call(socket, Method::POST, path, within)
        .await
        .map_err(|source| StopError::Call {
            what,
            id: id.to_string(),
            source,
        })?;
    if ok.contains(&status) {
        Ok(status)
    } else {
        Err(refused(what, id, status, &body))
    }
}

fn refused(what: &'static str, id: &str, status: u16, body: &[u8]) -> StopError {
    StopError::Refused {
        what,
        id: id.to_string(),
        status,
        body: String::from_utf8_lossy(body).trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_signal_is_the_container_own_else_sigterm() {
        let with = br#"{"Config":{"StopSignal":"SIGQUIT"}}"#;
        assert_eq!(signal_of(with), "SIGQUIT");
        for none in [
            &br#"{"Config":{}}"#[..],
            br#"{"Config":{"StopSignal":""}}"#,
            b"not json",
        ] {
            assert_eq!(signal_of(none), "SIGTERM");
        }
    }
}
