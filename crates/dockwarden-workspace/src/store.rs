//! SQLite state: workspaces, snapshots and the journal of in-flight transitions.
//!
//! INVARIANT: a snapshot row is inserted only after its manifest and every blob it names
//! are durable, so any snapshot the store returns is complete.
//! INVARIANT: a journal row exists exactly while a transition is in flight; it is removed in
//! the same transaction that persists the transition's result.
//! INVARIANT: a uid is allocated only when no workspace holds it and it is not quarantined
//! (`quarantined_uids`: something of its previous holder's could not be removed).
//! INVARIANT: a workspace's secrets are written only sealed (`secrets::seal`), bound to its
//! row; `Store` is opened only with the key its database's secrets were sealed under.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::error::{WsError, WsResult};
use crate::model::{SnapshotInfo, Workspace, now_ms};
use crate::secrets::{self, Inspection, SealKey, row_ad};
use crate::status::Status;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS workspaces (
    id TEXT PRIMARY KEY, status TEXT NOT NULL, uid INTEGER NOT NULL UNIQUE,
    doc TEXT NOT NULL, secrets TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (
    id TEXT PRIMARY KEY, workspace_id TEXT NOT NULL, created_at_ms INTEGER NOT NULL,
    manifest_sha256 TEXT NOT NULL, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS snapshots_ws ON snapshots(workspace_id, created_at_ms);
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, workspace_id TEXT NOT NULL, op TEXT NOT NULL,
    started_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS quarantined_uids (
    uid INTEGER PRIMARY KEY, reason TEXT NOT NULL, since_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

/// One in-flight transition found in the journal.
#[derive(Debug, Clone)]
pub struct JournalEntry {
    pub seq: i64,
    pub workspace_id: String,
    pub op: String,
}

/// A uid kept from allocation until a sweep finds it clean (`uidsweep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub uid: u32,
    pub reason: String,
    pub since_ms: u64,
}

/// The service's durable state.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// Room to close transitions on a full disk (see `reserve`).
    pub reserve: crate::reserve::Reserve,
    /// The key the secrets are sealed under.
    key: SealKey,
}

/// A workspace's secrets as stored: sealed for its row (only `Store::seal_secrets` makes one).
#[derive(Debug)]
pub struct SealedSecrets {
    id: String,
    value: String,
}

/// Opens the database file (made `0600`) with full durability; no schema, no writes.
pub(crate) fn connect(path: &Path) -> WsResult<Connection> {
    // Only the service may read it (SQLite gives its WAL the same mode).
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| WsError::io(path, e))?;
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Replaced and deleted values are zeroed, not left in free space.
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

fn to_json<T: serde::Serialize>(v: &T) -> WsResult<String> {
    serde_json::to_string(v).map_err(|e| WsError::Internal(format!("encoding state: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> WsResult<T> {
    serde_json::from_str(s).map_err(|e| WsError::Internal(format!("decoding state: {e}")))
}

impl Store {
    /// Opens (or creates) the database, its secrets sealed under the key at `key_path`
    /// (made there at the first start; see `secrets::unlock`, which refuses a missing or
    /// wrong key before anything is written).
    pub fn open_sealed(path: &Path, key_path: &Path) -> WsResult<Store> {
        Store::open_with(path, |ins| Ok(secrets::unlock(ins, path, key_path)?))
    }

    /// Tests: a fresh database under a random key that is never written down.
    #[cfg(test)]
    pub fn open(path: &Path) -> WsResult<Store> {
        Store::open_with(path, |_| {
            let bytes = SealKey::generate().map_err(secrets::SecretsError::from)?;
            SealKey::from_bytes(&bytes[..]).ok_or_else(|| WsError::Internal("key length".into()))
        })
    }

    fn open_with(
        path: &Path,
        key: impl FnOnce(&Inspection) -> WsResult<SealKey>,
    ) -> WsResult<Store> {
        let mut conn = connect(path)?;
        let ins = Inspection::read(&conn)?;
        let key = key(&ins)?;
        // INVARIANT: nothing was written above; a refused key left the database as it was.
        conn.execute_batch(SCHEMA)?;
        secrets::settle(&mut conn, &key, &ins)?;
        let reserve = crate::reserve::Reserve::new(&path.with_file_name("space.reserve"));
        reserve.ensure();
        // Migration: resource rows and resize requests (additive; old databases keep working).
        conn.execute_batch(crate::resources::persist::SCHEMA)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            reserve,
            key,
        })
    }

    /// Seals `secrets` for the row of workspace `id`.
    pub fn seal_secrets(
        &self,
        id: &str,
        secrets: &BTreeMap<String, String>,
    ) -> WsResult<SealedSecrets> {
        let plain = zeroize::Zeroizing::new(to_json(secrets)?);
        let sealed = self
            .key
            .seal(&row_ad(id), plain.as_bytes())
            .map_err(secrets::SecretsError::from)?;
        Ok(SealedSecrets {
            id: id.to_string(),
            value: sealed,
        })
    }

    fn lock(&self) -> WsResult<MutexGuard<'_, Connection>> {
        self.conn
            .lock()
            .map_err(|_| WsError::Internal("state lock poisoned".into()))
    }

    /// Runs `f` in one transaction; it commits only if `f` succeeds.
    pub fn tx<T>(&self, f: impl FnOnce(&Transaction<'_>) -> WsResult<T>) -> WsResult<T> {
        let run = || {
            let mut conn = self.lock()?;
            let tx = conn.transaction()?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        };
        run().map_err(|e: WsError| e.at_db(&self.path))
    }

    /// `tx` for transitions that must complete (closing the journal, recording a stop): on
    /// a full disk a chunk of the space reserve is given up and the transaction tried
    /// again, until it succeeds or the reserve is gone.
    pub fn tx_reserved<T>(&self, f: impl Fn(&Transaction<'_>) -> WsResult<T>) -> WsResult<T> {
        loop {
            match self.tx(&f) {
                Err(e) if e.is_no_space() && self.reserve.release() => continue,
                other => return other,
            }
        }
    }

    pub fn get(&self, id: &str) -> WsResult<Option<Workspace>> {
        let conn = self.lock()?;
        get_in(&conn, id)
    }

    /// The workspace, or `not_found`.
    pub fn require(&self, id: &str) -> WsResult<Workspace> {
        self.get(id)?
            .ok_or_else(|| WsError::NotFound(id.to_string()))
    }

    pub fn list(&self) -> WsResult<Vec<Workspace>> {
        let conn = self.lock()?;
        let mut stmt = conn.prepare("SELECT doc, status FROM workspaces ORDER BY id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (doc, status) = row?;
            out.push(with_status(from_json(&doc)?, &status));
        }
        Ok(out)
    }

    /// A workspace's secrets, opened.
    pub fn secrets(&self, id: &str) -> WsResult<BTreeMap<String, String>> {
        let conn = self.lock()?;
        let s: Option<String> = conn
            .query_row("SELECT secrets FROM workspaces WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(stored) = s else {
            return Err(WsError::NotFound(id.to_string()));
        };
        // Never read as plain text here: start-up sealed every plain row.
        let unopened = |source| secrets::SecretsError::Row {
            id: id.to_string(),
            source,
        };
        let plain = self.key.open(&row_ad(id), &stored).map_err(unopened)?;
        serde_json::from_slice(&plain)
            .map_err(|e| WsError::Internal(format!("decoding the secrets of `{id}`: {e}")))
    }

    /// Uids that cannot be allocated: held by a workspace, or quarantined.
    pub fn used_uids(&self) -> WsResult<Vec<u32>> {
        let conn = self.lock()?;
        let mut stmt =
            conn.prepare("SELECT uid FROM workspaces UNION SELECT uid FROM quarantined_uids")?;
        let rows = stmt.query_map([], |r| r.get::<_, u32>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The quarantined uids, lowest first.
    pub fn quarantined(&self) -> WsResult<Vec<Quarantined>> {
        let conn = self.lock()?;
        let mut stmt =
            conn.prepare("SELECT uid, reason, since_ms FROM quarantined_uids ORDER BY uid")?;
        let rows = stmt.query_map([], |r| {
            Ok(Quarantined {
                uid: r.get(0)?,
                reason: r.get(1)?,
                since_ms: r.get::<_, i64>(2)? as u64,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    pub fn journal(&self) -> WsResult<Vec<JournalEntry>> {
        let conn = self.lock()?;
        let mut stmt = conn.prepare("SELECT seq, workspace_id, op FROM journal ORDER BY seq")?;
        let rows = stmt.query_map([], |r| {
            Ok(JournalEntry {
                seq: r.get(0)?,
                workspace_id: r.get(1)?,
                op: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// Records that `op` is starting on `id`; returns the journal sequence number.
    pub fn begin(&self, id: &str, op: &str) -> WsResult<i64> {
        self.tx(|tx| begin_in(tx, id, op))
    }

    /// `begin` for a stop, which must go ahead on a full disk too.
    pub fn begin_reserved(&self, id: &str, op: &str) -> WsResult<i64> {
        self.tx_reserved(|tx| begin_in(tx, id, op))
    }

    /// Drops a journal row without changing anything else (the op changed nothing).
    pub fn end(&self, seq: i64) -> WsResult<()> {
        self.tx_reserved(|tx| end_in(tx, seq))
    }

    pub fn snapshot(&self, id: &str) -> WsResult<Option<(SnapshotInfo, String)>> {
        let conn = self.lock()?;
        let row: Option<(String, String)> = conn
            .query_row(
                "SELECT doc, manifest_sha256 FROM snapshots WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        row.map(|(doc, sha)| Ok((from_json(&doc)?, sha)))
            .transpose()
    }

    /// Snapshots of one workspace, newest first.
    pub fn snapshots_of(&self, ws: &str) -> WsResult<Vec<(SnapshotInfo, String)>> {
        let conn = self.lock()?;
        let mut stmt = conn.prepare(
            "SELECT doc, manifest_sha256 FROM snapshots WHERE workspace_id = ?1
             ORDER BY created_at_ms DESC, rowid DESC",
        )?;
        let rows = stmt.query_map([ws], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (doc, sha) = row?;
            out.push((from_json(&doc)?, sha));
        }
        Ok(out)
    }

    /// Ids of every recorded snapshot (used to collect unreferenced blobs).
    pub fn all_snapshot_ids(&self) -> WsResult<Vec<String>> {
        let conn = self.lock()?;
        let mut stmt = conn.prepare("SELECT id FROM snapshots")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

fn with_status(mut ws: Workspace, status: &str) -> Workspace {
    if let Some(s) = Status::parse(status) {
        ws.status = s;
    }
    ws
}

fn get_in(conn: &Connection, id: &str) -> WsResult<Option<Workspace>> {
    let row: Option<(String, String)> = conn
        .query_row(
            "SELECT doc, status FROM workspaces WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    row.map(|(doc, status)| Ok(with_status(from_json(&doc)?, &status)))
        .transpose()
}

/// Reads a workspace inside a transaction.
pub fn get_tx(tx: &Transaction<'_>, id: &str) -> WsResult<Option<Workspace>> {
    get_in(tx, id)
}

pub fn begin_in(tx: &Transaction<'_>, id: &str, op: &str) -> WsResult<i64> {
    tx.execute(
        "INSERT INTO journal (workspace_id, op, started_at_ms) VALUES (?1, ?2, ?3)",
        params![id, op, now_ms() as i64],
    )?;
    Ok(tx.last_insert_rowid())
}

pub fn end_in(tx: &Transaction<'_>, seq: i64) -> WsResult<()> {
    tx.execute("DELETE FROM journal WHERE seq = ?1", [seq])?;
    Ok(())
}

/// Inserts a new workspace with its secrets (sealed for it by `Store::seal_secrets`).
pub fn insert_ws(tx: &Transaction<'_>, ws: &Workspace, secrets: &SealedSecrets) -> WsResult<()> {
    if secrets.id != ws.id {
        return Err(WsError::Internal(format!(
            "secrets sealed for `{}` given to `{}`",
            secrets.id, ws.id
        )));
    }
    tx.execute(
        "INSERT INTO workspaces (id, status, uid, doc, secrets) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            ws.id,
            ws.status.as_str(),
            ws.uid,
            to_json(ws)?,
            secrets.value
        ],
    )?;
    Ok(())
}

/// Writes back a workspace's document and status.
pub fn put_ws(tx: &Transaction<'_>, ws: &Workspace) -> WsResult<()> {
    let n = tx.execute(
        "UPDATE workspaces SET status = ?2, doc = ?3 WHERE id = ?1",
        params![ws.id, ws.status.as_str(), to_json(ws)?],
    )?;
    if n == 0 {
        return Err(WsError::NotFound(ws.id.clone()));
    }
    Ok(())
}

pub fn delete_ws(tx: &Transaction<'_>, id: &str) -> WsResult<()> {
    tx.execute("DELETE FROM snapshots WHERE workspace_id = ?1", [id])?;
    tx.execute("DELETE FROM workspaces WHERE id = ?1", [id])?;
    tx.execute("DELETE FROM journal WHERE workspace_id = ?1", [id])?;
    Ok(())
}

/// Keeps `uid` from allocation (again: the first reason and time stay).
pub fn quarantine_in(tx: &Transaction<'_>, uid: u32, reason: &str) -> WsResult<()> {
    tx.execute(
        "INSERT INTO quarantined_uids (uid, reason, since_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT(uid) DO NOTHING",
        params![uid, reason, now_ms() as i64],
    )?;
    Ok(())
}

/// Hands a quarantined uid back to the allocator (a sweep found it clean).
pub fn release_in(tx: &Transaction<'_>, uid: u32) -> WsResult<()> {
    tx.execute("DELETE FROM quarantined_uids WHERE uid = ?1", [uid])?;
    Ok(())
}

/// Forgets snapshots (their manifests and blobs go at the next garbage collection).
pub fn delete_snapshots(tx: &Transaction<'_>, ids: &[String]) -> WsResult<()> {
    for id in ids {
        tx.execute("DELETE FROM snapshots WHERE id = ?1", [id])?;
    }
    Ok(())
}

/// Records a complete snapshot (the commit point of a capture).
pub fn insert_snapshot(
    tx: &Transaction<'_>,
    info: &SnapshotInfo,
    manifest_sha: &str,
) -> WsResult<()> {
    tx.execute(
        "INSERT INTO snapshots (id, workspace_id, created_at_ms, manifest_sha256, doc)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            info.id,
            info.workspace_id,
            info.created_at_ms as i64,
            manifest_sha,
            to_json(info)?
        ],
    )?;
    Ok(())
}
