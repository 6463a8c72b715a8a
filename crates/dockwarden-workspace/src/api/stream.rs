//! Streaming responses: newline-delimited JSON events for exec output and progress.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Frame;
use serde::Serialize;
use tokio::sync::mpsc;

use super::response::{Body, error_body};
use crate::error::WsResult;

/// Writes events to a streaming response body.
pub struct Events(mpsc::Sender<Bytes>);

impl Events {
    /// Sends one event; a gone client is ignored (the operation still completes).
    pub async fn send<T: Serialize>(&mut self, event: &T) {
        if let Ok(mut line) = serde_json::to_vec(event) {
            line.push(b'\n');
            let _ = self.0.send(Bytes::from(line)).await;
        }
    }

    /// Sends the final `result` or `error` event.
    pub async fn finish<T: Serialize>(mut self, result: WsResult<T>) {
        match result {
            Ok(v) => {
                self.send(&serde_json::json!({ "type": "result", "result": v }))
                    .await
            }
            Err(e) => {
                self.send(&serde_json::json!({ "type": "error", "error": error_body(&e) }))
                    .await
            }
        }
    }
}

/// A 200 response whose body is fed by the returned `Events`.
pub fn ndjson() -> (Events, Response<Body>) {
    let (tx, rx) = mpsc::channel(64);
    let mut resp = Response::new(ChannelBody(rx).boxed());
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/x-ndjson"),
    );
    (Events(tx), resp)
}

/// A body fed by a channel; it ends when every sender is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}
