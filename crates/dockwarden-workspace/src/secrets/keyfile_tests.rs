use std::os::unix::fs::PermissionsExt;

use super::*;

fn message(e: SecretsError) -> String {
    e.to_string()
}

#[test]
fn a_made_key_is_0600_in_a_0700_directory_and_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("etc/dockwarden/secrets.key");
    let made = create(&path).expect("create");
    let meta = std::fs::metadata(&path).expect("stat");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
    let parent = std::fs::metadata(path.parent().expect("parent")).expect("stat");
    assert_eq!(parent.permissions().mode() & 0o777, 0o700);
    let read_back = read(&path).expect("read").expect("present");
    let sealed = made.seal(b"r", b"v").expect("seal");
    assert_eq!(&**read_back.open(b"r", &sealed).expect("same key"), b"v");
}

#[test]
fn a_missing_key_reads_as_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(read(&dir.path().join("none.key")).expect("read").is_none());
}

#[test]
fn a_group_readable_key_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secrets.key");
    create(&path).expect("create");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let err = message(read(&path).expect_err("refused"));
    assert!(
        err.contains("mode 0640") && err.contains("chmod 600"),
        "{err}"
    );
    assert!(err.contains(&path.display().to_string()), "{err}");
}

#[test]
fn a_key_of_the_wrong_size_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secrets.key");
    std::fs::write(&path, [7u8; 31]).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let err = message(read(&path).expect_err("refused"));
    assert!(err.contains("is 31 bytes, not 32"), "{err}");
}

#[test]
fn a_key_in_a_world_writable_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = dir.path().join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let err = message(create(&open.join("secrets.key")).expect_err("refused"));
    assert!(
        err.contains("group or others can write") && err.contains("chmod go-w"),
        "{err}"
    );
    assert!(!open.join("secrets.key").exists(), "no key made there");
}

#[test]
fn a_symlinked_key_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let real = dir.path().join("real.key");
    create(&real).expect("create");
    let link = dir.path().join("link.key");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let err = message(read(&link).expect_err("refused"));
    assert!(err.contains("is a symlink"), "{err}");
}

#[test]
fn create_never_replaces_an_existing_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("secrets.key");
    let first = create(&path).expect("create");
    let again = create(&path).expect("the existing key");
    let sealed = first.seal(b"r", b"v").expect("seal");
    assert!(again.open(b"r", &sealed).is_ok(), "the first key was kept");
}

#[test]
fn a_key_inside_the_state_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let err = check_outside(&state.join("keys/secrets.key"), &state).expect_err("refused");
    assert!(message(err).contains("inside the state directory"));
    // Through a symlink to the state directory, too.
    let alias = dir.path().join("alias");
    std::os::unix::fs::symlink(&state, &alias).expect("symlink");
    assert!(check_outside(&alias.join("secrets.key"), &state).is_err());
    check_outside(&dir.path().join("secrets.key"), &state).expect("beside it is fine");
}
