use super::*;
use crate::secrets::testing::*;
use crate::store::Store;

fn started_with_a_row(s: &State) {
    drop(Store::open_sealed(&s.db, &s.key).expect("open"));
    put_row(
        &s.db,
        "w",
        20001,
        &sealed_for(&s.key, "w", r#"{"TOKEN":"rot-marker"}"#),
    );
}

#[test]
fn rotation_reseals_every_row_so_only_the_new_key_opens_them() {
    let s = state();
    started_with_a_row(&s);
    let new = s.dir.path().join("new.key");
    let done = rotate(&s.state, &s.key, &new).expect("rotate");
    assert_eq!((done.workspaces, done.made_key), (1, true));
    let err = Store::open_sealed(&s.db, &s.key)
        .map(|_| ())
        .expect_err("old key refused");
    assert!(err.to_string().contains("does not open"), "{err}");
    let store = Store::open_sealed(&s.db, &new).expect("new key");
    assert_eq!(store.secrets("w").expect("secrets")["TOKEN"], "rot-marker");
}

#[test]
fn rotation_from_a_wrong_key_changes_nothing_and_makes_no_key() {
    let s = state();
    started_with_a_row(&s);
    let before = dump(&s.db);
    let wrong = s.dir.path().join("wrong.key");
    drop(keyfile::create(&wrong).expect("create"));
    let new = s.dir.path().join("new.key");
    let err = rotate(&s.state, &wrong, &new)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("does not open"), "{err}");
    assert_eq!(dump(&s.db), before);
    assert!(!new.exists());
}

#[test]
fn rotation_is_refused_while_a_service_holds_the_state_directory() {
    let s = state();
    started_with_a_row(&s);
    let _held = lock::lock_state_dir(&s.state).expect("lock");
    let err = rotate(&s.state, &s.key, &s.dir.path().join("new.key")).expect_err("refused");
    assert!(err.to_string().contains("in use by another"), "{err}");
}

#[test]
fn forgetting_drops_the_secrets_and_the_next_start_makes_a_new_key() {
    let s = state();
    started_with_a_row(&s);
    std::fs::remove_file(&s.key).expect("key lost");
    assert_eq!(forget(&s.state).expect("forget"), 1);
    let store = Store::open_sealed(&s.db, &s.key).expect("a new key");
    assert!(store.secrets("w").expect("secrets").is_empty());
}
