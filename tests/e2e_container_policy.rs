//! The container-policy attacks end to end: real CLIs (28 and 20.10) and raw HTTP bodies through
//! the real proxy to the real dockerd. After every allowed create the test inspects what the
//! daemon actually holds (the daemon is the oracle); after every refusal it checks that nothing
//! was created. Every object is named with `unique()` and removed.

mod common;
use common::*;

use serde_json::Value;

/// Raw `POST` with a JSON body; returns (status, response body).
fn post(p: &Proxy, path: &str, body: &str) -> (u16, String) {
    request(&p.socket, "POST", path, Some(body))
}

/// Removes the named containers when dropped, even if the test panics.
struct Cleanup(Engine, Vec<String>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        for n in &self.1 {
            self.0.force_remove(n);
        }
    }
}

fn exists(e: &Engine, name: &str) -> bool {
    e.daemon(&["inspect", "--type", "container", name])
        .status
        .success()
}

/// Asserts that what the daemon holds for `id` carries no forbidden setting.
fn assert_confined(p: &Proxy, id: &str) -> Value {
    let c = p.engine.inspect(id);
    let hc = &c["HostConfig"];
    assert_eq!(hc["Privileged"], false, "{id}: privileged");
    for k in ["NetworkMode", "PidMode", "IpcMode", "UTSMode", "UsernsMode"] {
        assert_ne!(hc[k], "host", "{id}: {k} host");
    }
    assert_eq!(hc["CgroupnsMode"], "private", "{id}: cgroupns");
    for k in ["Devices", "DeviceRequests", "DeviceCgroupRules"] {
        assert!(
            hc[k].as_array().is_none_or(|a| a.is_empty()),
            "{id}: {k} = {}",
            hc[k]
        );
    }
    // Only the proxy's own budget parent (surface issue: `/dockwarden` by default) may appear.
    assert!(
        hc["CgroupParent"] == "" || hc["CgroupParent"] == "/dockwarden",
        "{id}: cgroup parent {}",
        hc["CgroupParent"]
    );
    assert!(
        hc["MaskedPaths"].as_array().is_some_and(|a| a.len() >= 10),
        "{id}: masked paths {}",
        hc["MaskedPaths"]
    );
    let ws = p.workspace.to_str().expect("utf8");
    let sock = p.socket.to_str().expect("utf8");
    for m in c["Mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["Type"] == "bind")
    {
        let src = m["Source"].as_str().unwrap_or("");
        // Workspace binds reach the daemon as root-only pins of the checked source (docs/binds.md).
        let pin = src.starts_with("/run/dockwarden/pins/");
        assert!(
            src == sock || pin || src == ws || src.starts_with(&format!("{ws}/")),
            "{id}: host path {src} mounted"
        );
    }
    for (port, list) in hc["PortBindings"].as_object().into_iter().flatten() {
        for b in list.as_array().into_iter().flatten() {
            assert!(
                b["HostIp"] == "127.0.0.1" || b["HostIp"] == "::1",
                "{id}: port {port} bound to {}",
                b["HostIp"]
            );
        }
        assert!(
            list.as_array().is_some_and(|a| !a.is_empty()),
            "{id}: port {port} has an empty binding list"
        );
    }
    let hosts: Vec<&str> = hc["ExtraHosts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        hosts.iter().any(|h| h.starts_with("host.docker.internal:")),
        "{id}: extra hosts {hosts:?}"
    );
    c
}

/// `docker create` through the proxy with each CLI; every attack is refused, names its rule,
/// and leaves nothing behind.
fn cli_attacks_are_refused_and_name_the_rule(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let attacks: &[(&[&str], &str)] = &[
        (&["--privileged"], "container.privileged"),
        (&["--network", "host"], "container.namespace.host"),
        (&["--pid", "host"], "container.namespace.host"),
        (&["--ipc", "host"], "container.namespace.host"),
        (&["--uts", "host"], "container.namespace.host"),
        (&["--userns", "host"], "container.namespace.host"),
        (&["--cap-add", "SYS_ADMIN"], "container.capabilities"),
        (&["--cap-add", "sys_ptrace"], "container.capabilities"),
        (
            &["--cap-drop", "ALL", "--cap-add", "CHOWN"],
            "container.capabilities",
        ),
        (&["--cap-add", "ALL"], "container.capabilities"),
        (&["--device", "/dev/null"], "container.devices"),
        (&["--device-cgroup-rule", "a *:* rwm"], "container.devices"),
        (
            &["--security-opt", "seccomp=unconfined"],
            "container.security_opt",
        ),
        (
            &["--security-opt", "apparmor:unconfined"],
            "container.security_opt",
        ),
        (
            &["--security-opt", "label=disable"],
            "container.security_opt",
        ),
        (
            &["--security-opt", "systempaths=unconfined"],
            "container.masked_paths",
        ),
        (&["--cgroup-parent", "/"], "container.cgroup_parent"),
        (&["--runtime", "io.containerd.kata.v2"], "container.runtime"),
        (&["--oom-score-adj", "-1000"], "container.oom_score"),
        (
            &["--ipc", "host", "--sysctl", "kernel.msgmax=1"],
            "container.sysctl",
        ),
        (&["--log-driver", "syslog"], "container.log_driver"),
        (&["--tmpfs", "/t:suid"], "container.tmpfs"),
        (&["-v", "/etc:/host-etc"], "container.bind.outside"),
        (&["-v", "/:/host"], "container.bind.outside"),
        (&["-v", "/var/run:/host-run"], "container.bind.outside"),
        (
            &["--mount", "type=bind,src=/etc,dst=/x"],
            "container.bind.outside",
        ),
        (&["-p", "192.0.2.1:8080:80"], "container.ports.host_ip"),
    ];
    for cli in clis() {
        for (args, rule) in attacks {
            let name = unique("attack");
            let _c = Cleanup(e.clone(), vec![name.clone()]);
            let out = run_with_timeout(
                p.cmd(cli)
                    .args(["create", "--name", &name])
                    .args(*args)
                    .args([IMAGE, "true"]),
                None,
                std::time::Duration::from_secs(60),
            );
            let err = stderr(&out);
            assert!(!out.status.success(), "{cli} {args:?} was allowed");
            assert!(
                err.contains(&format!("(rule {rule})")) && err.contains("dockwarden: "),
                "{cli} {args:?}: {err}"
            );
            assert!(
                !exists(e, &name),
                "{cli} {args:?}: a container exists after the refusal"
            );
        }
    }
}

/// An allowed create with ports, binds and the Docker socket, as the daemon then holds it.
fn allowed_create_is_confined_as_the_daemon_sees_it(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    std::fs::create_dir_all(p.workspace.join("src")).expect("mkdir");
    let src = format!("{}/src:/src", p.workspace.display());
    for cli in clis() {
        let name = unique("ok");
        let _c = Cleanup(e.clone(), vec![name.clone()]);
        let args = [
            "run",
            "-d",
            "--name",
            &name,
            "-p",
            "18080",
            "-p",
            "0.0.0.0::81",
            "-v",
            &src,
            "-v",
            "/var/run/docker.sock:/var/run/docker.sock",
            "--tmpfs",
            "/t:exec",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            IMAGE,
            "sleep",
            "30",
        ];
        let out = run_with_timeout(
            p.cmd(cli).args(args),
            None,
            std::time::Duration::from_secs(60),
        );
        assert!(out.status.success(), "{cli}: {}", stderr(&out));
        let c = assert_confined(&p, &name);
        let sock = c["Mounts"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["Destination"] == "/var/run/docker.sock")
            .expect("socket mount");
        assert_eq!(
            sock["Source"],
            p.socket.to_str().expect("utf8"),
            "{cli}: the socket bind uses the proxy socket"
        );
        for (port, list) in c["NetworkSettings"]["Ports"]
            .as_object()
            .into_iter()
            .flatten()
        {
            for b in list.as_array().into_iter().flatten() {
                assert!(
                    b["HostIp"] == "127.0.0.1",
                    "{cli}: port {port} published on {}",
                    b["HostIp"]
                );
            }
        }
        let hosts = stdout(&p.docker(&["exec", &name, "cat", "/etc/hosts"]));
        assert!(
            hosts.contains("host.docker.internal"),
            "{cli}: /etc/hosts lacks host.docker.internal:\n{hosts}"
        );
    }
}

/// Bodies the CLI cannot send: legacy top-level fields, escaped and folded keys, duplicates,
/// empty port lists, volume mounts with bind options, and start bodies.
fn raw_bodies_the_cli_cannot_express(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let refused: &[(&str, &str)] = &[
        (
            r#"{"Image":"IMG","Privileged":true}"#,
            "container.privileged",
        ),
        (
            r#"{"Image":"IMG","HostConfig":null,"NetworkMode":"host"}"#,
            "container.namespace.host",
        ),
        (
            r#"{"Image":"IMG","Binds":["/:/host"]}"#,
            "container.bind.outside",
        ),
        (
            r#"{"Image":"IMG","HostConfig":{"\u0050rivileged":true}}"#,
            "container.privileged",
        ),
        (
            r#"{"Image":"IMG","HostConfig":{"Privileged":true,"privileged":false}}"#,
            "request.body.invalid",
        ),
        (
            "{\"Image\":\"IMG\",\"Ho\u{17f}tConfig\":{\"Privileged\":true}}",
            "request.body.invalid",
        ),
        (
            r#"{"Image":"IMG","CapAdd":["SYS_ADMIN"],"HostConfig":{}}"#,
            "container.legacy_hostconfig",
        ),
        (
            r#"{"Image":"IMG","HostConfig":{"MaskedPaths":[]}}"#,
            "container.masked_paths",
        ),
        (
            r#"{"Image":"IMG","HostConfig":{"Mounts":[{"Type":"volume","Target":"/x","VolumeOptions":{"DriverConfig":{"Options":{"type":"none","o":"bind","device":"/etc"}}}}]}}"#,
            "container.volume.options",
        ),
        (
            r#"{"Image":"IMG","HostConfig":{"CapAdd":["cap_ſyſ_admın"]}}"#,
            "container.capabilities",
        ),
    ];
    for (body, rule) in refused {
        let name = unique("raw");
        let _c = Cleanup(e.clone(), vec![name.clone()]);
        let (status, text) = post(
            &p,
            &format!("/v1.41/containers/create?name={name}"),
            &body.replace("IMG", IMAGE),
        );
        let want = if *rule == "request.body.invalid" {
            400
        } else {
            403
        };
        assert_eq!(status, want, "{body}: {text}");
        assert!(text.contains(&format!("(rule {rule})")), "{body}: {text}");
        assert!(!exists(e, &name), "{body}: created anyway");
    }
    // Allowed, then inspected: empty port list, legacy top-level fields moved into HostConfig.
    let allowed = [
        r#"{"Image":"IMG","ExposedPorts":{"80/tcp":{}},"HostConfig":{"PortBindings":{"80/tcp":[]}}}"#,
        r#"{"Image":"IMG","ExposedPorts":{"80/tcp":{}},"PortBindings":{"80/tcp":[{"HostIp":"localhost"}]},"Memory":67108864}"#,
        r#"{"Image":"IMG","ExposedPorts":{"7000/tcp":{}},"HostConfig":{"PublishAllPorts":true}}"#,
    ];
    // Engine 26.1 (API 1.44 and later) ignores top-level HostConfig fields at its own API
    // version; the proxy moves them into HostConfig before forwarding, so at /v1.45 they take
    // effect (and are judged) just as at /v1.41.
    let versions: &[&str] = if e.name == "20.10" {
        &["1.41"]
    } else {
        &["1.41", "1.45"]
    };
    for (body, version) in allowed
        .iter()
        .flat_map(|b| versions.iter().map(move |v| (*b, *v)))
    {
        let name = unique("rawok");
        let _c = Cleanup(e.clone(), vec![name.clone()]);
        let (status, text) = post(
            &p,
            &format!("/v{version}/containers/create?name={name}"),
            &body.replace("IMG", IMAGE),
        );
        assert_eq!(status, 201, "{body}: {text}");
        let c = assert_confined(&p, &name);
        assert!(
            c["HostConfig"]["PortBindings"]
                .as_object()
                .is_some_and(|m| !m.is_empty()),
            "{body}: no bindings"
        );
        assert_eq!(c["HostConfig"]["PublishAllPorts"], false);
        if body.contains("Memory") {
            assert_eq!(
                c["HostConfig"]["Memory"], 67108864,
                "/v{version}: legacy Memory was moved into HostConfig"
            );
        }
    }
}

fn start_bodies_are_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let name = unique("start");
    let _c = Cleanup(e.clone(), vec![name.clone()]);
    ok(p.docker(&["create", "--name", &name, IMAGE, "sleep", "30"]));
    let (s, t) = post(
        &p,
        &format!("/v1.23/containers/{name}/start"),
        r#"{"Privileged":true,"Binds":["/:/host"]}"#,
    );
    assert_eq!(s, 403, "{t}");
    assert!(t.contains("(rule api.version)"), "{t}");
    let (s, t) = post(
        &p,
        &format!("/v1.41/containers/{name}/start"),
        r#"{"Privileged":true}"#,
    );
    assert!(
        s == 403 && t.contains("(rule container.start_body)"),
        "{s} {t}"
    );
    assert_eq!(e.inspect(&name)["State"]["Running"], false);
    let (s, t) = post(&p, &format!("/v1.41/containers/{name}/start"), "{}");
    assert_eq!(s, 204, "{t}");
    assert_confined(&p, &name);
}

/// Joins: a foreign privileged container (like the sidecar's own) and a foreign plain one (host
/// cgroupns on this cgroup-v1 engine) cannot be joined; a container made through the proxy can.
fn joins_only_of_containers_that_pass_the_policy(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let (foreign, plain, clean, joiner) = (
        unique("foreign"),
        unique("plain"),
        unique("clean"),
        unique("joiner"),
    );
    let _c = Cleanup(
        e.clone(),
        vec![
            joiner.clone(),
            foreign.clone(),
            plain.clone(),
            clean.clone(),
        ],
    );
    ok(e.daemon(&[
        "create",
        "--name",
        &foreign,
        "--privileged",
        IMAGE,
        "sleep",
        "30",
    ]));
    ok(e.daemon(&[
        "create",
        "--name",
        &plain,
        "-v",
        "/etc:/host-etc",
        IMAGE,
        "sleep",
        "30",
    ]));
    ok(p.docker(&["run", "-d", "--name", &clean, IMAGE, "sleep", "30"]));
    for target in [&foreign, &plain] {
        for how in [
            format!("--network=container:{target}"),
            format!("--pid=container:{target}"),
            format!("--volumes-from={target}"),
        ] {
            let out = p.docker(&["create", "--name", &joiner, &how, IMAGE, "true"]);
            assert!(!out.status.success(), "{how} allowed");
            assert!(
                stderr(&out).contains("(rule container.join)"),
                "{how}: {}",
                stderr(&out)
            );
            assert!(!exists(e, &joiner));
        }
    }
    let clean_id = e.inspect(&clean)["Id"].as_str().expect("id").to_owned();
    ok(p.docker(&[
        "run",
        "-d",
        "--name",
        &joiner,
        &format!("--network=container:{clean}"),
        "--volumes-from",
        &clean,
        IMAGE,
        "sleep",
        "30",
    ]));
    let c = e.inspect(&joiner);
    assert_eq!(
        c["HostConfig"]["NetworkMode"],
        format!("container:{clean_id}")
    );
    assert_eq!(c["HostConfig"]["VolumesFrom"][0], clean_id.as_str());
}

fn exec_update_and_volume_attacks_are_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let (name, vol, vol2) = (unique("exec"), unique("vol"), unique("tmpvol"));
    let _c = Cleanup(e.clone(), vec![name.clone()]);
    ok(p.docker(&["run", "-d", "--name", &name, IMAGE, "sleep", "30"]));
    for cli in clis() {
        let out = p
            .cmd(cli)
            .args(["exec", "--privileged", &name, "true"])
            .output()
            .expect("exec");
        assert!(
            stderr(&out).contains("(rule container.privileged)"),
            "{cli}: {}",
            stderr(&out)
        );
    }
    assert_eq!(ok(p.docker(&["exec", "-u", "0", &name, "id", "-u"])), "0");
    let (s, t) = post(
        &p,
        &format!("/v1.41/containers/{name}/update"),
        r#"{"CgroupParent":"/"}"#,
    );
    assert!(
        s == 403 && t.contains("(rule container.cgroup_parent)"),
        "{s} {t}"
    );
    let (s, t) = post(
        &p,
        &format!("/v1.41/containers/{name}/update"),
        r#"{"DeviceCgroupRules":["a *:* rwm"]}"#,
    );
    assert!(
        s == 403 && t.contains("(rule container.devices)"),
        "{s} {t}"
    );
    let out = p.docker(&[
        "volume",
        "create",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        "device=/etc",
        &vol,
    ]);
    assert!(
        stderr(&out).contains("(rule volume.options)"),
        "{}",
        stderr(&out)
    );
    let out = p.docker(&["volume", "create", "--driver", "sshfs", &vol]);
    assert!(
        stderr(&out).contains("(rule volume.driver)"),
        "{}",
        stderr(&out)
    );
    assert!(!e.daemon(&["volume", "inspect", &vol]).status.success());
    ok(p.docker(&[
        "volume",
        "create",
        "--opt",
        "type=tmpfs",
        "--opt",
        "device=tmpfs",
        "--opt",
        "o=size=1m",
        &vol2,
    ]));
    let _ = e.daemon(&["volume", "rm", &vol2]);
}

/// A container that binds the Docker socket gets the proxy's socket, so what it asks for from
/// inside is policed too: a static Docker CLI (copied into the workspace, since a bind from
/// `/usr/local/bin` would itself be refused) can list containers but not start a privileged one.
fn docker_socket_inside_a_container_is_the_policed_proxy(e: &Engine) {
    let Some(cli) = cli28() else {
        eprintln!("skipped: no static Docker CLI at /usr/local/bin/docker to run inside busybox");
        return;
    };
    let p = Proxy::start_on(e, &[]);
    std::fs::copy(cli, p.workspace.join("docker-cli")).expect("copy the CLI into the workspace");
    let inner = unique("inner");
    let outers = std::cell::RefCell::new(Vec::new());
    let _c = Cleanup(e.clone(), vec![inner.clone()]);
    let bin = format!("{}/docker-cli:/docker:ro", p.workspace.display());
    let run_inside = |args: &[&str]| {
        let name = unique("outer");
        outers.borrow_mut().push(name.clone());
        let mut full = vec![
            "run",
            "--rm",
            "--name",
            name.as_str(),
            "-e",
            "HOME=/tmp",
            "-v",
            "/var/run/docker.sock:/var/run/docker.sock",
            "-v",
            &bin,
            IMAGE,
            "/docker",
        ];
        full.extend_from_slice(args);
        p.docker(&full)
    };
    let listed = run_inside(&["ps", "--format", "{{.ID}}"]);
    assert!(
        listed.status.success(),
        "docker ps inside: {}",
        stderr(&listed)
    );
    let refused = run_inside(&["create", "--name", &inner, "--privileged", IMAGE, "true"]);
    let text = format!("{}{}", stdout(&refused), stderr(&refused));
    assert!(
        text.contains("(rule container.privileged)"),
        "privileged create from inside: {text}"
    );
    assert!(!exists(e, &inner), "the inner privileged container exists");
    for o in outers.borrow().iter() {
        e.force_remove(o);
    }
}

per_engine!(
    cli_attacks_are_refused_and_name_the_rule,
    allowed_create_is_confined_as_the_daemon_sees_it,
    raw_bodies_the_cli_cannot_express,
    start_bodies_are_refused,
    joins_only_of_containers_that_pass_the_policy,
    exec_update_and_volume_attacks_are_refused,
    docker_socket_inside_a_container_is_the_policed_proxy,
);
