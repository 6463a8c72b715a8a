//! `dockwarden ws create`.

use anyhow::Context;
use serde_json::{Value, json};

use super::{RUNTIMES, map, parse_kv, progress};
use crate::workspace::client::Client;

/// Flags of `dockwarden ws create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Workspace id; creating an existing id returns that workspace.
    #[arg(long)]
    pub id: Option<String>,
    /// Metadata pair, `KEY=VALUE` (repeatable).
    #[arg(long = "meta", value_parser = parse_kv)]
    pub meta: Vec<(String, String)>,
    /// Environment variable for every command, `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_parser = parse_kv)]
    pub env: Vec<(String, String)>,
    /// A secret, `KEY=VALUE`: injected as env, never printed back (repeatable).
    #[arg(long = "secret", value_parser = parse_kv)]
    pub secret: Vec<(String, String)>,
    /// Git repository (local path or URL) to clone into the worktree.
    #[arg(long, conflicts_with = "from")]
    pub repo: Option<String>,
    /// Branch, tag or commit to check out.
    #[arg(long, requires = "repo")]
    pub rev: Option<String>,
    /// Fork: start from this snapshot.
    #[arg(long)]
    pub from: Option<String>,
    /// With `--from`, start from the parent workspace's metadata.
    #[arg(long, requires = "from")]
    pub inherit_metadata: bool,
    /// Idle timeout in seconds.
    #[arg(long)]
    pub idle_timeout: Option<u64>,
    /// Maximum runtime in seconds: the workspace is stopped (with a snapshot) once it has been
    /// live that long.
    #[arg(long)]
    pub max_runtime: Option<u64>,
    /// Seconds from suspension (idle) to archive; 0: idle archives without suspending.
    #[arg(long)]
    pub archive_after: Option<u64>,
    /// The runtime (default: the repository's settings, then its evidence).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(RUNTIMES))]
    pub runtime: Option<String>,
    /// Resources as JSON: `{"reservation": {...}, "burst": {...}, "disk": ..., "ceiling": {...}}`.
    #[arg(long)]
    pub resources: Option<String>,
}

pub(super) async fn create(c: &Client, a: CreateArgs, as_json: bool) -> anyhow::Result<Value> {
    let resources: Option<Value> = match &a.resources {
        Some(text) => Some(serde_json::from_str(text).context("`--resources` is not JSON")?),
        None => None,
    };
    let body = json!({
        "id": a.id, "metadata": map(&a.meta), "env": map(&a.env), "secrets": map(&a.secret),
        "repo": a.repo, "revision": a.rev, "from": a.from,
        "inherit_parent_metadata": a.inherit_metadata, "idle_timeout_secs": a.idle_timeout,
        "max_runtime_secs": a.max_runtime, "archive_after_secs": a.archive_after,
        "runtime": a.runtime, "resources": resources,
    });
    if as_json {
        return Ok(c.create(body).await?);
    }
    eprintln!("creating workspace…");
    let mut bar = progress::Bar::new("restore");
    let created = c.create_streaming(body, |ev| bar.update(ev)).await;
    bar.finish();
    Ok(created?)
}
