//! dockwarden: temporary entry point of the `ws` branch (the integrator keeps theirs).

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "dockwarden", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run the workspace lifecycle service.
    Serve(dockwarden::cli::workspace::ServeArgs),
    /// Talk to the workspace lifecycle service.
    Ws(dockwarden::cli::workspace::WsArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(a) => dockwarden::cli::workspace::serve(a).await,
        Command::Ws(a) => dockwarden::cli::workspace::ws(a).await,
    }
}
