//! The one place where errors become HTTP responses, in Docker's `{"message": ...}` shape so
//! the CLI prints `Error response from daemon: <message>`.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};

use super::body::ProxyBody;
use crate::policy::Denial;

/// Everything that can stop a request inside the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{}", .0.client_message())]
    Denied(Denial),
    #[error("dockwarden: bad request: {0}")]
    BadRequest(String),
    #[error("dockwarden: request body exceeds the {0}-byte limit for JSON bodies")]
    TooLarge(usize),
    #[error("dockwarden: cannot reach the docker daemon at `{socket}`: {reason}")]
    Upstream { socket: String, reason: String },
    /// The audit record of an allowed request could not be written; it is not forwarded.
    #[error("dockwarden: {0}; the request was not forwarded")]
    Audit(#[from] super::audit::AuditError),
    #[error("dockwarden: internal error")]
    Internal(String),
}

impl ProxyError {
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::Denied(d) if d.rule == "request.body.invalid" => StatusCode::BAD_REQUEST,
            ProxyError::Denied(_) => StatusCode::FORBIDDEN,
            ProxyError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ProxyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::Upstream { .. } => StatusCode::BAD_GATEWAY,
            ProxyError::Audit(_) => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response the client sees. Internal details are logged, never sent.
    pub fn into_response(self) -> Response<ProxyBody> {
        if let ProxyError::Internal(detail) = &self {
            tracing::warn!(error.detail = %detail, "internal error");
        }
        json_error(self.status(), &self.to_string())
    }
}

impl From<Denial> for ProxyError {
    fn from(d: Denial) -> Self {
        ProxyError::Denied(d)
    }
}

/// A Docker-style JSON error response.
pub fn json_error(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({ "message": message }).to_string();
    let mut resp = Response::new(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    resp
}
