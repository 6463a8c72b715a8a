//! `resize`: change a workspace's reservation, burst limit or disk. Guard (ceilings) →
//! plan (pure: apply / wait for approval / nothing usable) → apply through the provider →
//! persist the request with its state.

use serde::Serialize;

use crate::error::{WsError, WsResult};
use crate::model::{Workspace, now_ms, random_hex};
use crate::resources::input::ResizeInput;
use crate::resources::model::Sizing;
use crate::resources::persist::{self, RequestRecord, WsResources};
use crate::resources::resize::{self, Modes, Plan, Refusal};
use crate::service::Service;
use crate::status::Verb;

/// The answer of `resize`, `approve` and `reject`.
#[derive(Debug, Clone, Serialize)]
pub struct ResizeOutcome {
    pub request: String,
    #[serde(alias = "workspaceId")]
    pub workspace_id: String,
    /// `applied`, `pending_approval`, `skipped`, `rejected` or `failed`.
    pub state: String,
    pub changes: Vec<resize::Change>,
    #[serde(alias = "approvalNeeded")]
    pub approval_needed: Vec<String>,
    /// Whether running processes were stopped. The local provider changes values in place.
    pub disruptive: bool,
    /// What was stopped by the change (empty when not disruptive).
    pub interrupted: Vec<String>,
    /// The sizing now in force.
    pub sizing: Sizing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub(crate) fn refusal(r: Refusal) -> WsError {
    match r {
        Refusal::OverCeiling {
            axis,
            value,
            ceiling,
            layer,
        } => WsError::OverCeiling {
            what: axis.as_str().to_string(),
            value: axis.show(value),
            ceiling: axis.show(ceiling),
            layer,
        },
        Refusal::Invalid(m) => WsError::Invalid(m),
    }
}

impl Service {
    /// Plans a resize; applies it at once when nothing needs approval.
    pub async fn resize(&self, id: &str, input: ResizeInput) -> WsResult<ResizeOutcome> {
        // Serialised with create, kill, connect and the other exclusive verbs; refused while
        // the workspace is being created (its setup is still sizing it).
        let (_op, ws) = self.exclusive(id, Verb::Resize).await?;
        let wanted = input.wanted()?;
        let _g = self.resources.guard()?;
        let r = persist::get(&self.store, id)?.unwrap_or_default();
        let eff = self.resources.effective(&r.own);
        let modes: &dyn Modes = &*self.resources.provider;
        let plan = resize::plan(&r.sizing, &eff, &wanted, modes).map_err(refusal)?;
        let state = if !plan.applies_anything() {
            "skipped"
        } else if !plan.approval_needed.is_empty() {
            "pending_approval"
        } else {
            "approved"
        };
        let mut rec = RequestRecord {
            id: format!("rr-{}", random_hex(6)),
            workspace_id: id.to_string(),
            state: state.into(),
            created_at_ms: now_ms(),
            plan,
            error: None,
        };
        let sizing = if state == "approved" {
            self.apply_request(&ws, r, &mut rec)?
        } else {
            self.store.tx(|tx| persist::put_request(tx, &rec))?;
            r.sizing
        };
        Ok(outcome(&rec, sizing))
    }

    /// Applies an approved request's changes onto the current sizing and records the result.
    pub(crate) fn apply_request(
        &self,
        ws: &Workspace,
        mut r: WsResources,
        rec: &mut RequestRecord,
    ) -> WsResult<Sizing> {
        let mut next = r.sizing;
        for c in rec.plan.changes.iter().filter(|c| c.action == "apply") {
            match c.part {
                resize::Part::Reservation => next.reservation.set(c.axis, Some(c.to)),
                resize::Part::BurstLimit => next.burst_limit.set(c.axis, Some(c.to)),
            }
        }
        next.reservation.disk_bytes = next.burst_limit.disk_bytes;
        match self.resources.apply(ws.uid, &self.worktree(&ws.id), &next) {
            Ok(()) => {
                rec.state = "applied".into();
                r.sizing = next;
            }
            Err(e) => {
                rec.state = "failed".into();
                rec.error = Some(e.to_string());
                // Leave the workspace as it was: write the previous values back.
                let _ = self
                    .resources
                    .apply(ws.uid, &self.worktree(&ws.id), &r.sizing);
            }
        }
        self.store.tx(|tx| {
            persist::put(tx, &ws.id, &r)?;
            persist::put_request(tx, rec)
        })?;
        Ok(r.sizing)
    }

    /// Resize requests of a workspace, oldest first.
    pub fn resize_requests(&self, id: &str) -> WsResult<Vec<RequestRecord>> {
        self.store.require(id)?;
        persist::requests_of(&self.store, id)
    }
}

pub(crate) fn outcome(rec: &RequestRecord, sizing: Sizing) -> ResizeOutcome {
    let plan: &Plan = &rec.plan;
    let disruptive = rec.state == "applied" && plan.disruptive();
    ResizeOutcome {
        request: rec.id.clone(),
        workspace_id: rec.workspace_id.clone(),
        state: rec.state.clone(),
        changes: plan.changes.clone(),
        approval_needed: plan.approval_needed.clone(),
        disruptive,
        // INVARIANT: never claims background processes survived a disruptive change; the
        // local provider has no disruptive mode, so nothing is interrupted.
        interrupted: if disruptive {
            vec!["every process of the workspace".into()]
        } else {
            Vec::new()
        },
        sizing,
        error: rec.error.clone(),
    }
}
