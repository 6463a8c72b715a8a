//! Workspace processes never outlive the service unsupervised.
//!
//! On SIGTERM the service stops every process of every live workspace before it exits. After a crash (`kill -9`) the restarted service finds every
//! process of each workspace again by its uid (each workspace runs as its own uid; its
//! commands also run in their own process groups) and stops it. Either way the workspace
//! records that its commands were interrupted, and a live workspace's `run` script is
//! started again, so the dev server is back with the service.

use std::collections::BTreeMap;
use std::time::Duration;

use tracing::{info, warn};

use crate::events::Interruption;
use crate::model::{Workspace, now_ms};
use crate::service::Service;
use crate::store;

/// How long the shutdown waits for one workspace's commands to end once signalled.
const STOP_BOUND: Duration = Duration::from_secs(10);

impl Service {
    /// Stops the processes of every live workspace; returns how many
    /// processes or groups were signalled.
    pub async fn stop_on_shutdown(&self) -> u32 {
        let Ok(all) = self.store.list() else {
            return 0;
        };
        let mut total = 0;
        for ws in all.into_iter().filter(|w| w.status.is_live()) {
            let stopped = tokio::time::timeout(STOP_BOUND, self.stop_all(&ws)).await;
            let n = match stopped {
                Ok(Ok((_gate, n))) => n,
                Ok(Err(e)) => {
                    warn!(workspace.id = %ws.id, error = %e, "stopping the workspace's processes at shutdown failed");
                    0
                }
                Err(_) => {
                    warn!(workspace.id = %ws.id, "the workspace's commands did not end in time at shutdown");
                    0
                }
            };
            // The runtime (daemon, proxy) stays: the next start restarts it on the same
            // data root, as after a crash.
            if n > 0 {
                self.record_interruption(
                    &ws.id,
                    "the service stopped (SIGTERM)",
                    n,
                    "commands running when the service stopped were ended; the run script starts again with the service",
                );
            }
            total += n;
        }
        info!(processes = total, "workspace processes stopped at shutdown");
        total
    }

    /// Finds processes a previous service left running in `ws` (by its uid) and stops
    /// them. Runs at start, before the API accepts requests.
    pub(crate) async fn reap_leftovers(&self, ws: &Workspace) {
        let Ok(spec) = self.run_spec(ws, &BTreeMap::new()) else {
            return;
        };
        match self.runtime.stop(&spec).await {
            Ok(0) => {}
            Ok(n) => {
                warn!(workspace.id = %ws.id, processes = n, "stopped processes left by the last service");
                self.record_interruption(
                    &ws.id,
                    "the service ended without stopping the workspace (crash or kill -9)",
                    n,
                    "its commands were found by the workspace's uid and stopped; their results are lost",
                );
            }
            Err(e) => {
                warn!(workspace.id = %ws.id, error = %e, "stopping processes left by the last service failed")
            }
        }
    }

    fn record_interruption(&self, id: &str, reason: &str, processes: u32, note: &str) {
        let recorded = self.store.tx_reserved(|tx| {
            let Some(mut ws) = store::get_tx(tx, id)? else {
                return Ok(());
            };
            ws.interrupted = Some(Interruption {
                at_ms: now_ms(),
                reason: reason.to_string(),
                processes,
                note: note.to_string(),
            });
            store::put_ws(tx, &ws)
        });
        if let Err(e) = recorded {
            warn!(workspace.id = %id, error = %e, "recording the interruption failed");
        }
    }
}
