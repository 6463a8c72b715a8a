//! `approve` / `reject`: decide a `pending_approval` resize request. Approving applies its
//! changes onto the sizing in force now; rejecting records the decision and changes nothing.

use crate::error::{WsError, WsResult};
use crate::resources::persist::{self, RequestRecord};
use crate::service::Service;
use crate::status::Verb;

use super::resize::{ResizeOutcome, outcome};

impl Service {
    /// Approves (`true`) or rejects (`false`) a pending request.
    pub async fn decide_request(&self, request: &str, approve: bool) -> WsResult<ResizeOutcome> {
        let pending = self.pending_request(request)?;
        // Applied under the workspace's op lock and guard, as `resize` applies.
        let (_op, ws) = self.exclusive(&pending.workspace_id, Verb::Resize).await?;
        let _g = self.resources.guard()?;
        // Again under the locks: another decision may have come first.
        let mut rec = self.pending_request(request)?;
        let r = persist::get(&self.store, &ws.id)?.unwrap_or_default();
        if !approve {
            rec.state = "rejected".into();
            self.store.tx(|tx| persist::put_request(tx, &rec))?;
            return Ok(outcome(&rec, r.sizing));
        }
        // Ceilings are checked again: the request must still fit when it is applied.
        let eff = self.resources.effective(&r.own);
        for c in rec.plan.changes.iter().filter(|c| c.action == "apply") {
            let b = eff.ceiling(c.axis);
            if let (Some(ceiling), Some(layer)) = (b.value, b.set_by)
                && c.to > ceiling
            {
                return Err(WsError::OverCeiling {
                    what: c.axis.as_str().into(),
                    value: c.axis.show(c.to),
                    ceiling: c.axis.show(ceiling),
                    layer: layer.as_str(),
                });
            }
        }
        rec.state = "approved".into();
        let sizing = self.apply_request(&ws, r, &mut rec)?;
        Ok(outcome(&rec, sizing))
    }

    /// The request `request`, if it still waits for a decision.
    fn pending_request(&self, request: &str) -> WsResult<RequestRecord> {
        let rec = persist::request(&self.store, request)?
            .ok_or_else(|| WsError::ResizeRequestNotFound(request.to_string()))?;
        if rec.state != "pending_approval" {
            return Err(WsError::ResizeRequestState {
                id: rec.id,
                state: rec.state,
            });
        }
        Ok(rec)
    }
}
