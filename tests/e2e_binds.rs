//! Bind sources cannot be swapped after the check: every attack order, checked by what the
//! container actually sees. Each test swaps `ws/data` (holding `marker`) for a symlink to `/`
//! by renaming it away, the way the workspace user could, and the container must still list
//! `marker` and never the host's `etc`/`proc`.

mod common;
mod pins_support;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use pins_support::{PinGuard, mounted as pins_mounted, pins_left};

/// A proxy whose workspace has `data/marker`, with its pin directory.
struct Ws {
    _guard: PinGuard,
    p: Proxy,
    data: PathBuf,
    pins: PathBuf,
}

fn setup(e: &Engine, extra: &[&str]) -> Ws {
    let dir = tempfile::Builder::new()
        .prefix("dwbind")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("data")).expect("mkdir");
    std::fs::write(ws.join("data/marker"), b"checked").expect("marker");
    let pins = root.join("pins");
    let mut args = vec!["--pin-dir", pins.to_str().expect("utf8")];
    args.extend_from_slice(extra);
    let p = Proxy::start_in_on(e, dir, ws.clone(), &args);
    Ws {
        _guard: PinGuard {
            pins: pins.clone(),
            host: e.host(),
        },
        p,
        data: ws.join("data"),
        pins,
    }
}

/// The attack: keep the checked directory around under another name, put a symlink to `/`
/// in its place.
fn swap_to_root(data: &Path) {
    std::fs::rename(data, data.with_extension("orig")).expect("mv data data.orig");
    std::os::unix::fs::symlink("/", data).expect("ln -s / data");
}

#[track_caller]
fn assert_sees_checked_dir(listing: &str) {
    let names: Vec<&str> = listing.split_whitespace().collect();
    assert!(
        names.contains(&"marker"),
        "the container must see the checked directory, got {names:?}"
    );
    for host in ["etc", "proc", "usr", "bin"] {
        assert!(
            !names.contains(&host),
            "the container sees the host's `/` ({host}): {names:?}"
        );
    }
}

/// Removes the container through the proxy and checks its pins are gone (no leaked mounts).
fn remove_and_check_released(w: &Ws, id: &str) {
    ok(w.p.docker(&["rm", "-f", id]));
    wait_until(Duration::from_secs(15), "the pins are released", || {
        pins_left(&w.pins) == 0
    });
}

fn bind(w: &Ws) -> String {
    format!("{}:/d", w.data.display())
}

fn rejects_bind_source_swapped_to_symlink_before_create(e: &Engine) {
    let w = setup(e, &[]);
    swap_to_root(&w.data);
    let name = unique("swap-before");
    let out = w.p.docker(&[
        "run",
        "--rm",
        "--name",
        &name,
        "-v",
        &bind(&w),
        IMAGE,
        "ls",
        "/d",
    ]);
    assert!(
        !out.status.success(),
        "a bind through a symlink must be refused: {}",
        stdout(&out)
    );
    assert!(stderr(&out).contains("dockwarden"), "{}", stderr(&out));
    assert!(
        !e.daemon(&["inspect", &name]).status.success(),
        "no container may exist"
    );
    assert_eq!(pins_left(&w.pins), 0, "a refused request releases its pins");
}

fn bind_source_swapped_after_create_still_mounts_the_checked_dir(e: &Engine) {
    let w = setup(e, &[]);
    let id =
        ok(w.p.docker(&["create", "-v", &bind(&w), IMAGE, "sleep", "300"]));
    swap_to_root(&w.data);
    ok(w.p.docker(&["start", &id]));
    assert_sees_checked_dir(&ok(e.daemon(&["exec", &id, "ls", "/d"])));
    let src = e.inspect(&id)["Mounts"][0]["Source"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        src.starts_with(&w.pins.display().to_string()),
        "inspect shows the pin, got `{src}`"
    );
    remove_and_check_released(&w, &id);
}

fn bind_source_swapped_while_running_then_restart_still_mounts_the_checked_dir(e: &Engine) {
    let w = setup(e, &[]);
    let id =
        ok(w.p.docker(&["run", "-d", "-v", &bind(&w), IMAGE, "sleep", "300"]));
    swap_to_root(&w.data);
    ok(w.p.docker(&["restart", "-t", "0", &id]));
    assert_sees_checked_dir(&ok(e.daemon(&["exec", &id, "ls", "/d"])));
    remove_and_check_released(&w, &id);
}

fn file_bind_swapped_to_symlink_then_restart_still_mounts_the_checked_file(e: &Engine) {
    let w = setup(e, &[]);
    let file = w.data.join("marker");
    let id = ok(w.p.docker(&[
        "run",
        "-d",
        "-v",
        &format!("{}:/f", file.display()),
        IMAGE,
        "sleep",
        "300",
    ]));
    std::fs::rename(&file, w.data.join("marker.orig")).expect("mv");
    std::os::unix::fs::symlink("/etc/passwd", &file).expect("ln -s");
    ok(w.p.docker(&["restart", "-t", "0", &id]));
    assert_eq!(ok(e.daemon(&["exec", &id, "cat", "/f"])), "checked");
    remove_and_check_released(&w, &id);
}

fn bind_source_swapped_with_restart_always_and_daemon_restart_still_mounts_the_checked_dir(
    e: &Engine,
) {
    let mut d = PrivateDaemon::start_on(e, "binds");
    let dir = tempfile::Builder::new()
        .prefix("dwbind")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    let data = ws.join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("marker"), b"checked").expect("marker");
    let pins = root.join("pins");
    let _guard = PinGuard {
        pins: pins.clone(),
        host: d.host(),
    };
    let p = Proxy::start_in_on(
        &d.engine(),
        dir,
        ws,
        &["--pin-dir", pins.to_str().expect("utf8")],
    );
    let id = ok(p.docker(&[
        "run",
        "-d",
        "--restart",
        "always",
        "-v",
        &format!("{}:/d", data.display()),
        IMAGE,
        "sleep",
        "300",
    ]));
    swap_to_root(&data);
    d.restart();
    wait_until(
        Duration::from_secs(60),
        "the container is running again",
        || stdout(&d.cli(&["inspect", "-f", "{{.State.Running}}", &id])) == "true",
    );
    assert_sees_checked_dir(&ok(d.cli(&["exec", &id, "ls", "/d"])));
    ok(p.docker(&["rm", "-f", &id]));
    wait_until(Duration::from_secs(30), "the pins are released", || {
        pins_left(&pins) == 0
    });
}

fn pins_survive_a_proxy_restart_and_orphans_are_released_at_start(e: &Engine) {
    let w = setup(e, &[]);
    let keep =
        ok(w.p.docker(&["run", "-d", "-v", &bind(&w), IMAGE, "sleep", "300"]));
    let gone =
        ok(w.p.docker(&["run", "-d", "-v", &bind(&w), IMAGE, "sleep", "300"]));
    assert_eq!(pins_mounted(&w.pins).len(), 2);
    let Ws {
        _guard,
        p: mut first,
        data,
        pins,
    } = w;
    let workspace = first.workspace.clone();
    // Kill the proxy but keep its temp directory (the workspace lives there).
    let _ = first.child.kill();
    let _ = first.child.wait();
    // While the proxy is down: one container is removed behind its back, the source swapped.
    e.force_remove(&gone);
    swap_to_root(&data);
    let dir = tempfile::Builder::new()
        .prefix("dwbind2")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let p = Proxy::start_in_on(
        e,
        dir,
        workspace,
        &["--pin-dir", pins.to_str().expect("utf8")],
    );
    wait_until(
        Duration::from_secs(15),
        "the orphaned pin is released",
        || pins_left(&pins) == 2,
    );
    ok(p.docker(&["restart", "-t", "0", &keep]));
    assert_sees_checked_dir(&ok(e.daemon(&["exec", &keep, "ls", "/d"])));
    ok(p.docker(&["rm", "-f", &keep]));
    wait_until(Duration::from_secs(15), "the pins are released", || {
        pins_left(&pins) == 0
    });
}

fn racing_swaps_during_create_never_mount_anything_but_the_checked_dir(e: &Engine) {
    let w = setup(e, &[]);
    let data = w.data.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    // The attacker flips `data` between the real directory and a symlink to `/` as fast as it can.
    let flipper = std::thread::spawn(move || {
        let real = data.with_extension("real");
        let evil = data.with_extension("evil");
        std::fs::rename(&data, &real).expect("mv");
        std::os::unix::fs::symlink("/", &evil).expect("ln");
        // Each rename atomically makes `data` the checked directory, the symlink, or nothing.
        let hold = || std::thread::sleep(Duration::from_micros(500));
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::rename(&real, &data)
                .map(|()| hold())
                .and_then(|()| std::fs::rename(&data, &real));
            let _ = std::fs::rename(&evil, &data)
                .map(|()| hold())
                .and_then(|()| std::fs::rename(&data, &evil));
        }
    });
    let mut allowed = 0;
    for _ in 0..10 {
        let out =
            w.p.docker(&["run", "--rm", "-v", &bind(&w), IMAGE, "ls", "/d"]);
        if out.status.success() {
            allowed += 1;
            assert_sees_checked_dir(&stdout(&out));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = flipper.join();
    eprintln!("{allowed} of 10 creates were allowed; each saw only the checked directory");
    assert!(
        allowed > 0,
        "no create ran while the directory was in place; the race was not exercised"
    );
    wait_until(Duration::from_secs(15), "the pins are released", || {
        pins_left(&w.pins) == 0
    });
}

fn mount_api_bind_swapped_after_create_still_mounts_the_checked_dir(e: &Engine) {
    let w = setup(e, &[]);
    let spec = format!("type=bind,src={},dst=/d", w.data.display());
    let id =
        ok(w.p.docker(&["create", "--mount", &spec, IMAGE, "sleep", "300"]));
    swap_to_root(&w.data);
    ok(w.p.docker(&["start", &id]));
    assert_sees_checked_dir(&ok(e.daemon(&["exec", &id, "ls", "/d"])));
    remove_and_check_released(&w, &id);
}

fn pins_of_a_proxy_that_is_gone_are_released_by_the_next_proxy(e: &Engine) {
    let dir = tempfile::Builder::new()
        .prefix("dwbind")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("data")).expect("mkdir");
    let (a, b) = (root.join("pins/a"), root.join("pins/b"));
    let _guard_a = PinGuard {
        pins: a.clone(),
        host: e.host(),
    };
    let _guard_b = PinGuard {
        pins: b.clone(),
        host: e.host(),
    };
    let mut first = Proxy::start_in_on(
        e,
        dir,
        ws.clone(),
        &["--pin-dir", a.to_str().expect("utf8")],
    );
    let id = ok(first.docker(&[
        "run",
        "-d",
        "-v",
        &format!("{}:/d", ws.join("data").display()),
        IMAGE,
        "sleep",
        "300",
    ]));
    assert_eq!(pins_mounted(&a).len(), 1);
    // The first proxy dies for good; its container is removed behind its back.
    let _ = first.child.kill();
    let _ = first.child.wait();
    e.force_remove(&id);
    let other = tempfile::Builder::new()
        .prefix("dwbind2")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let _second = Proxy::start_in_on(e, other, ws, &["--pin-dir", b.to_str().expect("utf8")]);
    wait_until(
        Duration::from_secs(15),
        "the gone proxy's pin is released",
        || pins_left(&a) == 0,
    );
    wait_until(
        Duration::from_secs(5),
        "its directory and lock are removed",
        || !a.exists() && !root.join("pins/a.lock").exists(),
    );
}

/// A container created through the proxy stores pin paths as its bind sources; joining its
/// namespaces re-checks that stored HostConfig lexically, so the pin directory must count as
/// inside there (`policy/container/binds.rs`, `judge_source`, `Mode::Stored`: accept sources
/// beneath `facts.env.pin_dir`).
fn a_container_with_pinned_binds_can_be_joined(e: &Engine) {
    let w = setup(e, &[]);
    let a =
        ok(w.p.docker(&["run", "-d", "-v", &bind(&w), IMAGE, "sleep", "300"]));
    ok(w.p.docker(&[
        "run",
        "--rm",
        "--network",
        &format!("container:{a}"),
        IMAGE,
        "true",
    ]));
    remove_and_check_released(&w, &a);
}

fn a_second_proxy_cannot_share_a_live_proxys_pin_directory(e: &Engine) {
    let w = setup(e, &[]);
    let other = tempfile::Builder::new()
        .prefix("dwbind2")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let out = run_with_timeout(
        std::process::Command::new(env!("CARGO_BIN_EXE_dockwarden"))
            .args(["proxy", "--listen"])
            .arg(other.path().join("s.sock"))
            .arg("--workspace")
            .arg(&w.p.workspace)
            .arg("--pin-dir")
            .arg(&w.pins),
        None,
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("in use by another dockwarden proxy"),
        "{}",
        stderr(&out)
    );
    assert!(
        !other.path().join("s.sock").exists(),
        "the refused proxy leaves no socket behind"
    );
}

per_engine!(
    rejects_bind_source_swapped_to_symlink_before_create,
    bind_source_swapped_after_create_still_mounts_the_checked_dir,
    bind_source_swapped_while_running_then_restart_still_mounts_the_checked_dir,
    file_bind_swapped_to_symlink_then_restart_still_mounts_the_checked_file,
    bind_source_swapped_with_restart_always_and_daemon_restart_still_mounts_the_checked_dir,
    pins_survive_a_proxy_restart_and_orphans_are_released_at_start,
    racing_swaps_during_create_never_mount_anything_but_the_checked_dir,
    mount_api_bind_swapped_after_create_still_mounts_the_checked_dir,
    pins_of_a_proxy_that_is_gone_are_released_by_the_next_proxy,
    a_container_with_pinned_binds_can_be_joined,
    a_second_proxy_cannot_share_a_live_proxys_pin_directory,
);
