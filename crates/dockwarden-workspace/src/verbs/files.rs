//! The files verbs: guards, then the beneath-resolving operations of `files::Files`.

use crate::error::{WsError, WsResult};
use crate::events::Resumed;
use crate::files::{FileInfo, Files, clean_rel};
use crate::service::Service;
use crate::status::Verb;

/// One file operation; paths are relative to the worktree.
#[derive(Debug, Clone)]
pub enum FileOp {
    Read {
        path: String,
    },
    Write {
        path: String,
        data: Vec<u8>,
    },
    List {
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
    Remove {
        path: String,
        recursive: bool,
    },
    /// Checked and decoded by `files::batch::decode`.
    WriteBatch {
        files: Vec<(String, Vec<u8>)>,
    },
}

impl FileOp {
    fn writes(&self) -> bool {
        matches!(
            self,
            FileOp::Write { .. }
                | FileOp::Mkdir { .. }
                | FileOp::Rename { .. }
                | FileOp::Copy { .. }
                | FileOp::Remove { .. }
                | FileOp::WriteBatch { .. }
        )
    }
}

/// What a file operation returns.
#[derive(Debug)]
pub enum FileOut {
    Data(Vec<u8>),
    Entries(Vec<FileInfo>),
    Info(FileInfo),
    Exists(bool),
    Done,
    Written(Vec<String>),
}

fn apply(files: &Files, op: FileOp) -> WsResult<FileOut> {
    Ok(match op {
        FileOp::Read { path } => FileOut::Data(files.read(&clean_rel(&path)?)?),
        FileOp::Write { path, data } => {
            files.write(&clean_rel(&path)?, &data)?;
            FileOut::Done
        }
        FileOp::List { path } => FileOut::Entries(files.list(&clean_rel(&path)?)?),
        FileOp::Exists { path } => FileOut::Exists(files.exists(&clean_rel(&path)?)?),
        FileOp::Info { path } => FileOut::Info(files.info(&clean_rel(&path)?)?),
        FileOp::Mkdir { path, parents } => {
            files.mkdir(&clean_rel(&path)?, parents)?;
            FileOut::Done
        }
        FileOp::Rename { from, to } => {
            files.rename(&clean_rel(&from)?, &clean_rel(&to)?)?;
            FileOut::Done
        }
        FileOp::Copy { from, to } => {
            files.copy(&clean_rel(&from)?, &clean_rel(&to)?)?;
            FileOut::Done
        }
        FileOp::Remove { path, recursive } => {
            files.remove(&clean_rel(&path)?, recursive)?;
            FileOut::Done
        }
        FileOp::WriteBatch { files: entries } => {
            FileOut::Written(crate::files::batch::write_all(files, &entries)?)
        }
    })
}

impl Service {
    /// `files` that first resumes a stopped workspace for a change (reads never start
    /// one) and heals an invalid worktree of a live one.
    pub async fn files_resuming(&self, id: &str, op: FileOp) -> WsResult<Resumed<FileOut>> {
        let prepared = self.prepare(id, op.writes()).await?;
        let out = self.files(id, op).await?;
        Ok(Resumed {
            result: out,
            resumed: prepared.resumed,
            recovery: prepared.recovery,
        })
    }

    /// Runs a file operation. Reads work on stopped workspaces without starting them.
    pub async fn files(&self, id: &str, op: FileOp) -> WsResult<FileOut> {
        let verb = if op.writes() {
            Verb::WriteFiles
        } else {
            Verb::ReadFiles
        };
        let ws = self.checked(id, verb)?;
        if ws.status.is_live() {
            self.live(id).touch();
        }
        let (worktree, owner) = (self.worktree(id), self.owner(&ws));
        let base = worktree.clone();
        tokio::task::spawn_blocking(move || apply(&Files::open(&worktree, owner)?, op))
            .await
            .map_err(|e| WsError::Internal(format!("files task: {e}")))?
            .map_err(|e| e.with_free_at(&base))
    }
}
