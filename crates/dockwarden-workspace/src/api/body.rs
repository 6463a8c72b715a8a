//! Reading request bodies under a size cap.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

use crate::error::{WsError, WsResult};

/// JSON request bodies are small.
pub const MAX_JSON: usize = 1024 * 1024;

/// Reads the whole body; `Ok(None)` when it is longer than `limit`.
pub async fn read_capped(mut body: Incoming, limit: usize) -> WsResult<Option<Bytes>> {
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| WsError::Invalid(format!("reading request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Ok(None);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Some(buf.freeze()))
}

/// Reads and decodes a JSON body; an empty body decodes as `{}`.
pub async fn json<T: DeserializeOwned>(body: Incoming) -> WsResult<T> {
    let data = read_capped(body, MAX_JSON)
        .await?
        .ok_or_else(|| WsError::Invalid(format!("request body exceeds {MAX_JSON} bytes")))?;
    let data: &[u8] = if data.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &data
    };
    serde_json::from_slice(data).map_err(|e| WsError::Invalid(format!("invalid request body: {e}")))
}
