use std::os::unix::fs::PermissionsExt;

use crate::secrets::seal::PREFIX;
use crate::secrets::testing::*;
use crate::store::Store;

fn refused(s: &State) -> String {
    Store::open_sealed(&s.db, &s.key)
        .map(|_| ())
        .expect_err("refused")
        .to_string()
}

#[test]
fn a_first_start_makes_a_0600_key_and_a_sealed_check_value() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    let mode = std::fs::metadata(&s.key).expect("key").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let meta = dump(&s.db);
    assert_eq!(meta.len(), 1, "{meta:?}");
    assert!(meta[0].1.starts_with(PREFIX), "{meta:?}");
    drop(Store::open_sealed(&s.db, &s.key).expect("the same key opens it again"));
}

#[test]
fn a_legacy_plain_row_is_sealed_in_place_and_no_plain_copy_stays_on_disk() {
    let s = state();
    {
        // As an older version left it: no meta table, secrets as JSON text, WAL mode.
        let conn = raw(&s.db);
        conn.pragma_update(None, "journal_mode", "WAL")
            .expect("wal");
        conn.execute_batch(
            "CREATE TABLE workspaces (id TEXT PRIMARY KEY, status TEXT NOT NULL,
             uid INTEGER NOT NULL UNIQUE, doc TEXT NOT NULL, secrets TEXT NOT NULL);",
        )
        .expect("schema");
    }
    put_row(&s.db, "old", 20001, r#"{"TOKEN":"legacy-marker-5531"}"#);
    put_row(&s.db, "gone", 20002, r#"{"TOKEN":"deleted-marker-7710"}"#);
    raw(&s.db)
        .execute("DELETE FROM workspaces WHERE id = 'gone'", [])
        .expect("delete");
    assert!(on_disk(&s.db, "legacy-marker-5531"));
    assert!(
        on_disk(&s.db, "deleted-marker-7710"),
        "the free space holds the deleted row"
    );
    let store = Store::open_sealed(&s.db, &s.key).expect("open");
    assert_eq!(
        store.secrets("old").expect("secrets")["TOKEN"],
        "legacy-marker-5531"
    );
    let rows = dump(&s.db);
    assert!(rows.iter().all(|(_, v)| v.starts_with(PREFIX)), "{rows:?}");
    assert!(
        !on_disk(&s.db, "legacy-marker-5531"),
        "a plain copy stayed in a database file"
    );
    assert!(
        !on_disk(&s.db, "deleted-marker-7710"),
        "a deleted row's plain text stayed"
    );
}

#[test]
fn another_key_is_refused_naming_it_and_the_rows_are_untouched() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    put_row(&s.db, "w", 20001, &sealed_for(&s.key, "w", r#"{"A":"b"}"#));
    let before = dump(&s.db);
    let bytes = std::fs::read(&s.db).expect("db");
    another_key(&s.key);
    let err = refused(&s);
    assert!(
        err.contains("does not open the secrets") && err.contains(&s.key.display().to_string()),
        "{err}"
    );
    assert_eq!(dump(&s.db), before);
    assert_eq!(
        std::fs::read(&s.db).expect("db"),
        bytes,
        "the database file is unchanged"
    );
}

#[test]
fn a_missing_key_with_sealed_rows_is_refused_and_no_new_key_is_made() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    std::fs::remove_file(&s.key).expect("rm");
    let err = refused(&s);
    assert!(
        err.contains("is missing") && err.contains("secrets forget"),
        "{err}"
    );
    assert!(!s.key.exists(), "no key was made over the lost one");
}

#[test]
fn a_key_readable_by_others_is_refused() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    std::fs::set_permissions(&s.key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let err = refused(&s);
    assert!(err.contains("mode 0644"), "{err}");
}

#[test]
fn a_key_inside_the_state_directory_is_refused() {
    let mut s = state();
    s.key = s.state.join("secrets.key");
    let err = refused(&s);
    assert!(err.contains("inside the state directory"), "{err}");
    assert!(!s.key.exists());
}

#[test]
fn a_row_in_a_form_of_a_later_version_is_refused() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    put_row(&s.db, "w", 20001, "dwseal9:AAAA");
    let err = refused(&s);
    assert!(err.contains("`dwseal9`") && err.contains("`w`"), "{err}");
}

#[test]
fn a_sealed_value_copied_to_another_workspace_does_not_open_there() {
    let s = state();
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    let a = sealed_for(&s.key, "a", r#"{"TOKEN":"for-a"}"#);
    put_row(&s.db, "a", 20001, &a);
    put_row(&s.db, "b", 20002, &a);
    let store = Store::open_sealed(&s.db, &s.key).expect("open");
    assert_eq!(store.secrets("a").expect("a")["TOKEN"], "for-a");
    let err = store.secrets("b").expect_err("moved value").to_string();
    assert!(err.contains("`b`") && err.contains("do not open"), "{err}");
}

#[test]
fn a_key_given_before_the_first_start_is_adopted() {
    let mut s = state();
    s.key = s.dir.path().join("given/secrets.key");
    let given = crate::secrets::keyfile::create(&s.key).expect("create");
    drop(given);
    let store = Store::open_sealed(&s.db, &s.key).expect("open");
    let sealed = store
        .seal_secrets("w", &[("K".to_string(), "v".to_string())].into())
        .expect("seal");
    drop((store, sealed));
    drop(Store::open_sealed(&s.db, &s.key).expect("still the same key"));
}
