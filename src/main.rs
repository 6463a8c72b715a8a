//! The `dockwarden` binary: clap commands only; the work is in the library.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "dockwarden", version, about = "A default-deny Docker API policy proxy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the policy proxy in front of a Docker daemon.
    Proxy(Box<dockwarden::cli::proxy::ProxyArgs>),
    /// Print the rule catalogue.
    Rules(dockwarden::cli::rules::RulesArgs),
    /// Run the workspace lifecycle service.
    Serve(dockwarden::cli::workspace::ServeArgs),
    /// Talk to the workspace lifecycle service.
    Ws(dockwarden::cli::workspace::WsArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Proxy(a) => dockwarden::cli::proxy::main(*a),
        Command::Rules(a) => dockwarden::cli::rules::main(a),
        Command::Serve(a) => runtime()?.block_on(dockwarden::cli::workspace::serve(a)),
        Command::Ws(a) => runtime()?.block_on(dockwarden::cli::workspace::ws(a)),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}
