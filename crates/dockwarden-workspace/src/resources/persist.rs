//! SQLite rows of the resources: each workspace's sizing and own layer, and resize requests
//! (`pending_approval`, `approved`, `rejected`, `applied`, `skipped`, `failed`). The tables
//! are added with `CREATE TABLE IF NOT EXISTS`, so existing databases keep working.

use rusqlite::{OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use super::layers::LayerBounds;
use super::model::Sizing;
use super::resize::Plan;
use crate::error::{WsError, WsResult};
use crate::store::Store;

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ws_resources (
    workspace_id TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resize_requests (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, state TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS resize_requests_ws ON resize_requests(workspace_id, created_at_ms);
";

/// A workspace's resources as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WsResources {
    pub sizing: Sizing,
    /// The workspace layer's own bounds, from its create request.
    pub own: LayerBounds,
}

/// A recorded resize request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RequestRecord {
    pub id: String,
    #[serde(alias = "workspaceId")]
    pub workspace_id: String,
    pub state: String,
    #[serde(alias = "createdAtMs")]
    pub created_at_ms: u64,
    pub plan: Plan,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn enc<T: Serialize>(v: &T) -> WsResult<String> {
    serde_json::to_string(v).map_err(|e| WsError::Internal(format!("encoding resources: {e}")))
}

fn dec<T: serde::de::DeserializeOwned>(s: &str) -> WsResult<T> {
    serde_json::from_str(s).map_err(|e| WsError::Internal(format!("decoding resources: {e}")))
}

pub fn put(tx: &Transaction<'_>, id: &str, r: &WsResources) -> WsResult<()> {
    tx.execute(
        "INSERT INTO ws_resources (workspace_id, doc) VALUES (?1, ?2)
         ON CONFLICT(workspace_id) DO UPDATE SET doc = excluded.doc",
        params![id, enc(r)?],
    )?;
    Ok(())
}

pub fn get(store: &Store, id: &str) -> WsResult<Option<WsResources>> {
    store.tx(|tx| {
        let doc: Option<String> = tx
            .query_row(
                "SELECT doc FROM ws_resources WHERE workspace_id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        doc.map(|d| dec(&d)).transpose()
    })
}

pub fn delete(store: &Store, id: &str) -> WsResult<()> {
    store.tx(|tx| {
        tx.execute("DELETE FROM ws_resources WHERE workspace_id = ?1", [id])?;
        tx.execute("DELETE FROM resize_requests WHERE workspace_id = ?1", [id])?;
        Ok(())
    })
}

pub fn put_request(tx: &Transaction<'_>, r: &RequestRecord) -> WsResult<()> {
    tx.execute(
        "INSERT INTO resize_requests (id, workspace_id, state, created_at_ms, doc)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(id) DO UPDATE SET state = excluded.state, doc = excluded.doc",
        params![
            r.id,
            r.workspace_id,
            r.state,
            r.created_at_ms as i64,
            enc(r)?
        ],
    )?;
    Ok(())
}

pub fn request(store: &Store, id: &str) -> WsResult<Option<RequestRecord>> {
    store.tx(|tx| {
        let doc: Option<String> = tx
            .query_row("SELECT doc FROM resize_requests WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        doc.map(|d| dec(&d)).transpose()
    })
}

pub fn requests_of(store: &Store, ws: &str) -> WsResult<Vec<RequestRecord>> {
    store.tx(|tx| {
        let mut stmt = tx.prepare(
            "SELECT doc FROM resize_requests WHERE workspace_id = ?1 ORDER BY created_at_ms, rowid",
        )?;
        let rows = stmt.query_map([ws], |r| r.get::<_, String>(0))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(dec(&row?)?);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod camel_case_rows {
    use super::*;

    /// Rows written before the API went snake_case (camelCase documents) still read.
    #[test]
    fn resources_stored_in_camel_case_still_read() {
        let r: WsResources = dec(
            r#"{"sizing":{"reservation":{"cpuMillis":250,"memoryBytes":33554432},
                "burstLimit":{"cpuMillis":1000,"memoryBytes":67108864,"pids":256,"diskBytes":null}},
                "own":{}}"#,
        )
        .expect("camelCase sizing");
        assert_eq!(r.sizing.burst_limit.memory_bytes, Some(64 << 20));
        assert_eq!(r.sizing.reservation.cpu_millis, Some(250));
        let q: RequestRecord = dec(
            r#"{"id":"rq","workspaceId":"w","state":"pending_approval","createdAtMs":5,
                "plan":{"changes":[{"axis":"memory","part":"burstLimit","from":1,"to":2,
                "direction":"up","mode":"live","action":"apply"}],"approvalNeeded":["x"],
                "target":{"reservation":{},"burstLimit":{}}}}"#,
        )
        .expect("camelCase request");
        assert_eq!(q.workspace_id, "w");
        assert_eq!(q.plan.approval_needed, ["x"]);
        // Written back snake_case.
        let text = enc(&q).expect("encode");
        assert!(
            text.contains("\"workspace_id\"") && text.contains("\"burst_limit\""),
            "{text}"
        );
        assert!(
            !text.contains("workspaceId") && !text.contains("burstLimit"),
            "{text}"
        );
    }
}
