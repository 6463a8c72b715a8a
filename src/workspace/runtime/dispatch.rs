//! `Runtimes`: one `Runtime` to the verbs, dispatching on the workspace's selected kind.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{BoxFut, Chunk, RunSpec, Runtime, RuntimeKind};
use crate::workspace::error::{WsError, WsResult};
use crate::workspace::model::ExecResult;

/// The standard runtime and, when the service can run one, the docker-compose runtime.
pub struct Runtimes {
    pub standard: Arc<dyn Runtime>,
    pub docker: Option<Arc<dyn Runtime>>,
    /// Why there is no docker-compose runtime, said to callers that ask for one.
    pub docker_unavailable: String,
}

impl Runtimes {
    fn of(&self, spec: &RunSpec) -> WsResult<&dyn Runtime> {
        match spec.kind {
            RuntimeKind::Standard => Ok(&*self.standard),
            RuntimeKind::DockerCompose => self.docker.as_deref().ok_or_else(|| {
                WsError::Invalid(format!(
                    "the docker-compose runtime is not available on this service: {}",
                    self.docker_unavailable
                ))
            }),
        }
    }
}

impl Runtime for Runtimes {
    fn exec<'a>(
        &'a self,
        spec: &'a RunSpec,
        command: &'a str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, WsResult<ExecResult>> {
        match self.of(spec) {
            Ok(rt) => rt.exec(spec, command, timeout, sink),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn stop<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<u32>> {
        match self.of(spec) {
            Ok(rt) => rt.stop(spec),
            // Without a docker runtime its processes are still local processes of the uid.
            Err(_) => self.standard.stop(spec),
        }
    }

    fn isolates_users(&self) -> bool {
        self.standard.isolates_users()
    }

    fn up<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        match self.of(spec) {
            Ok(rt) => rt.up(spec),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn down<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<Vec<String>>> {
        match self.of(spec) {
            Ok(rt) => rt.down(spec),
            Err(_) => Box::pin(async { Ok(Vec::new()) }),
        }
    }

    fn destroy<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        match self.of(spec) {
            Ok(rt) => rt.destroy(spec),
            Err(_) => Box::pin(async { Ok(()) }),
        }
    }

    fn is_up(&self, spec: &RunSpec) -> bool {
        self.of(spec).map(|rt| rt.is_up(spec)).unwrap_or(false)
    }
}
