//! Issue 12's escapes, end to end on both engines: each test is an attack that worked before
//! (or a client that must keep working), run through the real proxy against the real daemon,
//! with the daemon's own view as the oracle.

mod common;
mod escapes_support;

use std::time::Duration;

use common::{IMAGE, engines_or_skip, unique};
use dockwarden::sys::mountinfo;
use escapes_support::{Cleanup, request};

/// `{"Image":…, "NetworkMode":"<id of host>"}` with no `HostConfig`, or with `"HostConfig":
/// null`: engines before 27 read the top-level field and join the host network object. A
/// bridge made outside the proxy with a forbidden option is refused the same way; the default
/// bridge named at the top level still works.
#[test]
fn top_level_network_mode_naming_the_host_network_or_a_foreign_bridge_is_refused() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        let host_id = e.ok(&["network", "inspect", "-f", "{{.Id}}", "host"]);
        let lanbr = unique("lanbr");
        e.ok(&[
            "network",
            "create",
            "-o",
            "com.docker.network.bridge.enable_icc=false",
            &lanbr,
        ]);
        c.networks.push(lanbr.clone());
        for version in ["v1.41", "v1.44"] {
            if e.name == "20.10" && version == "v1.44" {
                continue; // 20.10 speaks API 1.41 at most
            }
            for target in [host_id.as_str(), &host_id[..12], lanbr.as_str()] {
                for hc in ["", r#","HostConfig":null"#] {
                    let name = unique("toplevel");
                    c.containers.push(name.clone());
                    let body = format!(r#"{{"Image":"{IMAGE}","NetworkMode":"{target}"{hc}}}"#);
                    let (s, t) = request(
                        &p,
                        "POST",
                        &format!("/{version}/containers/create?name={name}"),
                        Some(&body),
                    );
                    assert_eq!(s, 403, "engine {}: {body}: {t}", e.name);
                    assert!(
                        t.contains("(rule network.connect)"),
                        "engine {}: {body}: {t}",
                        e.name
                    );
                    assert!(
                        !e.exists(&name),
                        "engine {}: {body} created a container",
                        e.name
                    );
                }
            }
        }
        let name = unique("toplevel-ok");
        c.containers.push(name.clone());
        let body = format!(r#"{{"Image":"{IMAGE}","NetworkMode":"bridge","HostConfig":null}}"#);
        let (s, t) = request(
            &p,
            "POST",
            &format!("/v1.41/containers/create?name={name}"),
            Some(&body),
        );
        assert_eq!(s, 201, "engine {}: {t}", e.name);
        assert_eq!(
            e.inspect(&name)["HostConfig"]["NetworkMode"],
            "bridge",
            "engine {}",
            e.name
        );
        eprintln!(
            "engine {}: top-level NetworkMode host/foreign bridge refused, default bridge allowed",
            e.name
        );
    }
}

/// Every verb that reaches into a container, through the proxy: `(what, raw request)`.
fn reaching_requests(id: &str, exec: &str) -> Vec<(&'static str, String)> {
    let json = |m: &str, p: String, b: &str| {
        format!(
            "{m} {p} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        )
    };
    let bare = |m: &str, p: String| {
        format!(
            "{m} {p} HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    };
    vec![
        (
            "exec create",
            json(
                "POST",
                format!("/v1.41/containers/{id}/exec"),
                r#"{"Cmd":["cat","/host/secret"],"AttachStdout":true}"#,
            ),
        ),
        (
            "exec start",
            json(
                "POST",
                format!("/v1.41/exec/{exec}/start"),
                r#"{"Detach":true}"#,
            ),
        ),
        ("attach", escapes_support::attach_request(id)),
        ("attach/ws", escapes_support::attach_ws_request(id)),
        (
            "archive GET",
            bare(
                "GET",
                format!("/v1.41/containers/{id}/archive?path=/host/secret"),
            ),
        ),
        (
            "archive HEAD",
            bare(
                "HEAD",
                format!("/v1.41/containers/{id}/archive?path=/host/secret"),
            ),
        ),
        (
            "archive PUT",
            bare("PUT", format!("/v1.41/containers/{id}/archive?path=/host")),
        ),
        (
            "export",
            bare("GET", format!("/v1.41/containers/{id}/export")),
        ),
        (
            "commit",
            json(
                "POST",
                format!("/v1.41/commit?container={id}&repo=dwt-stolen"),
                "{}",
            ),
        ),
        (
            "update",
            json(
                "POST",
                format!("/v1.41/containers/{id}/update"),
                r#"{"CpuShares":512}"#,
            ),
        ),
        (
            "rename",
            bare(
                "POST",
                format!("/v1.41/containers/{id}/rename?name={id}-mine"),
            ),
        ),
    ]
}

/// Creates an exec instance straight on the daemon; returns its ID.
fn daemon_exec(e: &common::Engine, id: &str) -> String {
    let body = r#"{"Cmd":["true"]}"#;
    let req = format!(
        "POST /v1.41/containers/{id}/exec HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let resp = common::raw(&e.socket, req.as_bytes());
    let json = resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
    let start = json.find('{').unwrap_or(0);
    let v: serde_json::Value =
        serde_json::from_str(json[start..].lines().next().unwrap_or("")).unwrap_or_default();
    v["Id"]
        .as_str()
        .unwrap_or_else(|| panic!("engine {}: exec create on the daemon: {resp}", e.name))
        .to_owned()
}

/// A container with CAP_SYS_ADMIN in the host's PID namespace and a host bind, made straight on the daemon (an operator's
/// sidecar, another tenant's), is refused for every verb that reaches into it: exec create and
/// start, attach, websocket attach, archive GET/HEAD/PUT, export, commit, update and rename.
/// The host file behind its bind is never read or written.
#[test]
fn exec_attach_and_archives_into_a_host_namespace_container_made_on_the_daemon_are_refused() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        let host = tempfile::tempdir().expect("host dir");
        std::fs::write(host.path().join("secret"), b"host secret").expect("secret");
        let name = unique("foreign");
        c.containers.push(name.clone());
        let bind = format!("{}:/host", host.path().display());
        // `--privileged` cannot start on 20.10 in this sandbox (runc cannot apply every
        // capability); CAP_SYS_ADMIN in the host's PID namespace is the same escape.
        e.ok(&[
            "run",
            "-d",
            "--name",
            &name,
            "--cap-add",
            "SYS_ADMIN",
            "--pid",
            "host",
            "-v",
            &bind,
            IMAGE,
            "sleep",
            "300",
        ]);
        let exec = daemon_exec(&e, &name);
        for (what, req) in reaching_requests(&name, &exec) {
            let resp = if what.starts_with("attach") {
                common::head(&p.socket, req.as_bytes())
            } else {
                p.raw(req.as_bytes())
            };
            assert_eq!(
                common::status(&resp),
                403,
                "engine {}: {what}: {resp}",
                e.name
            );
            if what != "archive HEAD" {
                assert!(
                    resp.contains("(rule container.foreign)"),
                    "engine {}: {what}: {resp}",
                    e.name
                );
            }
        }
        // And with the real CLI.
        let out = p.docker(&["exec", &name, "cat", "/host/secret"]);
        assert!(
            common::stderr(&out).contains("(rule container.foreign)"),
            "engine {}: {}",
            e.name,
            common::stderr(&out)
        );
        let out = p.docker(&["cp", &format!("{name}:/host/secret"), "-"]);
        assert!(
            !out.status.success() && !common::stdout(&out).contains("host secret"),
            "engine {}: docker cp read the host file",
            e.name
        );
        assert_eq!(
            std::fs::read(host.path().join("secret")).expect("secret"),
            b"host secret"
        );
        assert_eq!(
            std::fs::read_dir(host.path()).expect("ls").count(),
            1,
            "engine {}: something was written into the host dir",
            e.name
        );
        assert!(e.exists(&name), "engine {}: renamed", e.name);
        assert!(
            !e.daemon(&["image", "inspect", "dwt-stolen"])
                .status
                .success(),
            "engine {}: committed",
            e.name
        );
        eprintln!(
            "engine {}: 11 verbs into a foreign CAP_SYS_ADMIN/host-pid container refused",
            e.name
        );
    }
}

/// A container made through the proxy keeps working for every one of those verbs.
#[test]
fn exec_attach_archives_export_commit_update_and_rename_work_on_the_proxys_own_container() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        let name = unique("own");
        c.containers.push(name.clone());
        c.containers.push(format!("{name}-mine"));
        common::ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
        assert_eq!(
            common::ok(p.docker(&["exec", &name, "echo", "in"])),
            "in",
            "engine {}",
            e.name
        );
        let local = p.workspace.join("f.txt");
        std::fs::write(&local, b"copied").expect("write");
        common::ok(p.docker(&[
            "cp",
            local.to_str().expect("utf8"),
            &format!("{name}:/tmp/f.txt"),
        ]));
        assert_eq!(
            common::ok(p.docker(&["exec", &name, "cat", "/tmp/f.txt"])),
            "copied",
            "engine {}",
            e.name
        );
        let back = p.workspace.join("back.txt");
        common::ok(p.docker(&[
            "cp",
            &format!("{name}:/tmp/f.txt"),
            back.to_str().expect("utf8"),
        ]));
        assert_eq!(std::fs::read(&back).expect("read"), b"copied");
        let exec = daemon_exec(&e, &name);
        let tag = format!("dwt-own-commit:{}", std::process::id());
        for (what, req) in reaching_requests(&name, &exec) {
            let req = req.replace("dwt-stolen", &tag.replace(':', "&tag="));
            let resp = if what.starts_with("attach") {
                common::head(&p.socket, req.as_bytes())
            } else {
                p.raw(req.as_bytes())
            };
            let s = common::status(&resp);
            let want: &[u16] = match what {
                "attach" | "attach/ws" => &[101],
                "exec create" | "commit" => &[201],
                "archive GET" | "archive HEAD" => &[404], // no /host in this container: the daemon's own answer
                "archive PUT" => &[400, 404, 500], // no body, no /host: the daemon refuses it, not the proxy
                _ => &[200, 204],
            };
            assert!(
                want.contains(&s),
                "engine {}: {what}: got {s}: {resp}",
                e.name
            );
            assert!(
                !resp.contains("container.foreign"),
                "engine {}: {what}: {resp}",
                e.name
            );
        }
        let _ = e.daemon(&["rmi", &tag]);
        assert!(
            e.exists(&format!("{name}-mine")),
            "engine {}: rename did not happen",
            e.name
        );
        eprintln!(
            "engine {}: the proxy's own container served all 11 verbs",
            e.name
        );
    }
}

/// The workspace user of the chown tests.
const OWNER: u32 = 12345;

/// A tar stream with `suid` (root, 04755) and `sgid` (gid 0, 02755), made by the tar CLI.
fn setuid_tar() -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().expect("tempdir");
    for (name, mode) in [("suid", 0o4755), ("sgid", 0o2755)] {
        let p = t.path().join(name);
        std::fs::write(&p, b"#!/bin/sh\nid -u\n").expect("write");
        std::os::unix::fs::chown(&p, Some(0), Some(0)).expect("chown");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let out = std::process::Command::new("tar")
        .args(["-cf", "-", "--numeric-owner", "-C"])
        .arg(t.path())
        .args(["suid", "sgid"])
        .output()
        .expect("tar");
    assert!(
        out.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `(uid, mode & 07777)` of a file, once the proxy has handed it back, or what it is after a
/// generous wait (chown-back runs in the proxy's worker right after the request).
fn handed_back(path: &std::path::Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let read = || {
        std::fs::symlink_metadata(path)
            .map(|m| (m.uid(), m.mode() & 0o7777))
            .unwrap_or((u32::MAX, 0))
    };
    common::poll_until(std::time::Duration::from_secs(30), || {
        let (uid, mode) = read();
        uid == OWNER && mode & 0o6000 == 0
    });
    read()
}

/// `PUT archive` of a tar entry owned by root with mode 04755 into a created, never started
/// container whose `/data` is a pinned workspace bind: the file would stay a root-owned
/// setuid binary in the workspace until the container is removed (no stop event comes). The
/// proxy hands the bind back as soon as the request ends: the workspace user owns it and the
/// setuid/setgid bits are gone.
#[test]
fn setuid_root_file_put_by_archive_into_a_never_started_container_is_handed_back() {
    let tar = setuid_tar();
    for e in engines_or_skip() {
        let p = e.proxy_owned(Some(OWNER), &[]);
        let mut c = Cleanup::new(&e);
        let name = unique("suidput");
        c.containers.push(name.clone());
        let bind = format!("{}:/data", p.workspace.join("data").display());
        common::ok(p.docker(&["create", "--name", &name, "-v", &bind, IMAGE, "true"]));
        let mut req = format!(
            "PUT /v1.41/containers/{name}/archive?path=/data&copyUIDGID=1 HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            tar.len()
        )
        .into_bytes();
        req.extend_from_slice(&tar);
        let resp = p.raw(&req);
        assert_eq!(common::status(&resp), 200, "engine {}: {resp}", e.name);
        assert_eq!(
            e.inspect(&name)["State"]["Status"],
            "created",
            "engine {}",
            e.name
        );
        for f in ["suid", "sgid"] {
            let (uid, mode) = handed_back(&p.workspace.join("data").join(f));
            assert_eq!(
                uid, OWNER,
                "engine {}: {f} still belongs to uid {uid}",
                e.name
            );
            assert_eq!(
                mode & 0o6000,
                0,
                "engine {}: {f} keeps mode {mode:o}",
                e.name
            );
        }
        assert!(
            p.log().contains("reason=\"archive put\"") || p.log().contains("archive put"),
            "engine {}: {}",
            e.name,
            p.log()
        );
        eprintln!(
            "engine {}: setuid-root file put by archive handed back: owner {OWNER}, no setuid/setgid",
            e.name
        );
    }
}

/// The options of the mount at `target` in a container's mount namespace.
fn mount_options(pid: u64, target: &str) -> String {
    let mounts = mountinfo::of(u32::try_from(pid).expect("a pid")).expect("mountinfo");
    mounts
        .iter()
        .find(|m| m.point == std::path::Path::new(target))
        .unwrap_or_else(|| panic!("no mount at {target}"))
        .options
        .clone()
}

/// Pins are mounted `nosuid,nodev`, and the daemon's mount of the pin in the container keeps
/// both, for `-v` and `--mount` binds: a setuid-root file or a device node in the bind
/// grants nothing through it. (`:ro` binds: runc re-mounts them read-only and, in runc
/// 1.1.5 under Engine 20.10, drops the two flags; measured and reported, see docs/binds.md.)
#[test]
fn pinned_binds_are_nosuid_and_nodev_inside_the_container() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        std::fs::create_dir_all(p.workspace.join("ro")).expect("mkdir");
        let name = unique("nosuid");
        c.containers.push(name.clone());
        let data = p.workspace.join("data").display().to_string();
        let ro = p.workspace.join("ro").display().to_string();
        let mount = format!("type=bind,src={data},dst=/m");
        common::ok(p.docker(&[
            "run",
            "-d",
            "--name",
            &name,
            "-v",
            &format!("{data}:/data"),
            "-v",
            &format!("{ro}:/ro:ro"),
            "--mount",
            &mount,
            IMAGE,
            "sleep",
            "300",
        ]));
        let pid = e.inspect(&name)["State"]["Pid"].as_u64().expect("pid");
        for target in ["/data", "/m"] {
            let opts = mount_options(pid, target);
            let words: Vec<&str> = opts.split(',').collect();
            assert!(
                words.contains(&"nosuid") && words.contains(&"nodev"),
                "engine {}: {target} mounted {opts}",
                e.name
            );
        }
        let ro_opts = mount_options(pid, "/ro");
        assert!(
            ro_opts.split(',').any(|w| w == "ro"),
            "engine {}: /ro mounted {ro_opts}",
            e.name
        );
        eprintln!(
            "engine {}: /data and /m nosuid,nodev; the :ro bind is mounted {ro_opts}",
            e.name
        );
    }
}

/// `--volumes-from` a container made on the daemon that passes the stored check, but mounts
/// a local volume with `type=none,o=bind,device=<host dir>`: the host directory would come in
/// unchecked. Refused by the volume rules, like a direct mount of that volume; a target with
/// a plain volume can still be used.
#[test]
fn volumes_from_a_container_whose_named_volume_binds_a_host_dir_is_refused() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        let host = tempfile::tempdir().expect("host dir");
        std::fs::write(host.path().join("secret"), b"host secret").expect("secret");
        let (vol, plain, target, clean, joiner) = (
            unique("bindvol"),
            unique("plainvol"),
            unique("vtarget"),
            unique("vclean"),
            unique("joiner"),
        );
        c.containers
            .extend([joiner.clone(), target.clone(), clean.clone()]);
        let device = format!("device={}", host.path().display());
        e.ok(&[
            "volume",
            "create",
            "-o",
            "type=none",
            "-o",
            "o=bind",
            "-o",
            &device,
            &vol,
        ]);
        e.ok(&["volume", "create", &plain]);
        // `--cgroupns private`: on cgroup v1 the daemon's default is the host's, which the
        // stored check refuses on its own.
        e.ok(&[
            "create",
            "--name",
            &target,
            "--cgroupns",
            "private",
            "-v",
            &format!("{vol}:/v"),
            IMAGE,
            "true",
        ]);
        e.ok(&[
            "create",
            "--name",
            &clean,
            "--cgroupns",
            "private",
            "-v",
            &format!("{plain}:/v"),
            IMAGE,
            "true",
        ]);
        for how in [target.clone(), format!("{target}:ro")] {
            let out = p.docker(&[
                "create",
                "--name",
                &joiner,
                "--volumes-from",
                &how,
                IMAGE,
                "cat",
                "/v/secret",
            ]);
            assert!(
                common::stderr(&out).contains("(rule container.volume.options)"),
                "engine {}: {how}: {}",
                e.name,
                common::stderr(&out)
            );
            assert!(!e.exists(&joiner), "engine {}: created", e.name);
        }
        common::ok(p.docker(&[
            "create",
            "--name",
            &joiner,
            "--volumes-from",
            &clean,
            IMAGE,
            "true",
        ]));
        drop(c);
        for v in [&vol, &plain] {
            let _ = e.daemon(&["volume", "rm", v]);
        }
        eprintln!(
            "engine {}: --volumes-from bringing in a host-bind volume refused, a plain volume allowed",
            e.name
        );
    }
}

/// `POST /containers/{name}/exec` through the proxy (raw): `(status, body)`.
fn exec_by_name(p: &common::Proxy, name: &str) -> (u16, String) {
    request(
        p,
        "POST",
        &format!("/v1.41/containers/{name}/exec"),
        Some(r#"{"Cmd":["true"]}"#),
    )
}

/// An exec by `name` right after the daemon moved the name to a foreign container. Until the
/// rename events reach the proxy, its cached fact still names the container it judged, and the
/// exec is forwarded to that container's full id (`Permitted::pinned_path`): created there, in
/// `own`, never in the container that took the name. Once the events arrive it is refused.
/// Polls until the refusal (at most 10 s) and returns its body; every earlier answer must be
/// an exec in `own`.
fn exec_after_swap_never_reaches_the_foreign_container(
    e: &common::Engine,
    p: &common::Proxy,
    name: &str,
    own: &str,
) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (st, body) = exec_by_name(p, name);
        match st {
            403 => return body,
            201 => {
                let v: serde_json::Value = serde_json::from_str(&body).expect("exec json");
                let id = v["Id"].as_str().expect("exec id");
                let (st, ins) = request(p, "GET", &format!("/v1.41/exec/{id}/json"), None);
                assert_eq!(st, 200, "engine {}: exec inspect: {ins}", e.name);
                let ins: serde_json::Value = serde_json::from_str(&ins).expect("inspect json");
                assert_eq!(
                    ins["ContainerID"].as_str(),
                    Some(own),
                    "engine {}: an exec by the swapped name was created in another container",
                    e.name
                );
                eprintln!(
                    "engine {}: exec by the swapped name inside the event window: pinned to the container judged",
                    e.name
                );
            }
            _ => panic!("engine {}: exec by the swapped name: {st} {body}", e.name),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "engine {}: the rename events never invalidated the cached name",
            e.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The proxy caches what a container reference resolves to while it follows the daemon's
/// events. Its own container is exec'd by name (the fact is cached); then, on the daemon
/// directly, it is renamed away and a foreign CAP_SYS_ADMIN container is renamed to its name.
/// An exec by that name must now be judged on the foreign container once the rename events
/// invalidate the cached name, and before they do it still lands only in the container judged.
#[test]
fn foreign_container_renamed_to_a_cached_name_is_refused_for_exec() {
    for e in engines_or_skip() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(&e);
        let name = unique("cached");
        let away = format!("{name}-away");
        let foreign = unique("swapin");
        c.containers
            .extend([name.clone(), away.clone(), foreign.clone()]);
        let o = p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]);
        assert!(
            o.status.success(),
            "engine {}: run through the proxy: {}",
            e.name,
            common::stderr(&o)
        );
        let own = common::stdout(&o).trim().to_owned();
        // Twice: the second exec is served from the cached fact.
        for _ in 0..2 {
            let (st, body) = exec_by_name(&p, &name);
            assert_eq!(
                st, 201,
                "engine {}: exec into its own container: {body}",
                e.name
            );
        }
        e.ok(&[
            "run",
            "-d",
            "--name",
            &foreign,
            "--cap-add",
            "SYS_ADMIN",
            IMAGE,
            "sleep",
            "300",
        ]);
        e.ok(&["rename", &name, &away]);
        e.ok(&["rename", &foreign, &name]);
        let body = exec_after_swap_never_reaches_the_foreign_container(&e, &p, &name, &own);
        assert!(
            body.contains("(rule container.foreign)"),
            "engine {}: {body}",
            e.name
        );
        let o = p.docker(&["exec", &name, "echo", "REACHED"]);
        assert!(
            !o.status.success()
                && common::stderr(&o).contains("(rule container.foreign)")
                && !common::stdout(&o).contains("REACHED"),
            "engine {}: docker exec: {}",
            e.name,
            common::stderr(&o)
        );
        // The proxy's own container, under its new name, still works.
        let (st, body) = exec_by_name(&p, &away);
        assert_eq!(
            st, 201,
            "engine {}: exec into its own renamed container: {body}",
            e.name
        );

        // The same swap back to back on the raw API (no CLI start-up between the daemon's
        // renames and the exec): the fact of the name is cached again first.
        e.ok(&["rename", &name, &foreign]);
        e.ok(&["rename", &away, &name]);
        let (st, body) = exec_by_name(&p, &name);
        assert_eq!(st, 201, "engine {}: {body}", e.name);
        let sock = &e.socket;
        for (from, to) in [(&name, &away), (&foreign, &name)] {
            let r = common::raw(
                sock,
                format!("POST /v1.41/containers/{from}/rename?name={to} HTTP/1.1\r\nHost: d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
            assert_eq!(
                common::status(&r),
                204,
                "engine {}: rename {from}: {r}",
                e.name
            );
        }
        let body = exec_after_swap_never_reaches_the_foreign_container(&e, &p, &name, &own);
        assert!(
            body.contains("(rule container.foreign)"),
            "engine {}: exec right after the daemon's renames: {body}",
            e.name
        );
        eprintln!(
            "engine {}: a cached name taken over by a foreign container is refused for exec",
            e.name
        );
    }
}
