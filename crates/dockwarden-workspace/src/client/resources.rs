//! Client calls of the resources API: status, resize, resize requests, approve / reject.

use http::Method;
use serde_json::Value;

use super::{Client, ClientError, enc};

type R<T> = Result<T, ClientError>;

impl Client {
    pub async fn status(&self, id: &str) -> R<Value> {
        self.json(
            Method::GET,
            &format!("/v1/workspaces/{}/status", enc(id)),
            None,
        )
        .await
    }

    pub async fn resize(&self, id: &str, body: Value) -> R<Value> {
        self.json(
            Method::POST,
            &format!("/v1/workspaces/{}/resize", enc(id)),
            Some(body),
        )
        .await
    }

    pub async fn resize_requests(&self, id: &str) -> R<Value> {
        let path = format!("/v1/workspaces/{}/resize-requests", enc(id));
        self.json(Method::GET, &path, None).await
    }

    /// Approves (`true`) or rejects a pending resize request.
    pub async fn decide(&self, request: &str, approve: bool) -> R<Value> {
        let verb = if approve { "approve" } else { "reject" };
        let path = format!("/v1/resize-requests/{}/{verb}", enc(request));
        self.json(Method::POST, &path, None).await
    }
}
