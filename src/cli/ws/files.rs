//! `dockwarden ws files`: the nine file operations. Reads print the content; every change
//! prints the path and what was done.

use std::io::Write;

use super::render;
use crate::workspace::client::Client;
use crate::workspace::client::calls::FileCall;

/// `dockwarden ws files` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum FilesCommand {
    /// Print a file (at most 2 MiB).
    Read {
        /// Path relative to the worktree.
        path: String,
    },
    /// Write a file atomically from `--content` or standard input (at most 2 MiB).
    Write {
        /// Path relative to the worktree; missing parent directories are made.
        path: String,
        /// The content (default: standard input).
        #[arg(long)]
        content: Option<String>,
    },
    /// List a directory (default: the worktree root).
    List {
        /// Directory relative to the worktree.
        #[arg(default_value = "")]
        path: String,
    },
    /// Print whether a path exists.
    Exists {
        /// Path relative to the worktree.
        path: String,
    },
    /// Show kind, size, mode and modification time of a path.
    Info {
        /// Path relative to the worktree.
        path: String,
    },
    /// Create a directory (`-p`: with its parents, no error if it exists).
    Mkdir {
        /// Directory relative to the worktree.
        path: String,
        /// Make missing parents; an existing directory is no error.
        #[arg(short, long)]
        parents: bool,
    },
    /// Rename or move a path.
    Rename {
        /// The path to move.
        from: String,
        /// Its new path.
        to: String,
    },
    /// Copy a regular file.
    Copy {
        /// The file to copy.
        from: String,
        /// The copy's path.
        to: String,
    },
    /// Remove a file or (with `-r`) a directory tree.
    Rm {
        /// Path relative to the worktree.
        path: String,
        /// Remove a directory and everything in it.
        #[arg(short, long)]
        recursive: bool,
    },
}

pub(super) async fn files(
    c: &Client,
    id: &str,
    op: FilesCommand,
    as_json: bool,
) -> anyhow::Result<()> {
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
            let len = data.len();
            let out = c.write_file(id, &path, data).await?;
            if as_json {
                println!("{out}");
            } else {
                print!("{}", render::file_written(&path, len, &out));
            }
            return Ok(());
        }
        FilesCommand::List { path } => FileCall::List { path },
        FilesCommand::Exists { path } => FileCall::Exists { path },
        FilesCommand::Info { path } => FileCall::Info { path },
        FilesCommand::Mkdir { path, parents } => FileCall::Mkdir { path, parents },
        FilesCommand::Rename { from, to } => FileCall::Rename { from, to },
        FilesCommand::Copy { from, to } => FileCall::Copy { from, to },
        FilesCommand::Rm { path, recursive } => FileCall::Remove { path, recursive },
    };
    let out = c.file_call(id, &call).await?;
    if as_json {
        println!("{out}");
    } else {
        print!("{}", render::file_op(&call, &out));
    }
    Ok(())
}
