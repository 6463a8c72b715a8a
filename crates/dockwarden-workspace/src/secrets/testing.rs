//! Helpers of the secrets tests: a state directory with its key beside it, raw rows.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{SealKey, keyfile, row_ad};

pub struct State {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
    pub db: PathBuf,
    pub key: PathBuf,
}

pub fn state() -> State {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    State {
        db: state.join("state.db"),
        key: dir.path().join("secrets.key"),
        state,
        dir,
    }
}

pub fn raw(db: &Path) -> Connection {
    Connection::open(db).expect("open")
}

/// A workspace row as `insert_ws` writes it, with `secrets` stored as given.
pub fn put_row(db: &Path, id: &str, uid: u32, secrets: &str) {
    raw(db)
        .execute(
            "INSERT INTO workspaces (id, status, uid, doc, secrets) VALUES (?1, 'ready', ?2, '{}', ?3)",
            rusqlite::params![id, uid, secrets],
        )
        .expect("insert");
}

/// `secrets` sealed for `id` under the key file at `key`.
pub fn sealed_for(key: &Path, id: &str, secrets: &str) -> String {
    let key = keyfile::read(key).expect("read").expect("present");
    key.seal(&row_ad(id), secrets.as_bytes()).expect("seal")
}

/// Every secrets row and the meta table, for before/after comparisons.
pub fn dump(db: &Path) -> Vec<(String, String)> {
    let conn = raw(db);
    let mut out = Vec::new();
    for sql in [
        "SELECT id, secrets FROM workspaces ORDER BY id",
        "SELECT key, value FROM meta ORDER BY key",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query");
        out.extend(rows.map(|r| r.expect("row")));
    }
    out
}

/// Whether any of the database's files holds `needle`.
pub fn on_disk(db: &Path, needle: &str) -> bool {
    ["", "-wal", "-shm"].iter().any(|suffix| {
        let path = PathBuf::from(format!("{}{suffix}", db.display()));
        std::fs::read(path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    })
}

pub fn another_key(path: &Path) {
    std::fs::remove_file(path).expect("rm");
    let k: SealKey = keyfile::create(path).expect("create");
    drop(k);
}
