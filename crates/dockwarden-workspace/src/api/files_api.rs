//! The files endpoints: query parameters in, `FileOp` to the service, JSON or bytes out.

use http::{Response, StatusCode};
use hyper::body::Incoming;

use super::response::{Body, bytes, json};
use super::routes::FilesRoute;
use super::{body, query};
use crate::error::{WsError, WsResult};
use crate::files::MAX_IO_BYTES;
use crate::files::batch::{self, BatchRequest};

/// A batch body holds base64 or JSON-escaped text, so it may be larger than its files.
const BATCH_BODY_LIMIT: u64 = 64 * 1024 * 1024;
use crate::service::Service;
use crate::verbs::{FileOp, FileOut};

async fn op_of(route: FilesRoute, q: &[(String, String)], incoming: Incoming) -> WsResult<FileOp> {
    let path = || query::require(q, "path").map(str::to_string);
    let from_to = || {
        Ok::<_, WsError>((
            query::require(q, "from")?.to_string(),
            query::require(q, "to")?.to_string(),
        ))
    };
    Ok(match route {
        FilesRoute::Read => FileOp::Read { path: path()? },
        FilesRoute::Write => {
            let path = path()?;
            let limit = usize::try_from(MAX_IO_BYTES).unwrap_or(usize::MAX);
            let data = body::read_capped(incoming, limit).await?.ok_or_else(|| {
                WsError::Invalid(format!("write to `{path}` exceeds the {MAX_IO_BYTES}-byte limit; write it from inside the workspace"))
            })?;
            FileOp::Write {
                path,
                data: data.to_vec(),
            }
        }
        FilesRoute::List => FileOp::List {
            path: query::get(q, "path").unwrap_or("").to_string(),
        },
        FilesRoute::Exists => FileOp::Exists { path: path()? },
        FilesRoute::Info => FileOp::Info {
            path: query::get(q, "path").unwrap_or("").to_string(),
        },
        FilesRoute::Mkdir => FileOp::Mkdir {
            path: path()?,
            parents: query::flag(q, "parents"),
        },
        FilesRoute::Rename => {
            let (from, to) = from_to()?;
            FileOp::Rename { from, to }
        }
        FilesRoute::Copy => {
            let (from, to) = from_to()?;
            FileOp::Copy { from, to }
        }
        FilesRoute::Remove => FileOp::Remove {
            path: path()?,
            recursive: query::flag(q, "recursive"),
        },
        FilesRoute::WriteBatch => {
            let limit = usize::try_from(BATCH_BODY_LIMIT).unwrap_or(usize::MAX);
            let data = body::read_capped(incoming, limit).await?.ok_or_else(|| {
                WsError::Invalid(format!(
                    "the batch exceeds {BATCH_BODY_LIMIT} bytes; split it into several calls"
                ))
            })?;
            let req: BatchRequest = serde_json::from_slice(&data)
                .map_err(|e| WsError::Invalid(format!("invalid batch body: {e}")))?;
            FileOp::WriteBatch {
                files: batch::decode(req)?,
            }
        }
    })
}

/// Answers one files request.
pub async fn handle(
    svc: &Service,
    id: &str,
    route: FilesRoute,
    q: &[(String, String)],
    incoming: Incoming,
) -> WsResult<Response<Body>> {
    let op = op_of(route, q, incoming).await?;
    let out = svc.files_resuming(id, op).await?;
    let resumed = out.resumed;
    let recovery = || serde_json::to_value(&out.recovery).unwrap_or_default();
    Ok(match out.result {
        FileOut::Data(ref d) => bytes(StatusCode::OK, "application/octet-stream", d.clone()),
        FileOut::Entries(ref e) => json(StatusCode::OK, e),
        FileOut::Info(ref i) => json(StatusCode::OK, i),
        FileOut::Exists(b) => json(StatusCode::OK, &serde_json::json!({ "exists": b })),
        FileOut::Done => json(
            StatusCode::OK,
            &serde_json::json!({ "ok": true, "resumed": resumed, "recovery": recovery() }),
        ),
        FileOut::Written(ref w) => json(
            StatusCode::OK,
            &serde_json::json!({ "ok": true, "written": w, "resumed": resumed, "recovery": recovery() }),
        ),
    })
}
