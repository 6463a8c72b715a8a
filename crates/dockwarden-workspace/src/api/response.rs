//! The one place that turns results and errors into HTTP responses.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use serde::Serialize;
use tracing::warn;

use crate::error::WsError;

/// The body type of every response.
pub type Body = BoxBody<Bytes, Infallible>;

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(body) => bytes(status, "application/json", body),
        Err(e) => error(&WsError::Internal(format!("encoding response: {e}"))),
    }
}

/// A response with a raw body.
pub fn bytes(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

/// The HTTP status of an error code.
pub fn status_of(e: &WsError) -> StatusCode {
    match e.code() {
        "not_found" | "no_endpoint" => StatusCode::NOT_FOUND,
        "no_space" => StatusCode::INSUFFICIENT_STORAGE,
        "exists" => StatusCode::CONFLICT,
        "invalid_path" | "invalid" => StatusCode::BAD_REQUEST,
        "too_large" => StatusCode::PAYLOAD_TOO_LARGE,
        "wrong_state" => StatusCode::CONFLICT,
        "runtime_down" => StatusCode::SERVICE_UNAVAILABLE,
        "over_ceiling" => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The JSON body of an error. Internal errors are logged and never shown in detail.
pub fn error_body(e: &WsError) -> serde_json::Value {
    let message = match e.code() {
        "internal" => {
            warn!(error = %e, "internal error");
            "internal error; see the service log".to_string()
        }
        _ => e.to_string(),
    };
    serde_json::json!({ "message": message, "code": e.code() })
}

/// An error response: `{"message": ..., "code": ...}` with the matching status.
pub fn error(e: &WsError) -> Response<Body> {
    json(status_of(e), &error_body(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_do_not_leak_details() {
        let e = WsError::Internal("secret detail at /var/lib/x".into());
        let body = error_body(&e);
        assert_eq!(body["code"], "internal");
        assert!(
            !body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("secret")
        );
        assert_eq!(
            status_of(&WsError::InvalidPath("..".into())),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&WsError::TooLarge {
                path: "a".into(),
                size: 3,
                limit: 2
            }),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
