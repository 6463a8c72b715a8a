//! Issue 12's escapes, end to end on both engines: each test is an attack that worked before
//! (or a client that must keep working), run through the real proxy against the real daemon,
//! with the daemon's own view as the oracle.

mod common;
mod escapes_support;

use common::{IMAGE, unique};
use escapes_support::{Cleanup, engines, request};

/// `{"Image":…, "NetworkMode":"<id of host>"}` with no `HostConfig`, or with `"HostConfig":
/// null`: engines before 27 read the top-level field and join the host network object. A
/// bridge made outside the proxy with a forbidden option is refused the same way; the default
/// bridge named at the top level still works.
#[test]
fn top_level_network_mode_naming_the_host_network_or_a_foreign_bridge_is_refused() {
    for e in engines() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(e);
        let host_id = e.ok(&["network", "inspect", "-f", "{{.Id}}", "host"]);
        let lanbr = unique("lanbr");
        e.ok(&["network", "create", "-o", "com.docker.network.bridge.enable_icc=false", &lanbr]);
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
                    let (s, t) = request(&p, "POST", &format!("/{version}/containers/create?name={name}"), Some(&body));
                    assert_eq!(s, 403, "engine {}: {body}: {t}", e.name);
                    assert!(t.contains("(rule network.connect)"), "engine {}: {body}: {t}", e.name);
                    assert!(!e.exists(&name), "engine {}: {body} created a container", e.name);
                }
            }
        }
        let name = unique("toplevel-ok");
        c.containers.push(name.clone());
        let body = format!(r#"{{"Image":"{IMAGE}","NetworkMode":"bridge","HostConfig":null}}"#);
        let (s, t) = request(&p, "POST", &format!("/v1.41/containers/create?name={name}"), Some(&body));
        assert_eq!(s, 201, "engine {}: {t}", e.name);
        assert_eq!(e.inspect(&name)["HostConfig"]["NetworkMode"], "bridge", "engine {}", e.name);
        eprintln!("engine {}: top-level NetworkMode host/foreign bridge refused, default bridge allowed", e.name);
    }
}

/// Every verb that reaches into a container, through the proxy: `(what, raw request)`.
fn reaching_requests(id: &str, exec: &str) -> Vec<(&'static str, String)> {
    let json = |m: &str, p: String, b: &str| {
        format!("{m} {p} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}", b.len())
    };
    let bare = |m: &str, p: String| format!("{m} {p} HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    vec![
        ("exec create", json("POST", format!("/v1.41/containers/{id}/exec"), r#"{"Cmd":["cat","/host/secret"],"AttachStdout":true}"#)),
        ("exec start", json("POST", format!("/v1.41/exec/{exec}/start"), r#"{"Detach":true}"#)),
        ("attach", escapes_support::attach_request(id)),
        ("attach/ws", escapes_support::attach_ws_request(id)),
        ("archive GET", bare("GET", format!("/v1.41/containers/{id}/archive?path=/host/secret"))),
        ("archive HEAD", bare("HEAD", format!("/v1.41/containers/{id}/archive?path=/host/secret"))),
        ("archive PUT", bare("PUT", format!("/v1.41/containers/{id}/archive?path=/host"))),
        ("export", bare("GET", format!("/v1.41/containers/{id}/export"))),
        ("commit", json("POST", format!("/v1.41/commit?container={id}&repo=dwt-stolen"), "{}")),
        ("update", json("POST", format!("/v1.41/containers/{id}/update"), r#"{"CpuShares":512}"#)),
        ("rename", bare("POST", format!("/v1.41/containers/{id}/rename?name={id}-mine"))),
    ]
}

/// Creates an exec instance straight on the daemon; returns its ID.
fn daemon_exec(e: &escapes_support::Engine, id: &str) -> String {
    let body = r#"{"Cmd":["true"]}"#;
    let req = format!(
        "POST /v1.41/containers/{id}/exec HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let resp = common::raw(std::path::Path::new(e.socket), req.as_bytes());
    let json = resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
    let start = json.find('{').unwrap_or(0);
    let v: serde_json::Value = serde_json::from_str(json[start..].lines().next().unwrap_or("")).unwrap_or_default();
    v["Id"].as_str().unwrap_or_else(|| panic!("engine {}: exec create on the daemon: {resp}", e.name)).to_owned()
}

/// A container with CAP_SYS_ADMIN in the host's PID namespace and a host bind, made straight on the daemon (an operator's
/// sidecar, another tenant's), is refused for every verb that reaches into it: exec create and
/// start, attach, websocket attach, archive GET/HEAD/PUT, export, commit, update and rename.
/// The host file behind its bind is never read or written.
#[test]
fn exec_attach_and_archives_into_a_host_namespace_container_made_on_the_daemon_are_refused() {
    for e in engines() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(e);
        let host = tempfile::tempdir().expect("host dir");
        std::fs::write(host.path().join("secret"), b"host secret").expect("secret");
        let name = unique("foreign");
        c.containers.push(name.clone());
        let bind = format!("{}:/host", host.path().display());
        // `--privileged` cannot start on 20.10 in this sandbox (runc cannot apply every
        // capability); CAP_SYS_ADMIN in the host's PID namespace is the same escape.
        e.ok(&["run", "-d", "--name", &name, "--cap-add", "SYS_ADMIN", "--pid", "host", "-v", &bind, IMAGE, "sleep", "300"]);
        let exec = daemon_exec(&e, &name);
        for (what, req) in reaching_requests(&name, &exec) {
            let resp = if what.starts_with("attach") { escapes_support::head(&p.socket, req.as_bytes()) } else { p.raw(req.as_bytes()) };
            assert_eq!(escapes_support::status(&resp), 403, "engine {}: {what}: {resp}", e.name);
            if what != "archive HEAD" {
                assert!(resp.contains("(rule container.foreign)"), "engine {}: {what}: {resp}", e.name);
            }
        }
        // And with the real CLI.
        let out = p.docker(&["exec", &name, "cat", "/host/secret"]);
        assert!(common::stderr(&out).contains("(rule container.foreign)"), "engine {}: {}", e.name, common::stderr(&out));
        let out = p.docker(&["cp", &format!("{name}:/host/secret"), "-"]);
        assert!(!out.status.success() && !common::stdout(&out).contains("host secret"), "engine {}: docker cp read the host file", e.name);
        assert_eq!(std::fs::read(host.path().join("secret")).expect("secret"), b"host secret");
        assert_eq!(std::fs::read_dir(host.path()).expect("ls").count(), 1, "engine {}: something was written into the host dir", e.name);
        assert!(e.exists(&name), "engine {}: renamed", e.name);
        assert!(!e.cli(&["image", "inspect", "dwt-stolen"]).status.success(), "engine {}: committed", e.name);
        eprintln!("engine {}: 11 verbs into a foreign CAP_SYS_ADMIN/host-pid container refused", e.name);
    }
}

/// A container made through the proxy keeps working for every one of those verbs.
#[test]
fn exec_attach_archives_export_commit_update_and_rename_work_on_the_proxys_own_container() {
    for e in engines() {
        let p = e.proxy(&[]);
        let mut c = Cleanup::new(e);
        let name = unique("own");
        c.containers.push(name.clone());
        c.containers.push(format!("{name}-mine"));
        common::ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "300"]));
        assert_eq!(common::ok(p.docker(&["exec", &name, "echo", "in"])), "in", "engine {}", e.name);
        let local = p.workspace.join("f.txt");
        std::fs::write(&local, b"copied").expect("write");
        common::ok(p.docker(&["cp", local.to_str().expect("utf8"), &format!("{name}:/tmp/f.txt")]));
        assert_eq!(common::ok(p.docker(&["exec", &name, "cat", "/tmp/f.txt"])), "copied", "engine {}", e.name);
        let back = p.workspace.join("back.txt");
        common::ok(p.docker(&["cp", &format!("{name}:/tmp/f.txt"), back.to_str().expect("utf8")]));
        assert_eq!(std::fs::read(&back).expect("read"), b"copied");
        let exec = daemon_exec(&e, &name);
        let tag = format!("dwt-own-commit:{}", std::process::id());
        for (what, req) in reaching_requests(&name, &exec) {
            let req = req.replace("dwt-stolen", &tag.replace(':', "&tag="));
            let resp = if what.starts_with("attach") { escapes_support::head(&p.socket, req.as_bytes()) } else { p.raw(req.as_bytes()) };
            let s = escapes_support::status(&resp);
            let want: &[u16] = match what {
                "attach" | "attach/ws" => &[101],
                "exec create" | "commit" => &[201],
                "archive GET" | "archive HEAD" => &[404], // no /host in this container: the daemon's own answer
                "archive PUT" => &[400, 404, 500],        // no body, no /host: the daemon refuses it, not the proxy
                _ => &[200, 204],
            };
            assert!(want.contains(&s), "engine {}: {what}: got {s}: {resp}", e.name);
            assert!(!resp.contains("container.foreign"), "engine {}: {what}: {resp}", e.name);
        }
        let _ = e.cli(&["rmi", &tag]);
        assert!(e.exists(&format!("{name}-mine")), "engine {}: rename did not happen", e.name);
        eprintln!("engine {}: the proxy's own container served all 11 verbs", e.name);
    }
}
