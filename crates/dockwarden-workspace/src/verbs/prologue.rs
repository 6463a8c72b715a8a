//! The verb prologue: look the workspace up and check its status, take the verb's lock,
//! then look it up and check again, since whatever held the lock may have changed it.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedMutexGuard, OwnedRwLockReadGuard};

use crate::error::{WsError, WsResult};
use crate::model::Workspace;
use crate::service::{Service, WsLive};
use crate::status::Verb;

/// The workspace's exclusive-operation lock, held until dropped.
pub struct OpGuard {
    _op: OwnedMutexGuard<()>,
    live: Arc<WsLive>,
}

impl OpGuard {
    async fn acquire(live: Arc<WsLive>) -> OpGuard {
        OpGuard {
            _op: live.op.clone().lock_owned().await,
            live,
        }
    }

    /// The in-memory state of the workspace locked.
    pub fn live(&self) -> &Arc<WsLive> {
        &self.live
    }
}

/// A shared hold on the workspace's run gate: no stop or restore runs until dropped.
pub struct RunGuard {
    _gate: OwnedRwLockReadGuard<()>,
    live: Arc<WsLive>,
}

impl RunGuard {
    async fn acquire(live: Arc<WsLive>) -> RunGuard {
        RunGuard {
            _gate: live.run_gate.clone().read_owned().await,
            live,
        }
    }

    /// The in-memory state of the workspace gated.
    pub fn live(&self) -> &Arc<WsLive> {
        &self.live
    }
}

impl Service {
    /// Looks `id` up and checks that `verb` may run in its status (`WrongState` with the
    /// verb's hint if not).
    pub fn checked(&self, id: &str, verb: Verb) -> WsResult<Workspace> {
        let ws = self.store.require(id)?;
        if verb.permits(ws.status) {
            Ok(ws)
        } else {
            Err(WsError::WrongState {
                verb: verb.name(),
                hint: verb.hint(ws.status),
                id: ws.id,
                status: ws.status,
            })
        }
    }

    /// The prologue of an exclusive verb: checked, the op lock, checked again.
    pub async fn exclusive(&self, id: &str, verb: Verb) -> WsResult<(OpGuard, Workspace)> {
        self.locked(id, verb, OpGuard::acquire).await
    }

    /// The prologue of a command: checked, the run gate shared, checked again.
    pub async fn gated(&self, id: &str, verb: Verb) -> WsResult<(RunGuard, Workspace)> {
        self.locked(id, verb, RunGuard::acquire).await
    }

    async fn locked<G, F>(
        &self,
        id: &str,
        verb: Verb,
        lock: impl FnOnce(Arc<WsLive>) -> F,
    ) -> WsResult<(G, Workspace)>
    where
        F: Future<Output = G>,
    {
        // A verb on a suspended workspace wakes it (`suspend` itself excepted).
        if verb.thaws_first() {
            self.thaw_if_suspended(id).await?;
        }
        // Checked first so a refusal does not wait behind a long operation.
        self.checked(id, verb)?;
        let guard = lock(self.live(id)).await;
        // INVARIANT: checked again under the lock: a kill, delete or reprovision that held
        // it may have changed the status, or removed the workspace, meanwhile.
        let ws = self.checked(id, verb)?;
        Ok((guard, ws))
    }
}
