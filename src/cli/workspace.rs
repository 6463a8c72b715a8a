//! `dockwarden serve` (the workspace service) and `dockwarden ws` (its client): clap types
//! and handlers only; the logic lives in `crate::workspace`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::workspace::client::calls::FileCall;
use crate::workspace::client::{Client, ClientError};
use crate::workspace::daemon;
use crate::workspace::model::DEFAULT_IDLE_TIMEOUT_SECS;

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
    /// How many uids the service may hand out (at most 32768: each docker-compose workspace's
    /// container ids are a subordinate range chosen by its uid modulo that).
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
    /// Snapshots kept per workspace; older ones are pruned (a few at a time).
    #[arg(long, default_value_t = 20)]
    pub keep_snapshots: usize,
    /// Engine binary for docker-compose workspaces (each gets a private daemon of its own).
    /// For an engine outside /usr/sbin, its containerd and docker-proxy are looked up next to
    /// it first (`<prefix>/bin`, `<prefix>/sbin`), then on the system PATH (runc).
    #[arg(long, default_value = "/usr/sbin/dockerd")]
    pub dockerd: PathBuf,
    /// Turn the docker-compose runtime off (creates that need it are refused).
    #[arg(long)]
    pub no_docker: bool,
    /// An image archive (`docker save` output) loaded into every new private daemon before
    /// setup (repeatable): no registry may be reachable, and each daemon starts empty.
    #[arg(long = "preload-image-tar")]
    pub preload_image_tar: Vec<PathBuf>,
    /// Resource layers, defaults and disk pool (TOML; docs/resources.md). Default: embedded.
    #[arg(long)]
    pub resources: Option<PathBuf>,
    /// The key workspace secrets are sealed under in `state.db`: 32 bytes, mode 0600, outside
    /// the state directory; made at the first start (docs/workspace-api.md, "Secrets at rest").
    #[arg(long, default_value = crate::workspace::secrets::keyfile::DEFAULT_PATH)]
    pub secrets_key: PathBuf,
    /// What workspaces reach beyond their walls (docs/isolation.md, "Network"): `nat` (the
    /// host masquerades their traffic to anything but the host, its Docker bridges, other
    /// workspaces and link-local addresses) or `none` (nothing outside the workspace).
    #[arg(long, default_value = "nat", value_parser = ["nat", "none"])]
    pub egress: String,
    #[command(flatten)]
    pub log: super::logging::LogArgs,
}

/// Runs the workspace service until SIGINT or SIGTERM.
pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    super::logging::init(args.log.log_format);
    let socket_mode = u32::from_str_radix(&args.socket_mode, 8)
        .with_context(|| format!("socket mode `{}` is not octal", args.socket_mode))?;
    anyhow::ensure!(
        args.uid_count <= crate::workspace::runtime::docker::subid::SLOTS,
        "--uid-count {} is more than {}: workspaces' subordinate id ranges would overlap",
        args.uid_count,
        crate::workspace::runtime::docker::subid::SLOTS
    );
    let mut config = daemon::config(args.state_dir.clone());
    config.uid_base = args.uid_base;
    config.uid_count = args.uid_count;
    config.default_idle_timeout = Duration::from_secs(args.idle_timeout);
    config.tick = Duration::from_millis(args.tick_ms.max(10));
    config.baseline_stale_after = Duration::from_secs(args.baseline_stale_after);
    config.keep_snapshots = args.keep_snapshots;
    let docker = (!args.no_docker).then(|| crate::workspace::runtime::DockerConfig {
        dockerd: args.dockerd.clone(),
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("dockwarden")),
        preload: args.preload_image_tar.clone(),
    });
    let resources = match &args.resources {
        None => crate::workspace::resources::ResourcesConfig::embedded(),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading resources file `{}`", p.display()))?;
            crate::workspace::resources::ResourcesConfig::parse(&text)
                .map_err(|e| anyhow::anyhow!("resources file `{}`: {e}", p.display()))?
        }
    };
    let opts = daemon::DaemonOptions {
        socket: args.socket,
        socket_mode,
        config,
        docker,
        resources,
        secrets_key: args.secrets_key,
        egress: args
            .egress
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
    };
    daemon::run(opts, daemon::shutdown_signal())
        .await
        .with_context(|| format!("workspace service on `{}`", args.state_dir.display()))
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
        /// Workspace id.
        id: String,
        /// Time limit in seconds; a timed-out command exits 124.
        #[arg(long)]
        timeout: Option<f64>,
        /// Extra environment for this command, `KEY=VALUE`.
        #[arg(long = "env", value_parser = parse_kv)]
        env: Vec<(String, String)>,
        /// The command, run by `/bin/sh -c` (words are joined with spaces).
        #[arg(trailing_var_arg = true, required = true)]
        command: Vec<String>,
    },
    /// File operations on a workspace's worktree.
    Files {
        /// Workspace id.
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
    /// Restart a workspace's processes and runtime (daemon, proxy); files and volumes stay.
    Restart { id: String },
    /// Replace the runtime behind the workspace; the worktree is kept byte for byte.
    Reprovision {
        id: String,
        /// The new runtime.
        #[arg(long, value_parser = parse_runtime, required_unless_present = "inspect_script", conflicts_with = "inspect_script")]
        runtime: Option<String>,
        /// A repository-local script read by the evidence rules (never run) to choose it.
        #[arg(long)]
        inspect_script: Option<String>,
    },
    /// Resource status: model, reservation, burst limit, health, disk and ceilings.
    Status { id: String },
    /// Resize a workspace (values like `0.5`, `500m`, `128MiB`); may wait for approval.
    Resize(ResizeArgs),
    /// List a workspace's resize requests.
    ResizeRequests { id: String },
    /// Approve a pending resize request (it is applied now).
    Approve { request: String },
    /// Reject a pending resize request.
    Reject { request: String },
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

/// Flags of `dockwarden ws resize`.
#[derive(Debug, clap::Args)]
pub struct ResizeArgs {
    pub id: String,
    /// CPU reservation (guaranteed floor).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Memory reservation (guaranteed floor).
    #[arg(long)]
    pub memory: Option<String>,
    /// CPU burst limit (cap).
    #[arg(long)]
    pub burst_cpu: Option<String>,
    /// Memory burst limit (cap).
    #[arg(long)]
    pub burst_memory: Option<String>,
    /// Process limit.
    #[arg(long)]
    pub pids: Option<String>,
    /// Disk size (grow only).
    #[arg(long)]
    pub disk: Option<String>,
}

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
    /// A secret, `KEY=VALUE`: injected as env, never printed back.
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
    /// `standard` or `docker-compose` (default: the repository's settings, then its evidence).
    #[arg(long, value_parser = parse_runtime)]
    pub runtime: Option<String>,
    /// Resources as JSON: `{"reservation": {...}, "burst": {...}, "disk": ..., "ceiling": {...}}`.
    #[arg(long)]
    pub resources: Option<String>,
}

/// `dockwarden ws files` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum FilesCommand {
    /// Print a file (at most 2 MiB).
    Read { path: String },
    /// Write a file atomically from `--content` or standard input (at most 2 MiB).
    Write {
        path: String,
        #[arg(long)]
        content: Option<String>,
    },
    /// List a directory (default: the worktree root).
    List {
        #[arg(default_value = "")]
        path: String,
    },
    /// Print whether a path exists.
    Exists { path: String },
    /// Show kind, size, mode and modification time of a path.
    Info { path: String },
    /// Create a directory (`-p`: with its parents, no error if it exists).
    Mkdir {
        path: String,
        #[arg(short, long)]
        parents: bool,
    },
    /// Rename or move a path.
    Rename { from: String, to: String },
    /// Copy a regular file.
    Copy { from: String, to: String },
    /// Remove a file or (with `-r`) a directory tree.
    Rm {
        path: String,
        #[arg(short, long)]
        recursive: bool,
    },
}

fn parse_runtime(s: &str) -> Result<String, String> {
    match s {
        "standard" | "docker-compose" => Ok(s.to_string()),
        _ => Err(format!(
            "`{s}` is not a runtime; use `standard` or `docker-compose`"
        )),
    }
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{s}` is not KEY=VALUE"))
}

fn map(pairs: &[(String, String)]) -> BTreeMap<String, String> {
    pairs.iter().cloned().collect()
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
        } => {
            return exec(&c, &id, timeout, &env, &command.join(" "), args.json).await;
        }
        WsCommand::Files { id, op } => return files(&c, &id, op, args.json).await,
        WsCommand::Snapshot { id } => long_op(&c, &id, "snapshot", args.json).await?,
        WsCommand::Kill { id } => long_op(&c, &id, "kill", args.json).await?,
        WsCommand::Connect { id } => long_op(&c, &id, "connect", args.json).await?,
        WsCommand::Snapshots { id } => c.snapshots(&id).await?,
        WsCommand::Restart { id } => c.restart(&id).await?,
        WsCommand::Reprovision {
            id,
            runtime,
            inspect_script,
        } => {
            c.reprovision(
                &id,
                json!({ "runtime": runtime, "inspect_script": inspect_script }),
            )
            .await?
        }
        WsCommand::Status { id } => c.status(&id).await?,
        WsCommand::Resize(a) => c.resize(&a.id.clone(), resize_body(&a)).await?,
        WsCommand::ResizeRequests { id } => c.resize_requests(&id).await?,
        WsCommand::Approve { request } => c.decide(&request, true).await?,
        WsCommand::Reject { request } => c.decide(&request, false).await?,
        WsCommand::Info { id } => c.info(&id).await?,
        WsCommand::List { meta } => c.list(&meta).await?,
        WsCommand::Delete { id: Some(id), .. } => c.delete(&id).await?,
        WsCommand::Delete { id: None, meta } => {
            if meta.is_empty() {
                // A usage error, as clap reports its own: exit 2, no backtrace.
                clap::Error::raw(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    "give a workspace id or at least one `--meta KEY=VALUE`\n\nUsage: dockwarden ws delete <ID|--meta KEY=VALUE...>\n",
                )
                .exit();
            }
            c.delete_matching(&meta).await?
        }
    };
    print_value(&out, args.json);
    Ok(())
}

fn resize_body(a: &ResizeArgs) -> Value {
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

async fn create(c: &Client, a: CreateArgs, as_json: bool) -> anyhow::Result<Value> {
    let resources: Option<Value> = match &a.resources {
        Some(text) => Some(serde_json::from_str(text).context("`--resources` is not JSON")?),
        None => None,
    };
    let body = json!({
        "id": a.id, "metadata": map(&a.meta), "env": map(&a.env), "secrets": map(&a.secret),
        "repo": a.repo, "revision": a.rev, "from": a.from,
        "inherit_parent_metadata": a.inherit_metadata, "idle_timeout_secs": a.idle_timeout,
        "runtime": a.runtime, "resources": resources,
    });
    if as_json {
        return Ok(c.create(body).await?);
    }
    eprintln!("creating workspace…");
    let mut bar = super::ws_progress::Bar::new("restore");
    let created = c.create_streaming(body, |ev| bar.update(ev)).await;
    bar.finish();
    Ok(created?)
}

async fn exec(
    c: &Client,
    id: &str,
    timeout: Option<f64>,
    env: &[(String, String)],
    cmd: &str,
    as_json: bool,
) -> anyhow::Result<()> {
    let timeout_ms = timeout.map(|t| (t * 1000.0) as u64);
    let body = json!({ "cmd": cmd, "timeout_ms": timeout_ms, "env": map(env) });
    if as_json {
        print_value(&c.exec(id, body).await?, true);
        return Ok(());
    }
    let r = c
        .exec_streaming(id, body, |stream, data| {
            if stream == "stderr" {
                eprint!("{data}");
            } else {
                print!("{data}");
                let _ = std::io::stdout().flush();
            }
        })
        .await?;
    if r["timed_out"] == true {
        eprintln!("dockwarden: command timed out; its process group was killed (exit 124)");
    }
    let _ = std::io::stdout().flush();
    std::process::exit(r["exit_code"].as_i64().unwrap_or(1) as i32);
}

async fn long_op(c: &Client, id: &str, verb: &str, as_json: bool) -> anyhow::Result<Value> {
    let mut bar = super::ws_progress::Bar::new(verb);
    let r = c
        .long_op(id, verb, |ev| {
            if !as_json {
                bar.update(ev);
            }
        })
        .await;
    bar.finish();
    Ok(r?)
}

async fn files(c: &Client, id: &str, op: FilesCommand, as_json: bool) -> anyhow::Result<()> {
    let call = match op {
        FilesCommand::Read { path } => {
            std::io::stdout().write_all(&c.read_file(id, &path).await?)?;
            return Ok(());
        }
        FilesCommand::Write { path, content } => {
            let data = match content {
                Some(text) => text.into_bytes(),
                None => {
                    let mut buf = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
                    buf
                }
            };
            return Ok(c.write_file(id, &path, data).await?);
        }
        FilesCommand::List { path } => FileCall::List { path },
        FilesCommand::Exists { path } => FileCall::Exists { path },
        FilesCommand::Info { path } => FileCall::Info { path },
        FilesCommand::Mkdir { path, parents } => FileCall::Mkdir { path, parents },
        FilesCommand::Rename { from, to } => FileCall::Rename { from, to },
        FilesCommand::Copy { from, to } => FileCall::Copy { from, to },
        FilesCommand::Rm { path, recursive } => FileCall::Remove { path, recursive },
    };
    print_value(&c.file_call(id, &call).await?, as_json);
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
