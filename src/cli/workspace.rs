//! `dockwarden serve` (the workspace service) and `dockwarden ws` (its client): clap types
//! and handlers only; the logic lives in `crate::workspace`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use http::Method;
use serde_json::{Value, json};

use crate::workspace::client::{Client, ClientError, enc};
use crate::workspace::model::DEFAULT_IDLE_TIMEOUT_SECS;
use crate::workspace::runtime::LocalRuntime;
use crate::workspace::snapshot::LocalSnapshotStore;
use crate::workspace::store::Store;
use crate::workspace::{Config, Service, api};

/// Flags of `dockwarden serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Unix socket to serve the API on; its permissions are the authorization.
    #[arg(long, env = "DOCKWARDEN_WS_SOCKET")]
    pub socket: PathBuf,
    /// Directory for the database, worktrees and snapshots.
    #[arg(long)]
    pub state_dir: PathBuf,
    /// Socket permissions, in octal.
    #[arg(long, default_value = "660")]
    pub socket_mode: String,
    /// First uid/gid given to workspaces.
    #[arg(long, default_value_t = 20000)]
    pub uid_base: u32,
    /// How many uids the service may hand out.
    #[arg(long, default_value_t = 10000)]
    pub uid_count: u32,
    /// Default idle timeout of a workspace, in seconds.
    #[arg(long, default_value_t = DEFAULT_IDLE_TIMEOUT_SECS)]
    pub idle_timeout: u64,
    /// How often idle stop and baseline refresh run, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub tick_ms: u64,
    /// Age after which a baseline snapshot of an active workspace is refreshed, in seconds.
    #[arg(long, default_value_t = 600)]
    pub baseline_stale_after: u64,
}

/// Runs the workspace service until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let mode = u32::from_str_radix(&args.socket_mode, 8)
        .with_context(|| format!("socket mode `{}` is not octal", args.socket_mode))?;
    std::fs::create_dir_all(&args.state_dir)
        .with_context(|| format!("creating `{}`", args.state_dir.display()))?;
    let store =
        Store::open(&args.state_dir.join("state.db")).context("opening the state database")?;
    let snapshots = LocalSnapshotStore::open(&args.state_dir.join("snapshots"))
        .context("opening the snapshot store")?;
    let cfg = Config {
        state_dir: args.state_dir.clone(),
        uid_base: args.uid_base,
        uid_count: args.uid_count,
        default_idle_timeout: Duration::from_secs(args.idle_timeout),
        tick: Duration::from_millis(args.tick_ms.max(10)),
        baseline_stale_after: Duration::from_secs(args.baseline_stale_after),
    };
    let runtime = LocalRuntime::new();
    if !crate::workspace::runtime::Runtime::isolates_users(&runtime) {
        tracing::warn!(
            "not running as root: workspace commands run as this user, not per-workspace uids"
        );
    }
    let svc = Arc::new(Service::new(
        cfg,
        store,
        Arc::new(snapshots),
        Arc::new(runtime),
    ));
    svc.recover_on_start().await.context("recovering state")?;
    let listener = api::bind(&args.socket, mode).context("binding the api socket")?;
    tracing::info!(socket = %args.socket.display(), "workspace service ready");
    let upkeep = tokio::spawn(svc.clone().upkeep_loop());
    api::run(listener, svc, shutdown_signal()).await;
    upkeep.abort();
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Flags of `dockwarden ws`.
#[derive(Debug, clap::Args)]
pub struct WsArgs {
    /// Socket of the workspace service.
    #[arg(
        long,
        env = "DOCKWARDEN_WS_SOCKET",
        default_value = "/run/dockwarden/ws.sock"
    )]
    pub socket: PathBuf,
    /// Print JSON instead of human output.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: WsCommand,
}

/// `dockwarden ws` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum WsCommand {
    /// Create a workspace (or return the existing one with `--id`).
    Create(CreateArgs),
    /// Run a shell command in a workspace; exits with its exit code.
    Exec {
        id: String,
        /// Time limit in seconds; a timed-out command exits 124.
        #[arg(long)]
        timeout: Option<f64>,
        /// Extra environment for this command, `KEY=VALUE`.
        #[arg(long = "env", value_parser = parse_kv)]
        env: Vec<(String, String)>,
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// File operations on a workspace's worktree.
    Files {
        id: String,
        #[command(subcommand)]
        op: FilesCommand,
    },
    /// Take a snapshot now.
    Snapshot { id: String },
    /// List a workspace's snapshots.
    Snapshots { id: String },
    /// Snapshot and stop a workspace (its snapshots are kept).
    Kill { id: String },
    /// Start a stopped workspace, restoring it if its worktree is gone.
    Connect { id: String },
    /// Show one workspace.
    Info { id: String },
    /// List workspaces, optionally those whose metadata includes every `--meta` pair.
    List {
        #[arg(long = "meta", value_parser = parse_kv)]
        meta: Vec<(String, String)>,
    },
    /// Delete a workspace, or every workspace matching `--meta`, with their snapshots.
    Delete {
        id: Option<String>,
        #[arg(long = "meta", value_parser = parse_kv, conflicts_with = "id")]
        meta: Vec<(String, String)>,
    },
}

/// Flags of `dockwarden ws create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[arg(long)]
    pub id: Option<String>,
    #[arg(long = "meta", value_parser = parse_kv)]
    pub meta: Vec<(String, String)>,
    #[arg(long = "env", value_parser = parse_kv)]
    pub env: Vec<(String, String)>,
    /// A secret, `KEY=VALUE`: injected as env, never printed back.
    #[arg(long = "secret", value_parser = parse_kv)]
    pub secret: Vec<(String, String)>,
    /// Git repository (local path or URL) to clone into the worktree.
    #[arg(long, conflicts_with = "from")]
    pub repo: Option<String>,
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
}

/// `dockwarden ws files` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum FilesCommand {
    /// Print a file (at most 2 MiB).
    Read {
        path: String,
    },
    /// Write a file atomically from `--content` or standard input (at most 2 MiB).
    Write {
        path: String,
        #[arg(long)]
        content: Option<String>,
    },
    List {
        #[arg(default_value = "")]
        path: String,
    },
    Exists {
        path: String,
    },
    Info {
        path: String,
    },
    Mkdir {
        path: String,
        #[arg(short, long)]
        parents: bool,
    },
    Rename {
        from: String,
        to: String,
    },
    Copy {
        from: String,
        to: String,
    },
    Rm {
        path: String,
        #[arg(short, long)]
        recursive: bool,
    },
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{s}` is not KEY=VALUE"))
}

fn map(pairs: &[(String, String)]) -> BTreeMap<String, String> {
    pairs.iter().cloned().collect()
}

fn meta_query(pairs: &[(String, String)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("meta.{}={}", enc(k), enc(v)))
        .collect();
    if q.is_empty() {
        String::new()
    } else {
        format!("?{}", q.join("&"))
    }
}

/// Runs a `dockwarden ws` command. Service errors print `error: <message> (<code>)` and
/// exit with status 1; `exec` exits with the command's own exit code.
pub async fn ws(args: WsArgs) -> anyhow::Result<()> {
    match run_ws(args).await {
        Err(e) => match e.downcast_ref::<ClientError>() {
            Some(ce) => {
                eprintln!("error: {ce}");
                std::process::exit(1);
            }
            None => Err(e),
        },
        ok => ok,
    }
}

async fn run_ws(args: WsArgs) -> anyhow::Result<()> {
    let c = Client::new(&args.socket);
    let out = match args.command {
        WsCommand::Create(a) => create(&c, a, args.json).await?,
        WsCommand::Exec {
            id,
            timeout,
            env,
            command,
        } => return exec(&c, &id, timeout, &env, &command.join(" "), args.json).await,
        WsCommand::Files { id, op } => return files(&c, &id, op, args.json).await,
        WsCommand::Snapshot { id } => long_op(&c, &id, "snapshot", args.json).await?,
        WsCommand::Kill { id } => long_op(&c, &id, "kill", args.json).await?,
        WsCommand::Connect { id } => long_op(&c, &id, "connect", args.json).await?,
        WsCommand::Snapshots { id } => {
            c.json(
                Method::GET,
                &format!("/v1/workspaces/{}/snapshots", enc(&id)),
                None,
            )
            .await?
        }
        WsCommand::Info { id } => {
            c.json(Method::GET, &format!("/v1/workspaces/{}", enc(&id)), None)
                .await?
        }
        WsCommand::List { meta } => {
            c.json(
                Method::GET,
                &format!("/v1/workspaces{}", meta_query(&meta)),
                None,
            )
            .await?
        }
        WsCommand::Delete { id: Some(id), .. } => {
            c.json(
                Method::DELETE,
                &format!("/v1/workspaces/{}", enc(&id)),
                None,
            )
            .await?
        }
        WsCommand::Delete { id: None, meta } => {
            if meta.is_empty() {
                bail!("give a workspace id or at least one `--meta KEY=VALUE`");
            }
            c.json(
                Method::DELETE,
                &format!("/v1/workspaces{}", meta_query(&meta)),
                None,
            )
            .await?
        }
    };
    print_value(&out, args.json);
    Ok(())
}

async fn create(c: &Client, a: CreateArgs, as_json: bool) -> anyhow::Result<Value> {
    let body = json!({
        "id": a.id, "metadata": map(&a.meta), "env": map(&a.env), "secrets": map(&a.secret),
        "repo": a.repo, "revision": a.rev, "from": a.from,
        "inherit_parent_metadata": a.inherit_metadata, "idle_timeout_secs": a.idle_timeout,
    });
    if !as_json {
        eprintln!("creating workspace…");
    }
    Ok(c.json(Method::POST, "/v1/workspaces", Some(body)).await?)
}

async fn exec(
    c: &Client,
    id: &str,
    timeout: Option<f64>,
    env: &[(String, String)],
    cmd: &str,
    as_json: bool,
) -> anyhow::Result<()> {
    let body =
        json!({ "cmd": cmd, "timeout_ms": timeout.map(|t| (t * 1000.0) as u64), "env": map(env) });
    let path = format!("/v1/workspaces/{}/exec", enc(id));
    if as_json {
        let r = c.json(Method::POST, &path, Some(body)).await?;
        print_value(&r, true);
        return Ok(());
    }
    let r = c
        .stream(
            Method::POST,
            &format!("{path}?stream=1"),
            Some(body),
            |ev| {
                let data = ev["data"].as_str().unwrap_or_default();
                if ev["type"] == "stderr" {
                    eprint!("{data}");
                } else {
                    print!("{data}");
                    let _ = std::io::stdout().flush();
                }
            },
        )
        .await?;
    let code = r["exit_code"].as_i64().unwrap_or(1) as i32;
    if r["timed_out"] == true {
        eprintln!("dockwarden: command timed out; its process group was killed (exit 124)");
    }
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}

async fn long_op(c: &Client, id: &str, verb: &str, as_json: bool) -> anyhow::Result<Value> {
    let path = format!("/v1/workspaces/{}/{verb}?stream=1", enc(id));
    let r = c
        .stream(Method::POST, &path, None, |ev| {
            if !as_json {
                let p = &ev["progress"];
                eprint!("\r{verb}: {} files, {} bytes", p["files"], p["bytes"]);
            }
        })
        .await?;
    if !as_json {
        eprintln!();
    }
    Ok(r)
}

async fn files(c: &Client, id: &str, op: FilesCommand, as_json: bool) -> anyhow::Result<()> {
    let base = format!("/v1/workspaces/{}/files", enc(id));
    let (method, path, body) = match op {
        FilesCommand::Read { path } => {
            let data = c
                .raw(
                    Method::GET,
                    &format!("{base}/content?path={}", enc(&path)),
                    Vec::new(),
                    "",
                )
                .await?;
            std::io::stdout().write_all(&data)?;
            return Ok(());
        }
        FilesCommand::Write { path, content } => {
            let data = match content {
                Some(c) => c.into_bytes(),
                None => {
                    let mut buf = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
                    buf
                }
            };
            c.raw(
                Method::PUT,
                &format!("{base}/content?path={}", enc(&path)),
                data,
                "application/octet-stream",
            )
            .await?;
            return Ok(());
        }
        FilesCommand::List { path } => (
            Method::GET,
            format!("{base}/list?path={}", enc(&path)),
            None,
        ),
        FilesCommand::Exists { path } => (
            Method::GET,
            format!("{base}/exists?path={}", enc(&path)),
            None,
        ),
        FilesCommand::Info { path } => (
            Method::GET,
            format!("{base}/info?path={}", enc(&path)),
            None,
        ),
        FilesCommand::Mkdir { path, parents } => (
            Method::POST,
            format!("{base}/mkdir?path={}&parents={parents}", enc(&path)),
            None,
        ),
        FilesCommand::Rename { from, to } => (
            Method::POST,
            format!("{base}/rename?from={}&to={}", enc(&from), enc(&to)),
            None,
        ),
        FilesCommand::Copy { from, to } => (
            Method::POST,
            format!("{base}/copy?from={}&to={}", enc(&from), enc(&to)),
            None,
        ),
        FilesCommand::Rm { path, recursive } => (
            Method::DELETE,
            format!("{base}?path={}&recursive={recursive}", enc(&path)),
            None,
        ),
    };
    let v = c.json(method, &path, body).await?;
    print_value(&v, as_json);
    Ok(())
}

/// Human output: tables for lists, short lines for known shapes, JSON otherwise.
fn print_value(v: &Value, as_json: bool) {
    if as_json {
        println!("{v}");
        return;
    }
    print!("{}", crate::workspace::human::render(v));
}
