//! The `Runtime` seam: where a workspace's commands run.
//!
//! `LocalRuntime` runs them as real processes on this machine (the `standard` runtime).
//! `DockerRuntime` (`docker-compose`) runs them the same way, with a private dockerd behind
//! a dockwarden proxy as `DOCKER_HOST`. `Runtimes` dispatches on the workspace's selected
//! kind, so the verbs see one runtime. Either way the commands run in a network namespace of
//! the workspace's own with one link to the host (`wsnet`).

mod dispatch;
pub mod docker;
mod local;
pub(crate) mod procs;
pub mod select;
pub mod wsnet;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

pub use dispatch::Runtimes;
pub use docker::{DockerConfig, DockerRuntime};
pub use local::LocalRuntime;
pub use select::{Evidence, RuntimeKind, Selection, Source};
use tokio::sync::mpsc;

use crate::error::WsResult;
use crate::model::ExecResult;

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
    /// The workspace's own directory (worktree, home and runtime state live beneath it).
    pub ws_dir: PathBuf,
    /// Which runtime the workspace uses.
    pub kind: RuntimeKind,
    /// Network namespace to run commands in (set by `DockerRuntime`, and by `Runtimes` for a
    /// standard workspace).
    pub netns: Option<PathBuf>,
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

    /// Brings the workspace's environment up (namespace, daemon, proxy) and waits until it
    /// answers; idempotent. Nothing to do for processes on this machine.
    fn up<'a>(&'a self, _spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Stops the environment (containers, daemon, proxy, namespace), keeping its data.
    /// Returns what was stopped, for the caller's report.
    fn down<'a>(&'a self, _spec: &'a RunSpec) -> BoxFut<'a, WsResult<Vec<String>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Removes everything the environment keeps for the workspace (after `down`).
    fn destroy<'a>(&'a self, _spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Whether the environment of this workspace is up (always true without one).
    fn is_up(&self, _spec: &RunSpec) -> bool {
        true
    }

    /// Whether the environment's daemon answers now (always true without one). `is_up`
    /// reads the process table, which can lag a daemon's death by a moment.
    fn answers<'a>(&'a self, _spec: &'a RunSpec) -> BoxFut<'a, bool> {
        Box::pin(async { true })
    }

    /// The parts of the environment that are not running, each with how it ended and the
    /// log to read (`heal` restarts them). Empty when `is_up`.
    fn dead_parts(&self, _spec: &RunSpec) -> Vec<String> {
        Vec::new()
    }
}
