//! `create` of an id that exists returns that workspace (idempotency); what the caller
//! asked for that differs from it is named, never silently dropped.

use crate::model::{CreateRequest, Workspace};

/// The requested fields that the existing workspace does not have.
pub(crate) fn not_applied(req: &CreateRequest, ws: &Workspace) -> Vec<String> {
    let mut fields = Vec::new();
    if req
        .metadata
        .iter()
        .any(|(k, v)| ws.metadata.get(k) != Some(v))
    {
        fields.push("metadata");
    }
    if req.env.iter().any(|(k, v)| ws.env.get(k) != Some(v)) {
        fields.push("env");
    }
    if req.secrets.keys().any(|k| !ws.secret_names.contains(k)) {
        fields.push("secrets");
    }
    if req.repo.is_some() && req.repo != ws.repo {
        fields.push("repo");
    }
    if req.revision.is_some() && req.revision != ws.revision {
        fields.push("revision");
    }
    if req.from.is_some() && req.from != ws.from_snapshot {
        fields.push("from");
    }
    if req
        .idle_timeout_secs
        .is_some_and(|t| t != ws.idle_timeout_secs)
    {
        fields.push("idle_timeout_secs");
    }
    if req.max_runtime_secs.is_some() && req.max_runtime_secs != ws.max_runtime_secs {
        fields.push("max_runtime_secs");
    }
    if req
        .archive_after_secs
        .is_some_and(|t| t != ws.archive_after_secs)
    {
        fields.push("archive_after_secs");
    }
    if req.runtime.is_some_and(|r| r != ws.runtime.runtime) {
        fields.push("runtime");
    }
    if fields.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "workspace `{}` already exists and is returned as is; requested fields not applied: {}",
        ws.id,
        fields
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )]
}
