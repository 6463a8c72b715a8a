//! One method per API call, so the CLI only maps flags to calls and renders answers.

use http::Method;
use serde_json::Value;

use super::{Client, ClientError, enc};

type R<T> = Result<T, ClientError>;

/// A file operation other than read and write (which carry raw bytes).
#[derive(Debug, Clone)]
pub enum FileCall {
    List { path: String },
    Exists { path: String },
    Info { path: String },
    Mkdir { path: String, parents: bool },
    Rename { from: String, to: String },
    Copy { from: String, to: String },
    Remove { path: String, recursive: bool },
}

impl FileCall {
    fn request(&self, base: &str) -> (Method, String) {
        match self {
            FileCall::List { path } => (Method::GET, format!("{base}/list?path={}", enc(path))),
            FileCall::Exists { path } => (Method::GET, format!("{base}/exists?path={}", enc(path))),
            FileCall::Info { path } => (Method::GET, format!("{base}/info?path={}", enc(path))),
            FileCall::Mkdir { path, parents } => (
                Method::POST,
                format!("{base}/mkdir?path={}&parents={parents}", enc(path)),
            ),
            FileCall::Rename { from, to } => (
                Method::POST,
                format!("{base}/rename?from={}&to={}", enc(from), enc(to)),
            ),
            FileCall::Copy { from, to } => (
                Method::POST,
                format!("{base}/copy?from={}&to={}", enc(from), enc(to)),
            ),
            FileCall::Remove { path, recursive } => (
                Method::DELETE,
                format!("{base}?path={}&recursive={recursive}", enc(path)),
            ),
        }
    }
}

/// `?meta.k=v&...` for a metadata filter.
pub fn meta_query(pairs: &[(String, String)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("meta.{}={}", enc(k), enc(v)))
        .collect();
    if q.is_empty() {
        String::new()
    } else {
        format!("?{}", q.join("&"))
    }
}

fn ws_path(id: &str) -> String {
    format!("/v1/workspaces/{}", enc(id))
}

impl Client {
    pub async fn create(&self, body: Value) -> R<Value> {
        self.json(Method::POST, "/v1/workspaces", Some(body)).await
    }

    /// `create`, handing restore progress of a fork to `on_progress`.
    pub async fn create_streaming(&self, body: Value, on_progress: impl FnMut(&Value)) -> R<Value> {
        self.stream(
            Method::POST,
            "/v1/workspaces?stream=1",
            Some(body),
            on_progress,
        )
        .await
    }

    pub async fn info(&self, id: &str) -> R<Value> {
        self.json(Method::GET, &ws_path(id), None).await
    }

    pub async fn snapshots(&self, id: &str) -> R<Value> {
        self.json(Method::GET, &format!("{}/snapshots", ws_path(id)), None)
            .await
    }

    pub async fn list(&self, meta: &[(String, String)]) -> R<Value> {
        self.json(
            Method::GET,
            &format!("/v1/workspaces{}", meta_query(meta)),
            None,
        )
        .await
    }

    pub async fn delete(&self, id: &str) -> R<Value> {
        self.json(Method::DELETE, &ws_path(id), None).await
    }

    pub async fn delete_matching(&self, meta: &[(String, String)]) -> R<Value> {
        let path = format!("/v1/workspaces{}", meta_query(meta));
        self.json(Method::DELETE, &path, None).await
    }

    /// Runs a command and waits for its whole result.
    pub async fn exec(&self, id: &str, body: Value) -> R<Value> {
        self.json(Method::POST, &format!("{}/exec", ws_path(id)), Some(body))
            .await
    }

    /// Runs a command, handing `(stream, data)` to `on_output` as it arrives.
    pub async fn exec_streaming(
        &self,
        id: &str,
        body: Value,
        mut on_output: impl FnMut(&str, &str),
    ) -> R<Value> {
        let path = format!("{}/exec?stream=1", ws_path(id));
        self.stream(Method::POST, &path, Some(body), |ev| {
            on_output(
                ev["type"].as_str().unwrap_or("stdout"),
                ev["data"].as_str().unwrap_or_default(),
            )
        })
        .await
    }

    /// `snapshot`, `kill` or `connect`, handing progress events to `on_progress`.
    pub async fn long_op(&self, id: &str, verb: &str, on_progress: impl FnMut(&Value)) -> R<Value> {
        let path = format!("{}/{verb}?stream=1", ws_path(id));
        self.stream(Method::POST, &path, None, on_progress).await
    }

    pub async fn suspend(&self, id: &str) -> R<Value> {
        self.json(Method::POST, &format!("{}/suspend", ws_path(id)), None)
            .await
    }

    pub async fn resume(&self, id: &str) -> R<Value> {
        self.json(Method::POST, &format!("{}/resume", ws_path(id)), None)
            .await
    }

    pub async fn restart(&self, id: &str) -> R<Value> {
        self.json(Method::POST, &format!("{}/restart", ws_path(id)), None)
            .await
    }

    pub async fn reprovision(&self, id: &str, body: Value) -> R<Value> {
        self.json(
            Method::POST,
            &format!("{}/reprovision", ws_path(id)),
            Some(body),
        )
        .await
    }

    pub async fn read_file(&self, id: &str, path: &str) -> R<Vec<u8>> {
        let url = format!("{}/files/content?path={}", ws_path(id), enc(path));
        self.raw(Method::GET, &url, Vec::new(), "").await
    }

    /// Writes a file; the answer says whether the workspace was resumed for it.
    pub async fn write_file(&self, id: &str, path: &str, data: Vec<u8>) -> R<Value> {
        let url = format!("{}/files/content?path={}", ws_path(id), enc(path));
        let answer = self
            .raw(Method::PUT, &url, data, "application/octet-stream")
            .await?;
        Ok(serde_json::from_slice(&answer).unwrap_or(Value::Null))
    }

    pub async fn file_call(&self, id: &str, call: &FileCall) -> R<Value> {
        let (method, url) = call.request(&format!("{}/files", ws_path(id)));
        self.json(method, &url, None).await
    }
}
