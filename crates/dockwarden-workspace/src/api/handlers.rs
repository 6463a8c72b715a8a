//! Request handlers: decode, call the service, encode. No lifecycle logic lives here.

use std::future::Future;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::sync::mpsc;

use super::response::{Body, error, json};
use super::routes::{Route, route};
use super::stream::ndjson;
use super::{body, files_api, query};
use crate::error::{WsError, WsResult};
use crate::model::{CreateRequest, ExecRequest, ReprovisionRequest};
use crate::resources::input::ResizeInput;
use crate::runtime::{Chunk, Stream};
use crate::service::{ProgressSink, Service};

/// Answers one request.
pub async fn handle(svc: Arc<Service>, req: Request<Incoming>) -> Response<Body> {
    let (parts, incoming) = req.into_parts();
    let q = match query::parse(parts.uri.query()) {
        Ok(q) => q,
        Err(e) => return error(&e),
    };
    let streaming = query::flag(&q, "stream");
    let r = route(&parts.method, parts.uri.path());
    tracing::debug!(http.method = %parts.method, http.path = parts.uri.path(), "request");
    let result = match r {
        Route::Health => Ok(json(StatusCode::OK, &serde_json::json!({ "status": "ok" }))),
        Route::Create => create(svc.clone(), incoming, streaming).await,
        Route::List => query::metadata_filter(&q)
            .and_then(|f| svc.list(&f))
            .map(|l| json(StatusCode::OK, &l)),
        Route::DeleteMatching => match query::metadata_filter(&q) {
            Ok(f) => svc
                .delete_matching(&f)
                .await
                .map(|d| json(StatusCode::OK, &serde_json::json!({ "deleted": d }))),
            Err(e) => Err(e),
        },
        Route::Info(id) => svc.info(&id).map(|w| json(StatusCode::OK, &w)),
        Route::Delete(id) => svc
            .delete(&id)
            .await
            .map(|()| json(StatusCode::OK, &serde_json::json!({ "deleted": [id] }))),
        Route::Exec(id) => exec(svc.clone(), id, incoming, streaming).await,
        Route::Snapshots(id) => svc.list_snapshots(&id).map(|s| json(StatusCode::OK, &s)),
        Route::Snapshot(id) => long_op(svc.clone(), "snapshot", id, streaming).await,
        Route::Kill(id) => long_op(svc.clone(), "kill", id, streaming).await,
        Route::Connect(id) => long_op(svc.clone(), "connect", id, streaming).await,
        Route::Suspend(id) => svc
            .suspend(&id, "suspend")
            .await
            .map(|r| json(StatusCode::OK, &r)),
        Route::Resume(id) => svc.resume(&id).await.map(|r| json(StatusCode::OK, &r)),
        Route::Restart(id) => svc.restart(&id).await.map(|r| json(StatusCode::OK, &r)),
        Route::Reprovision(id) => match body::json::<ReprovisionRequest>(incoming).await {
            Ok(req) => svc
                .reprovision(&id, req)
                .await
                .map(|r| json(StatusCode::OK, &r)),
            Err(e) => Err(e),
        },
        Route::Files(id, op) => files_api::handle(&svc, &id, op, &q, incoming).await,
        Route::Status(id) => svc.resource_status(&id).map(|s| json(StatusCode::OK, &s)),
        Route::Resize(id) => match body::json::<ResizeInput>(incoming).await {
            Ok(req) => svc.resize(&id, req).await.map(|r| json(StatusCode::OK, &r)),
            Err(e) => Err(e),
        },
        Route::ResizeRequests(id) => svc.resize_requests(&id).map(|r| json(StatusCode::OK, &r)),
        Route::DecideRequest(rid, approve) => svc
            .decide_request(&rid, approve)
            .await
            .map(|r| json(StatusCode::OK, &r)),
        Route::WrongMethod => Err(WsError::Invalid(format!(
            "method `{}` is not allowed here",
            parts.method
        ))),
        Route::Unknown => Err(WsError::NoEndpoint(parts.uri.path().to_string())),
    };
    result.unwrap_or_else(|e| error(&e))
}

async fn create(
    svc: Arc<Service>,
    incoming: Incoming,
    streaming: bool,
) -> WsResult<Response<Body>> {
    let req: CreateRequest = body::json(incoming).await?;
    if streaming {
        return Ok(with_progress(move |progress| async move {
            let created = svc.create_with_progress(req, progress).await?;
            serde_json::to_value(created)
                .map_err(|e| WsError::Internal(format!("encoding result: {e}")))
        }));
    }
    let created = svc.create(req).await?;
    let status = if created.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json(status, &created))
}

async fn exec(
    svc: Arc<Service>,
    id: String,
    incoming: Incoming,
    streaming: bool,
) -> WsResult<Response<Body>> {
    let req: ExecRequest = body::json(incoming).await?;
    if !streaming {
        return Ok(json(
            StatusCode::OK,
            &svc.exec_resuming(&id, req, None).await?,
        ));
    }
    svc.info(&id)?;
    let (mut events, resp) = ndjson();
    tokio::spawn(async move {
        let (tx, mut rx) = mpsc::channel::<Chunk>(64);
        let run = tokio::spawn(async move { svc.exec_resuming(&id, req, Some(tx)).await });
        while let Some(c) = rx.recv().await {
            let kind = if c.stream == Stream::Stdout {
                "stdout"
            } else {
                "stderr"
            };
            events
                .send(
                    &serde_json::json!({ "type": kind, "data": String::from_utf8_lossy(&c.data) }),
                )
                .await;
        }
        let result = run
            .await
            .unwrap_or_else(|e| Err(WsError::Internal(format!("exec task: {e}"))));
        events.finish(result).await;
    });
    Ok(resp)
}

/// Snapshot, kill and connect: plain JSON, or progress events then the result.
async fn long_op(
    svc: Arc<Service>,
    verb: &'static str,
    id: String,
    streaming: bool,
) -> WsResult<Response<Body>> {
    if !streaming {
        let progress: ProgressSink = Arc::new(|_| {});
        return run_verb(&svc, verb, &id, progress)
            .await
            .map(|v| json(StatusCode::OK, &v));
    }
    svc.info(&id)?;
    Ok(with_progress(move |progress| async move {
        run_verb(&svc, verb, &id, progress).await
    }))
}

/// A streaming response: progress events while `op` runs, then its result.
fn with_progress<F, Fut>(op: F) -> Response<Body>
where
    F: FnOnce(ProgressSink) -> Fut + Send + 'static,
    Fut: Future<Output = WsResult<serde_json::Value>> + Send + 'static,
{
    let (mut events, resp) = ndjson();
    tokio::spawn(async move {
        let (tx, mut rx) = mpsc::channel(16);
        let progress: ProgressSink = Arc::new(move |p| {
            let _ = tx.try_send(p);
        });
        let run = tokio::spawn(op(progress));
        while let Some(p) = rx.recv().await {
            let event = serde_json::json!({ "type": "progress", "progress": p });
            events.send(&event).await;
        }
        let result = run
            .await
            .unwrap_or_else(|e| Err(WsError::Internal(format!("task: {e}"))));
        events.finish(result).await;
    });
    resp
}

async fn run_verb(
    svc: &Service,
    verb: &str,
    id: &str,
    progress: ProgressSink,
) -> WsResult<serde_json::Value> {
    let v = match verb {
        "kill" => serde_json::to_value(svc.kill(id, "kill", progress).await?),
        "connect" => serde_json::to_value(svc.connect(id, progress).await?),
        _ => serde_json::to_value(svc.snapshot_resuming(id, progress).await?),
    };
    v.map_err(|e| WsError::Internal(format!("encoding result: {e}")))
}
