//! `Runtimes`: one `Runtime` to the verbs, dispatching on the workspace's selected kind. A
//! standard workspace's network namespace (`wsnet`) is made here, at `up`, and handed to
//! every command; it is released at `down` and `destroy`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::wsnet::{self, Net};
use super::{BoxFut, Chunk, RunSpec, Runtime, RuntimeKind};
use crate::error::{WsError, WsResult};
use crate::model::ExecResult;

/// The standard runtime and, when the service can run one, the docker-compose runtime.
pub struct Runtimes {
    pub standard: Arc<dyn Runtime>,
    pub docker: Option<Arc<dyn Runtime>>,
    /// Why there is no docker-compose runtime, said to callers that ask for one.
    pub docker_unavailable: String,
    /// Workspace networks (root only); `None` runs standard commands on the host's network.
    pub net: Option<Arc<Net>>,
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

    /// The network of a standard workspace, when there is one to manage.
    fn standard_net(&self, spec: &RunSpec) -> Option<(Arc<Net>, std::path::PathBuf)> {
        let net = self
            .net
            .as_ref()
            .filter(|_| spec.kind == RuntimeKind::Standard)?;
        Some((net.clone(), wsnet::ns_path(&spec.ws_dir)))
    }
}

/// Runs a (blocking: `ip`, a lock) network step off the async workers.
async fn net_step(
    what: &'static str,
    f: impl FnOnce() -> Result<(), wsnet::NetError> + Send + 'static,
) -> WsResult<()> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| WsError::Internal(format!("{what}: {e}")))?
        .map_err(|e| WsError::Internal(format!("{what}: {e}")))
}

impl Runtime for Runtimes {
    fn exec<'a>(
        &'a self,
        spec: &'a RunSpec,
        command: &'a str,
        timeout: Option<Duration>,
        sink: Option<mpsc::Sender<Chunk>>,
    ) -> BoxFut<'a, WsResult<ExecResult>> {
        let rt = match self.of(spec) {
            Ok(rt) => rt,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let Some((net, ns)) = self.standard_net(spec) else {
            return rt.exec(spec, command, timeout, sink);
        };
        Box::pin(async move {
            // INVARIANT: never the host's namespace; made here if a call finds it missing.
            if !net.is_ready(&ns, spec.uid) {
                let (ns, uid) = (ns.clone(), spec.uid);
                net_step("the workspace's network", move || net.ensure(&ns, uid)).await?;
            }
            let mut inner = spec.clone();
            inner.netns = Some(ns);
            rt.exec(&inner, command, timeout, sink).await
        })
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
        let rt = match self.of(spec) {
            Ok(rt) => rt,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let Some((net, ns)) = self.standard_net(spec) else {
            return rt.up(spec);
        };
        Box::pin(async move {
            let uid = spec.uid;
            net_step("the workspace's network", move || net.ensure(&ns, uid)).await?;
            rt.up(spec).await
        })
    }

    fn down<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<Vec<String>>> {
        let net = self.standard_net(spec);
        let down: BoxFut<'a, WsResult<Vec<String>>> = match self.of(spec) {
            Ok(rt) => rt.down(spec),
            Err(_) => Box::pin(async { Ok(Vec::new()) }),
        };
        Box::pin(async move {
            let stopped = down.await?;
            if let Some((net, ns)) = net {
                let uid = spec.uid;
                net_step("releasing the workspace's network", move || {
                    net.release(&ns, uid)
                })
                .await?;
            }
            Ok(stopped)
        })
    }

    fn destroy<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, WsResult<()>> {
        let net = self.standard_net(spec);
        let destroy: BoxFut<'a, WsResult<()>> = match self.of(spec) {
            Ok(rt) => rt.destroy(spec),
            Err(_) => Box::pin(async { Ok(()) }),
        };
        Box::pin(async move {
            destroy.await?;
            if let Some((net, ns)) = net {
                let uid = spec.uid;
                net_step("releasing the workspace's network", move || {
                    net.release(&ns, uid)
                })
                .await?;
            }
            Ok(())
        })
    }

    fn answers<'a>(&'a self, spec: &'a RunSpec) -> BoxFut<'a, bool> {
        Box::pin(async move {
            match self.of(spec) {
                Ok(rt) => rt.answers(spec).await,
                Err(_) => false,
            }
        })
    }

    fn dead_parts(&self, spec: &RunSpec) -> Vec<String> {
        let mut dead = Vec::new();
        if let Some((net, ns)) = self.standard_net(spec)
            && !net.is_ready(&ns, spec.uid)
        {
            dead.push("the workspace's network namespace".to_string());
        }
        if let Ok(rt) = self.of(spec) {
            dead.extend(rt.dead_parts(spec));
        }
        dead
    }

    fn is_up(&self, spec: &RunSpec) -> bool {
        let net_up = self
            .standard_net(spec)
            .is_none_or(|(net, ns)| net.is_ready(&ns, spec.uid));
        net_up && self.of(spec).map(|rt| rt.is_up(spec)).unwrap_or(false)
    }
}
