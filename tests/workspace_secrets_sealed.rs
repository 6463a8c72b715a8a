//! Secrets sealed at rest, against the real `dockwarden serve`: a copy of the database
//! files shows no secret value, the key keeps them working across restarts, and another key
//! is refused at start with the rows left exactly as they were.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use workspace_support::{BIN, Svc};

const UID_BASE: u32 = 27600;

/// Every secrets row and the meta table, read with SQLite itself.
fn dump(state: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open_with_flags(
        state.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT id, secrets FROM workspaces ORDER BY id",
        "SELECT key, value FROM meta ORDER BY key",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// The bytes of `state.db`, its WAL and its shared-memory index, read like `grep -a`.
fn files_holding(state: &Path, needle: &str) -> Vec<String> {
    ["state.db", "state.db-wal", "state.db-shm"]
        .iter()
        .filter(|name| {
            std::fs::read(state.join(name))
                .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .map(|name| name.to_string())
        .collect()
}

fn exec_sees(svc: &Svc, marker: &str) {
    let out = svc.cli(&["exec", "sealed", "--", "printenv SEALED_TOKEN"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), marker);
}

/// `serve` on the same state with `key`: it must exit by itself (refused), within 20 s.
fn serve_with_key(svc: &Svc, key: &Path) -> (bool, String) {
    let log = svc.dir.path().join("refused.log");
    let mut child = Command::new(BIN)
        .args(["serve", "--socket"])
        .arg(&svc.socket)
        .arg("--state-dir")
        .arg(&svc.state)
        .args([
            "--uid-base",
            &UID_BASE.to_string(),
            "--uid-count",
            "50",
            "--no-docker",
        ])
        .arg("--secrets-key")
        .arg(key)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "serve with another key started: {}",
                std::fs::read_to_string(&log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.success(), std::fs::read_to_string(&log).unwrap())
}

#[test]
fn a_copied_state_db_shows_no_secret_and_another_key_is_refused_with_the_rows_untouched() {
    let mut svc = Svc::start(UID_BASE, &["--no-docker"], &[]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let marker = format!("sealed-marker-{}-{nanos}", std::process::id());
    let created = svc.ok(
        "POST",
        "/v1/workspaces",
        Some(json!({ "id": "sealed", "secrets": { "SEALED_TOKEN": marker } })),
    );
    assert_eq!(
        created["workspace"]["secret_names"],
        json!(["SEALED_TOKEN"])
    );
    exec_sees(&svc, &marker);

    // The key is the service's alone, outside the state directory.
    let mode = std::fs::metadata(&svc.key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "key mode {mode:o}");
    assert!(!svc.key.starts_with(&svc.state));

    // While the service runs (the WAL holds the newest pages) and after it stopped.
    assert_eq!(files_holding(&svc.state, &marker), Vec::<String>::new());
    let rows = dump(&svc.state);
    let row = rows.iter().find(|(id, _)| id == "sealed").unwrap();
    assert!(row.1.starts_with("dwseal1:"), "{row:?}");

    svc.restart(&[]);
    exec_sees(&svc, &marker);
    assert_eq!(files_holding(&svc.state, &marker), Vec::<String>::new());

    // Another key: refused, naming the key, and nothing in the database changes.
    svc.kill9();
    let before = dump(&svc.state);
    let other = svc.dir.path().join("other.key");
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
        .unwrap();
    std::fs::write(&other, random).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (started, err) = serve_with_key(&svc, &other);
    assert!(!started, "serve started with another key: {err}");
    assert!(
        err.contains(&format!(
            "secrets key `{}` does not open the secrets",
            other.display()
        )),
        "clear message: {err}"
    );
    assert_eq!(
        dump(&svc.state),
        before,
        "the rows are byte for byte as they were"
    );

    // A key that is missing now that secrets are sealed: refused too, and none is made.
    let missing = svc.dir.path().join("missing.key");
    let (started, err) = serve_with_key(&svc, &missing);
    assert!(!started, "serve started without its key: {err}");
    assert!(err.contains("is missing"), "{err}");
    assert!(!missing.exists(), "no new key replaced the lost one");
    assert_eq!(dump(&svc.state), before);

    // The right key again: everything works.
    svc.restart(&[]);
    exec_sees(&svc, &marker);
}
