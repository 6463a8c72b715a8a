//! Key operations on the state of a stopped service (`dockwarden secrets ...`): `rotate`
//! re-seals every row under a new key, `forget` drops every secret when the key is lost.
//! Both hold the state directory's lock, so they never run beside a live `serve`, and
//! change the database in one transaction or not at all.

use std::path::Path;

use rusqlite::{Connection, params};

use super::seal::{Form, form};
use super::unlock::{META_SCHEMA, put_canary, truncate_wal};
use super::{CANARY_ROW, Inspection, SecretsError, keyfile, row_ad};
use crate::error::{WsError, WsResult};
use crate::{lock, store};

/// What a rotation did.
#[derive(Debug)]
pub struct Rotated {
    /// Workspaces whose secrets were re-sealed.
    pub workspaces: usize,
    /// Whether the new key file was made (rather than given).
    pub made_key: bool,
}

fn open_db(state_dir: &Path) -> WsResult<(lock::StateLock, Connection, std::path::PathBuf)> {
    let held = lock::lock_state_dir(state_dir)?;
    let db = state_dir.join("state.db");
    if !db.is_file() {
        return Err(WsError::Invalid(format!(
            "no database at `{}`; give the service's `--state-dir`",
            db.display()
        )));
    }
    let conn = store::connect(&db)?;
    Ok((held, conn, db))
}

fn db_err(db: &Path) -> impl Fn(rusqlite::Error) -> SecretsError + '_ {
    move |source| SecretsError::Db {
        path: db.to_path_buf(),
        source,
    }
}

/// Re-seals every workspace's secrets and the check value under the key at `to` (made
/// there if missing), after checking that `from` is the database's key.
pub fn rotate(state_dir: &Path, from: &Path, to: &Path) -> WsResult<Rotated> {
    let (_held, mut conn, db) = open_db(state_dir)?;
    let ins = Inspection::read(&conn).map_err(db_err(&db))?;
    if std::path::absolute(from).ok() == std::path::absolute(to).ok() {
        return Err(WsError::Invalid(format!(
            "`--to` names `{}`, the file of the old key; give a new path for the new key",
            to.display()
        )));
    }
    let old = keyfile::read(from)?.ok_or_else(|| SecretsError::BadFile {
        path: from.to_path_buf(),
        problem: "does not exist".into(),
    })?;
    if !ins.opens_with(&old) {
        return Err(SecretsError::WrongKey {
            path: from.to_path_buf(),
            db: db.clone(),
        }
        .into());
    }
    keyfile::check_outside(to, state_dir)?;
    let (new, made_key) = match keyfile::read(to)? {
        Some(k) => (k, false),
        None => (keyfile::create(to)?, true),
    };
    let tx = conn.transaction().map_err(db_err(&db))?;
    tx.execute_batch(META_SCHEMA).map_err(db_err(&db))?;
    for (id, stored) in &ins.rows {
        let plain = match form(stored) {
            Form::Sealed(_) => {
                old.open(&row_ad(id), stored)
                    .map_err(|source| SecretsError::Row {
                        id: id.clone(),
                        source,
                    })?
            }
            Form::Plain(p) => zeroize::Zeroizing::new(p.as_bytes().to_vec()),
            Form::Unknown(tag) => {
                return Err(SecretsError::UnknownForm {
                    id: id.clone(),
                    tag: tag.into(),
                    db: db.clone(),
                }
                .into());
            }
        };
        tx.execute(
            "UPDATE workspaces SET secrets = ?2 WHERE id = ?1",
            params![
                id,
                new.seal(&row_ad(id), &plain).map_err(SecretsError::from)?
            ],
        )
        .map_err(db_err(&db))?;
    }
    put_canary(&tx, &new)?;
    tx.commit().map_err(db_err(&db))?;
    truncate_wal(&conn)?;
    Ok(Rotated {
        workspaces: ins.rows.len(),
        made_key,
    })
}

/// Drops every workspace's secrets and the check value, so the next `serve` makes a new key.
/// Workspaces keep everything else; their commands run without the secrets.
pub fn forget(state_dir: &Path) -> WsResult<usize> {
    let (_held, mut conn, db) = open_db(state_dir)?;
    let tx = conn.transaction().map_err(db_err(&db))?;
    tx.execute_batch(META_SCHEMA).map_err(db_err(&db))?;
    // `{}` is the plain form of no secrets: the next start seals it under the new key.
    let n = tx
        .execute("UPDATE workspaces SET secrets = '{}'", [])
        .map_err(db_err(&db))?;
    tx.execute("DELETE FROM meta WHERE key = ?1", [CANARY_ROW])
        .map_err(db_err(&db))?;
    tx.commit().map_err(db_err(&db))?;
    truncate_wal(&conn)?;
    Ok(n)
}

#[cfg(test)]
#[path = "rotate_tests.rs"]
mod tests;
