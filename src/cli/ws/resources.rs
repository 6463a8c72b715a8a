//! `dockwarden ws resize` (and the body it sends); `approve`, `reject`, `status` and
//! `resize-requests` are plain calls rendered in `render`.

use serde_json::{Value, json};

use crate::workspace::client::Client;

/// Flags of `dockwarden ws resize`.
#[derive(Debug, clap::Args)]
pub struct ResizeArgs {
    /// Workspace id.
    pub id: String,
    /// CPU reservation (guaranteed floor): cores (`0.5`) or millicores (`500m`).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Memory reservation (guaranteed floor): bytes, or with a binary unit (`512m`, `512MiB`,
    /// `1g`).
    #[arg(long)]
    pub memory: Option<String>,
    /// CPU burst limit (cap): cores or millicores.
    #[arg(long)]
    pub burst_cpu: Option<String>,
    /// Memory burst limit (cap): bytes, or with a binary unit (`1g`).
    #[arg(long)]
    pub burst_memory: Option<String>,
    /// Process limit (a count).
    #[arg(long)]
    pub pids: Option<String>,
    /// Disk size (grow only): bytes, or with a binary unit (`10g`).
    #[arg(long)]
    pub disk: Option<String>,
}

pub(super) async fn resize(c: &Client, a: &ResizeArgs) -> anyhow::Result<Value> {
    Ok(c.resize(&a.id, body(a)).await?)
}

fn body(a: &ResizeArgs) -> Value {
    let mut body = json!({
        "reservation": { "cpu": a.cpu, "memory": a.memory },
        "burst": { "cpu": a.burst_cpu, "memory": a.burst_memory, "pids": a.pids },
        "disk": a.disk,
    });
    // Only the values given; `null` would mean "no value" to the service too, but is noise.
    if let Some(o) = body.as_object_mut() {
        for part in ["reservation", "burst"] {
            if let Some(p) = o.get_mut(part).and_then(Value::as_object_mut) {
                p.retain(|_, v| !v.is_null());
            }
        }
        o.retain(|_, v| !v.is_null());
    }
    body
}
