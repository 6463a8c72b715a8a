//! `dockwarden ws`: the workspace service's client. One file per command group (`create`,
//! `exec`, `files`, `resources`); every answer is rendered by what the command did
//! (`render`), never by guessing from the answer's shape.

mod create;
mod exec;
mod files;
mod progress;
pub mod render;
mod resources;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::workspace::client::{Client, ClientError};

pub use create::CreateArgs;
pub use files::FilesCommand;
pub use resources::ResizeArgs;

/// The runtimes `--runtime` accepts (listed in `--help`).
pub const RUNTIMES: [&str; 2] = ["standard", "docker-compose"];

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
    /// Print the service's JSON answer instead of human output.
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
        /// Extra environment for this command, `KEY=VALUE` (repeatable).
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
    Snapshot {
        /// Workspace id.
        id: String,
    },
    /// List a workspace's snapshots.
    Snapshots {
        /// Workspace id.
        id: String,
    },
    /// Snapshot and stop a workspace (its snapshots are kept).
    Kill {
        /// Workspace id.
        id: String,
    },
    /// Start a stopped workspace, restoring it if its worktree is gone.
    Connect {
        /// Workspace id.
        id: String,
    },
    /// Freeze a workspace in place (processes, servers, containers) and snapshot it; any
    /// later verb, or `resume`, thaws it.
    Suspend {
        /// Workspace id.
        id: String,
    },
    /// Thaw a suspended workspace; its processes go on where they stopped.
    Resume {
        /// Workspace id.
        id: String,
    },
    /// Restart a workspace's processes and runtime (daemon, proxy); files and volumes stay.
    Restart {
        /// Workspace id.
        id: String,
    },
    /// Replace the runtime behind the workspace; the worktree is kept byte for byte.
    Reprovision {
        /// Workspace id.
        id: String,
        /// The new runtime.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(RUNTIMES), required_unless_present = "inspect_script", conflicts_with = "inspect_script")]
        runtime: Option<String>,
        /// A repository-local script read by the evidence rules (never run) to choose it.
        #[arg(long)]
        inspect_script: Option<String>,
    },
    /// Resource status: model, reservation, burst limit, health, disk and ceilings.
    Status {
        /// Workspace id.
        id: String,
    },
    /// Resize a workspace (values like `0.5`, `500m`, `128MiB`); may wait for approval.
    Resize(ResizeArgs),
    /// List a workspace's resize requests.
    ResizeRequests {
        /// Workspace id.
        id: String,
    },
    /// Approve a pending resize request (it is applied now).
    Approve {
        /// The request's id, as `resize` and `resize-requests` show it.
        request: String,
    },
    /// Reject a pending resize request.
    Reject {
        /// The request's id, as `resize` and `resize-requests` show it.
        request: String,
    },
    /// Show one workspace, with its last recovery.
    Info {
        /// Workspace id.
        id: String,
    },
    /// List workspaces, optionally those whose metadata includes every `--meta` pair.
    List {
        /// Metadata pair the workspace must have, `KEY=VALUE` (repeatable).
        #[arg(long = "meta", value_parser = parse_kv)]
        meta: Vec<(String, String)>,
    },
    /// Delete a workspace, or every workspace matching `--meta`, with their snapshots.
    Delete {
        /// Workspace id (or give `--meta` instead).
        id: Option<String>,
        /// Delete every workspace with this metadata pair, `KEY=VALUE` (repeatable: all must
        /// match).
        #[arg(long = "meta", value_parser = parse_kv, conflicts_with = "id")]
        meta: Vec<(String, String)>,
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
    let as_json = args.json;
    let (out, shown): (Value, fn(&Value) -> String) = match args.command {
        WsCommand::Create(a) => (create::create(&c, a, as_json).await?, render::render),
        WsCommand::Exec {
            id,
            timeout,
            env,
            command,
        } => {
            return exec::exec(&c, &id, timeout, &env, &command.join(" "), as_json).await;
        }
        WsCommand::Files { id, op } => return files::files(&c, &id, op, as_json).await,
        WsCommand::Snapshot { id } => {
            (long_op(&c, &id, "snapshot", as_json).await?, render::render)
        }
        WsCommand::Kill { id } => (long_op(&c, &id, "kill", as_json).await?, render::render),
        WsCommand::Connect { id } => (
            long_op(&c, &id, "connect", as_json).await?,
            render::connected,
        ),
        WsCommand::Snapshots { id } => (c.snapshots(&id).await?, render::render),
        WsCommand::Suspend { id } => (c.suspend(&id).await?, render::suspended),
        WsCommand::Resume { id } => (c.resume(&id).await?, render::thawed),
        WsCommand::Restart { id } => (c.restart(&id).await?, render::render),
        WsCommand::Reprovision {
            id,
            runtime,
            inspect_script,
        } => (
            c.reprovision(
                &id,
                json!({ "runtime": runtime, "inspect_script": inspect_script }),
            )
            .await?,
            render::render,
        ),
        WsCommand::Status { id } => (c.status(&id).await?, render::render),
        WsCommand::Resize(a) => (resources::resize(&c, &a).await?, render::resize),
        WsCommand::ResizeRequests { id } => (c.resize_requests(&id).await?, render::render),
        WsCommand::Approve { request } => (c.decide(&request, true).await?, render::decided),
        WsCommand::Reject { request } => (c.decide(&request, false).await?, render::decided),
        WsCommand::Info { id } => (c.info(&id).await?, render::info),
        WsCommand::List { meta } => (c.list(&meta).await?, render::render),
        WsCommand::Delete { id: Some(id), .. } => (c.delete(&id).await?, render::render),
        WsCommand::Delete { id: None, meta } => {
            if meta.is_empty() {
                // A usage error, as clap reports its own: exit 2, no backtrace.
                clap::Error::raw(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    "give a workspace id or at least one `--meta KEY=VALUE`\n\nUsage: dockwarden ws delete <ID|--meta KEY=VALUE...>\n",
                )
                .exit();
            }
            (c.delete_matching(&meta).await?, render::render)
        }
    };
    if as_json {
        println!("{out}");
    } else {
        print!("{}", shown(&out));
    }
    Ok(())
}

async fn long_op(c: &Client, id: &str, verb: &str, as_json: bool) -> anyhow::Result<Value> {
    let mut bar = progress::Bar::new(verb);
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

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    /// Every argument of every `ws` and `serve` command, however deep, has help text, and
    /// every argument with a fixed set of values lists them.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
                if a.get_possible_values().iter().any(|v| v.is_hide_set()) {
                    missing.push(format!("{path} {id}: hidden values"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {}: no about", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(
            &super::WsArgs::augment_args(Command::new("ws")),
            "ws",
            &mut missing,
        );
        walk(
            &crate::cli::serve::ServeArgs::augment_args(Command::new("serve")),
            "serve",
            &mut missing,
        );
        assert!(missing.is_empty(), "without help: {missing:?}");
    }

    #[test]
    fn the_runtime_arguments_list_their_values() {
        let ws = super::WsArgs::augment_args(Command::new("ws"));
        for sub in ["create", "reprovision"] {
            let cmd = ws.find_subcommand(sub).expect("subcommand");
            let rt = cmd
                .get_arguments()
                .find(|a| a.get_id() == "runtime")
                .expect("--runtime");
            let values: Vec<String> = rt
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_owned())
                .collect();
            assert_eq!(values, super::RUNTIMES, "ws {sub} --runtime");
        }
    }
}
