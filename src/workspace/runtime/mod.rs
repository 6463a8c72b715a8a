//! The `Runtime` seam: where a workspace's commands run.
//!
//! `LocalRuntime` runs them as real processes on this machine. A later runtime can run them
//! in a container with a private dockerd, or on another host, behind the same trait.

mod local;
mod procs;
pub mod select;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

pub use local::LocalRuntime;
use tokio::sync::mpsc;

use crate::workspace::error::WsResult;
use crate::workspace::model::ExecResult;

/// A boxed future, so the trait stays object-safe.
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a runtime needs to run a command for one workspace.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub workspace_id: String,
    pub uid: u32,
    pub gid: u32,
    pub worktree: PathBuf,
    pub home: PathBuf,
    /// Workspace env, secrets and per-call env, already merged.
    pub env: BTreeMap<String, String>,
}

/// Which stream a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A piece of output, forwarded as it arrives when the caller streams.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub stream: Stream,
    pub data: Vec<u8>,
}

/// Where a workspace runs.
pub trait Runtime: Send + Sync {
    /// Runs `command` with a shell; on timeout kills its process group and returns 124.
    fn exec<'a>(
        &'a self,
        spec: &'a RunSpec,
        command: &'a str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, WsResult<ExecResult>>;

    /// Stops every process of the workspace; returns how many were signalled.
    fn stop<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<u32>>;

    /// Whether commands run under the workspace's own uid (false when not root).
    fn isolates_users(&self) -> bool;
}
