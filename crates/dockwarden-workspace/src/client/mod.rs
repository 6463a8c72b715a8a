//! A small HTTP client for the API over its Unix socket (used by `dockwarden ws`).

pub mod calls;
mod resources;

use std::path::PathBuf;

use bytes::Bytes;
use dockwarden_policy::api::pct;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The service answered with an error body.
    #[error("{message} ({code})")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error(
        "cannot reach the workspace service at `{socket}`: {detail}; is `dockwarden serve` running?"
    )]
    Connect { socket: String, detail: String },
    #[error("talking to the workspace service: {0}")]
    Transport(String),
}

/// A client bound to one socket path.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
}

fn transport(e: impl std::fmt::Display) -> ClientError {
    ClientError::Transport(e.to_string())
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Client {
            socket: socket.into(),
        }
    }

    /// Sends one request and returns the status and the (unread) body.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(StatusCode, Incoming), ClientError> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| ClientError::Connect {
                socket: self.socket.display().to_string(),
                detail: e.to_string(),
            })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(transport)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "dockwarden")
            .header(header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body)))
            .map_err(transport)?;
        let resp = sender.send_request(req).await.map_err(transport)?;
        Ok((resp.status(), resp.into_body()))
    }

    /// Sends a request and returns the raw answer, or the API error.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<Vec<u8>, ClientError> {
        let (status, incoming) = self.send(method, path, body, content_type).await?;
        let data = incoming
            .collect()
            .await
            .map_err(transport)?
            .to_bytes()
            .to_vec();
        if status.is_success() {
            Ok(data)
        } else {
            Err(api_error(status, &data))
        }
    }

    /// Sends JSON (or nothing) and decodes the JSON answer.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, ClientError> {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let data = self.raw(method, path, body, "application/json").await?;
        serde_json::from_slice(&data).map_err(transport)
    }

    /// Sends a request whose answer is NDJSON events; calls `on_event` for each and returns
    /// the final `result`.
    pub async fn stream(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
        mut on_event: impl FnMut(&serde_json::Value),
    ) -> Result<serde_json::Value, ClientError> {
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, mut incoming) = self.send(method, path, body, "application/json").await?;
        if !status.is_success() {
            let data = incoming.collect().await.map_err(transport)?.to_bytes();
            return Err(api_error(status, &data));
        }
        let mut pending = Vec::new();
        while let Some(frame) = incoming.frame().await {
            let Ok(data) = frame.map_err(transport)?.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=nl).collect();
                let event: serde_json::Value = serde_json::from_slice(&line).map_err(transport)?;
                match event["type"].as_str() {
                    Some("result") => return Ok(event["result"].clone()),
                    Some("error") => {
                        return Err(api_error(
                            StatusCode::OK,
                            event["error"].to_string().as_bytes(),
                        ));
                    }
                    _ => on_event(&event),
                }
            }
        }
        Err(ClientError::Transport(
            "the stream ended without a result".into(),
        ))
    }
}

fn api_error(status: StatusCode, data: &[u8]) -> ClientError {
    let v: serde_json::Value = serde_json::from_slice(data).unwrap_or_default();
    ClientError::Api {
        status: status.as_u16(),
        code: v["code"].as_str().unwrap_or("unknown").to_string(),
        message: v["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(data).into_owned()),
    }
}

/// Percent-encodes a query value or path segment; `/` stays readable.
pub fn enc(s: &str) -> String {
    pct::encode(s, pct::PATH_VALUE)
}
