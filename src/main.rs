//! The `dockwarden` binary: clap commands only; the work is in the library.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dockwarden",
    version,
    about = "A default-deny Docker API policy proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the policy proxy in front of a Docker daemon.
    Proxy(Box<dockwarden::cli::proxy::ProxyArgs>),
    /// Run the policy proxy with the arguments in a JSON file (the workspace service's child
    /// proxies; `dockwarden::cli::proxy::ProxyArgs`).
    #[command(hide = true)]
    ProxyArgs { file: std::path::PathBuf },
    /// Print the rule catalogue.
    Rules(dockwarden::cli::rules::RulesArgs),
    /// Run the workspace lifecycle service.
    Serve(dockwarden::cli::serve::ServeArgs),
    /// Talk to the workspace lifecycle service.
    Ws(dockwarden::cli::ws::WsArgs),
    /// PID 1 of a workspace's sandbox (started by the service; docs/isolation.md).
    #[command(hide = true)]
    SandboxInit(dockwarden::workspace::sandbox::InitArgs),
    /// Rotate or forget the key that seals workspace secrets (service stopped).
    Secrets(dockwarden::cli::secrets::SecretsArgs),
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // In the log format the command chose (`--log-format json`: one more JSON line).
            dockwarden::cli::logging::report_fatal(&e);
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Proxy(a) => dockwarden::cli::proxy::main(*a),
        Command::ProxyArgs { file } => {
            dockwarden::cli::proxy::main(dockwarden::cli::proxy::read_args_file(&file)?)
        }
        Command::Rules(a) => dockwarden::cli::rules::main(a),
        Command::Serve(a) => {
            with_returning_malloc()?;
            runtime()?.block_on(dockwarden::cli::serve::serve(a))
        }
        Command::Ws(a) => runtime()?.block_on(dockwarden::cli::ws::ws(a)),
        Command::SandboxInit(a) => dockwarden::workspace::sandbox::init_main(a),
        Command::Secrets(a) => dockwarden::cli::secrets::main(a),
    }
}

/// The service frees most of a large snapshot's memory afterwards, but glibc keeps freed
/// blocks at the top of its per-thread arenas (measured: 15 MiB in use, 114 MiB resident when
/// idle; benches/README.md). With allocations of 256 KiB and more served by `mmap`, they go
/// back to the kernel when freed (idle 29 MiB). The tunable is only read at start-up, so the
/// service re-executes itself once with it set (same pid, same arguments); an explicit
/// `glibc.malloc.mmap_threshold` in the environment is kept as given.
fn with_returning_malloc() -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    const TUNABLE: &str = "glibc.malloc.mmap_threshold";
    if !cfg!(target_env = "gnu") {
        return Ok(());
    }
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if current.contains(TUNABLE) {
        return Ok(());
    }
    let value = if current.is_empty() {
        format!("{TUNABLE}=262144")
    } else {
        format!("{current}:{TUNABLE}=262144")
    };
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(args)
        .env("GLIBC_TUNABLES", value)
        .exec();
    Err(anyhow::anyhow!(
        "re-executing the service with {TUNABLE} set: {err}"
    ))
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
