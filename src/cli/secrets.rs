//! `dockwarden secrets`: offline operations on the key that seals workspace secrets
//! (clap types and handlers only; the work is in `crate::workspace::secrets::rotate`).

use std::path::PathBuf;

use anyhow::Context;

use crate::workspace::secrets::{keyfile, rotate};

/// Flags of `dockwarden secrets`.
#[derive(Debug, clap::Args)]
pub struct SecretsArgs {
    #[command(subcommand)]
    pub command: SecretsCommand,
}

/// `dockwarden secrets` subcommands; each needs the service stopped (it takes its lock).
#[derive(Debug, clap::Subcommand)]
pub enum SecretsCommand {
    /// Re-seal every workspace's secrets under a new key, in one transaction; then start
    /// `serve --secrets-key` with the new key.
    Rotate {
        /// The service's `--state-dir`.
        #[arg(long)]
        state_dir: PathBuf,
        /// The current key.
        #[arg(long, default_value = keyfile::DEFAULT_PATH)]
        from: PathBuf,
        /// The new key: made there (0600) if missing, else read and checked like any key.
        #[arg(long)]
        to: PathBuf,
    },
    /// The key is lost: drop every workspace's secrets (nothing else), so the next start
    /// makes a new key.
    Forget {
        /// The service's `--state-dir`.
        #[arg(long)]
        state_dir: PathBuf,
        /// Confirms that the secrets are to be dropped.
        #[arg(long)]
        yes: bool,
    },
}

pub fn main(args: SecretsArgs) -> anyhow::Result<()> {
    match args.command {
        SecretsCommand::Rotate {
            state_dir,
            from,
            to,
        } => {
            let done = rotate::rotate(&state_dir, &from, &to).with_context(|| {
                format!("rotating the secrets key of `{}`", state_dir.display())
            })?;
            let made = if done.made_key { "made" } else { "given" };
            println!(
                "re-sealed the secrets of {} workspace(s) under `{}` ({made}); start `serve --secrets-key {}`",
                done.workspaces,
                to.display(),
                to.display()
            );
        }
        SecretsCommand::Forget { state_dir, yes } => {
            anyhow::ensure!(
                yes,
                "this drops the secrets of every workspace in `{}`; add `--yes` to go ahead",
                state_dir.display()
            );
            let n = rotate::forget(&state_dir)
                .with_context(|| format!("dropping the secrets of `{}`", state_dir.display()))?;
            println!("dropped the secrets of {n} workspace(s); the next `serve` makes a new key");
        }
    }
    Ok(())
}
