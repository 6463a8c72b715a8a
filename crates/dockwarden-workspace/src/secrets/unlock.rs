//! Start-up: find the key the database's secrets were sealed under, or make the first one,
//! or refuse; then seal what older versions left in plain text.
//!
//! `unlock` only reads the database (and may make a key file when the database holds no
//! sealed value); every write is in `settle`, after `unlock` succeeded.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use tracing::info;

use super::seal::{Form, SealKey, form};
use super::{CANARY_AD, CANARY_ROW, CANARY_VALUE, SecretsError, keyfile, row_ad};

/// What the database holds, read before anything is written.
#[derive(Debug, Default)]
pub struct Inspection {
    /// The sealed check value, once a key was adopted.
    pub canary: Option<String>,
    /// Every workspace's stored secrets: `(id, stored text)`.
    pub rows: Vec<(String, String)>,
}

fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

impl Inspection {
    /// Reads the rows; a database from before the `meta` table (or a new one) is fine.
    pub fn read(conn: &Connection) -> rusqlite::Result<Inspection> {
        let mut out = Inspection::default();
        if has_table(conn, "meta")? {
            out.canary = conn
                .query_row("SELECT value FROM meta WHERE key = ?1", [CANARY_ROW], |r| {
                    r.get(0)
                })
                .optional()?;
        }
        if has_table(conn, "workspaces")? {
            let mut stmt = conn.prepare("SELECT id, secrets FROM workspaces ORDER BY id")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            out.rows = rows.collect::<Result<_, _>>()?;
        }
        Ok(out)
    }

    /// True once anything was sealed under a key: a new key would orphan it.
    fn holds_sealed(&self) -> bool {
        self.canary.is_some()
            || self
                .rows
                .iter()
                .any(|(_, s)| matches!(form(s), Form::Sealed(_)))
    }

    /// The first row in a form this version cannot read.
    fn unknown(&self) -> Option<(&str, &str)> {
        self.rows.iter().find_map(|(id, s)| match form(s) {
            Form::Unknown(tag) => Some((id.as_str(), tag)),
            _ => None,
        })
    }

    /// Whether `key` is the database's: it opens the check value or, in a database sealed
    /// before the check value existed, the first sealed row.
    pub fn opens_with(&self, key: &SealKey) -> bool {
        if let Some(c) = &self.canary {
            return key
                .open(CANARY_AD, c)
                .is_ok_and(|v| v.as_slice() == CANARY_VALUE);
        }
        let first_sealed = self
            .rows
            .iter()
            .find(|(_, s)| matches!(form(s), Form::Sealed(_)));
        first_sealed.is_none_or(|(id, s)| key.open(&row_ad(id), s).is_ok())
    }
}

/// The key for the database at `db`: the file at `key_path` if it is the database's; a new
/// one made there if there is no file and nothing sealed yet; otherwise a refusal.
pub fn unlock(ins: &Inspection, db: &Path, key_path: &Path) -> Result<SealKey, SecretsError> {
    if let Some((id, tag)) = ins.unknown() {
        return Err(SecretsError::UnknownForm {
            id: id.into(),
            tag: tag.into(),
            db: db.to_path_buf(),
        });
    }
    if let Some(state) = db.parent() {
        keyfile::check_outside(key_path, state)?;
    }
    let wrong = || SecretsError::WrongKey {
        path: key_path.to_path_buf(),
        db: db.to_path_buf(),
    };
    match keyfile::read(key_path)? {
        Some(key) if ins.opens_with(&key) => Ok(key),
        Some(_) => Err(wrong()),
        None if ins.holds_sealed() => Err(SecretsError::Missing {
            path: key_path.to_path_buf(),
            db: db.to_path_buf(),
        }),
        None => {
            let key = keyfile::create(key_path)?;
            // Made by another service sharing the path an instant earlier: still checked.
            if !ins.opens_with(&key) {
                return Err(wrong());
            }
            info!(path = %key_path.display(), "made a new secrets key");
            Ok(key)
        }
    }
}

/// Records the check value under `key` if missing and seals every plain row, in one
/// transaction; then truncates the WAL so no plain copy stays there.
pub fn settle(conn: &mut Connection, key: &SealKey, ins: &Inspection) -> Result<(), SecretsError> {
    let path = conn_path(conn);
    let db_err = |source| SecretsError::Db {
        path: path.clone(),
        source,
    };
    let tx = conn.transaction().map_err(db_err)?;
    let run = || -> Result<usize, SecretsError> {
        tx.execute_batch(META_SCHEMA).map_err(db_err)?;
        if ins.canary.is_none() {
            put_canary(&tx, key)?;
        }
        let mut sealed = 0;
        for (id, stored) in &ins.rows {
            if let Form::Plain(plain) = form(stored) {
                tx.execute(
                    "UPDATE workspaces SET secrets = ?2 WHERE id = ?1",
                    params![id, key.seal(&row_ad(id), plain.as_bytes())?],
                )
                .map_err(db_err)?;
                sealed += 1;
            }
        }
        Ok(sealed)
    };
    let sealed = run()?;
    tx.commit().map_err(db_err)?;
    if sealed > 0 {
        // Rows an older version deleted (or replaced) left plain text in free space, which
        // `secure_delete` never saw: rebuilding the file drops it.
        conn.execute_batch("VACUUM").map_err(db_err)?;
        truncate_wal(conn)?;
        info!(
            workspaces = sealed,
            "sealed secrets found in plain text (an older version's, or emptied by `secrets forget`)"
        );
    }
    Ok(())
}

/// The table of the check value (older databases lack it).
pub const META_SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";

/// Writes (or replaces) the check value sealed under `key`.
pub fn put_canary(tx: &rusqlite::Transaction<'_>, key: &SealKey) -> Result<(), SecretsError> {
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        params![CANARY_ROW, key.seal(CANARY_AD, CANARY_VALUE)?],
    )
    .map_err(|source| SecretsError::Db {
        path: conn_path(tx),
        source,
    })?;
    Ok(())
}

/// Moves every WAL frame into the database and empties the WAL (with `secure_delete` on,
/// the pages that held replaced values are zeroed there).
pub fn truncate_wal(conn: &Connection) -> Result<(), SecretsError> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .map_err(|source| SecretsError::Db {
            path: conn_path(conn),
            source,
        })
}

fn conn_path(conn: &Connection) -> std::path::PathBuf {
    conn.path().unwrap_or_default().into()
}

#[cfg(test)]
#[path = "unlock_tests.rs"]
mod tests;
