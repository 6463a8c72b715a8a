//! The rest of the endpoint surface: swarm, plugins, distribution and checkpoints are refused
//! with their rule ids, and the privileged containers that buildx's docker-container driver and
//! kind create are refused.

mod common;
use common::*;

fn post_json(p: &Proxy, path: &str, body: &str) -> String {
    p.raw(
        format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
            .as_bytes(),
    )
}

fn swarm_init_is_refused_with_its_rule_id(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for cli in clis() {
        let o = run_with_timeout(
            p.cmd(cli).args(["swarm", "init"]),
            None,
            std::time::Duration::from_secs(60),
        );
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("rule system.swarm"),
            "{cli}: {}",
            stderr(&o)
        );
    }
    let info: serde_json::Value =
        serde_json::from_str(&ok(e.daemon(&["info", "--format", "{{json .Swarm}}"])))
            .expect("json");
    assert_eq!(info["LocalNodeState"], "inactive");
}

fn plugin_install_is_refused_with_its_rule_id(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for cli in clis() {
        let o = run_with_timeout(
            p.cmd(cli)
                .args(["plugin", "install", "--grant-all-permissions", "x"]),
            None,
            std::time::Duration::from_secs(60),
        );
        assert!(!o.status.success());
        assert!(
            stderr(&o).contains("rule system.plugin"),
            "{cli}: {}",
            stderr(&o)
        );
    }
}

fn swarm_plugin_distribution_and_checkpoint_endpoints_are_refused(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    for (method, path, rule) in [
        ("POST", "/v1.41/swarm/join", "system.swarm"),
        ("POST", "/v1.41/services/create", "system.swarm"),
        ("DELETE", "/v1.41/nodes/x", "system.swarm"),
        ("POST", "/v1.41/swarm/update?version=1", "system.swarm"),
        ("POST", "/v1.41/secrets/create", "system.swarm"),
        ("POST", "/v1.41/configs/create", "system.swarm"),
        ("POST", "/v1.41/plugins/pull?remote=x", "system.plugin"),
        ("POST", "/v1.41/plugins/create?name=x", "system.plugin"),
        ("POST", "/v1.41/plugins/x/enable", "system.plugin"),
        ("POST", "/v1.41/plugins/x/set", "system.plugin"),
        ("POST", "/v1.41/plugins/x/upgrade", "system.plugin"),
        ("POST", "/v1.41/plugins/x/push", "system.plugin"),
        (
            "GET",
            "/v1.41/distribution/busybox/json",
            "system.distribution",
        ),
        (
            "POST",
            "/v1.41/containers/x/checkpoints",
            "system.checkpoint",
        ),
        (
            "GET",
            "/v1.41/containers/x/checkpoints",
            "system.checkpoint",
        ),
    ] {
        let r = p.raw(
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        );
        assert_eq!(status(&r), 403, "{method} {path}: {r}");
        assert!(r.contains(rule), "{method} {path}: {r}");
    }
}

/// What `docker buildx create --driver docker-container` sends (buildx's
/// `driver/docker-container/driver.go`): a privileged BuildKit container.
const BUILDX_CREATE: &str = r#"{"Image":"moby/buildkit:buildx-stable-1","Env":["BUILDKIT_STEP_LOG_MAX_SIZE=10485760"],
  "HostConfig":{"Privileged":true,"Mounts":[{"Type":"volume","Source":"buildx_buildkit_x0_state","Target":"/var/lib/buildkit"}],
  "Init":true}}"#;

/// What `kind create cluster` sends for its node container (kind's `pkg/cluster/internal/providers/docker`).
const KIND_NODE: &str = r#"{"Image":"kindest/node:v1.29.2","Hostname":"kind-control-plane",
  "Labels":{"io.x-k8s.kind.cluster":"kind","io.x-k8s.kind.role":"control-plane"},
  "HostConfig":{"Privileged":true,"SecurityOpt":["seccomp=unconfined","apparmor=unconfined"],
  "Tmpfs":{"/run":"","/tmp":""},"Binds":["/lib/modules:/lib/modules:ro"],"CgroupnsMode":"private",
  "PortBindings":{"6443/tcp":[{"HostIp":"127.0.0.1","HostPort":"0"}]},"RestartPolicy":{"Name":"on-failure","MaximumRetryCount":1}},
  "Volumes":{"/var":{}}}"#;

fn rejects_buildx_docker_container_driver_because_its_container_is_privileged(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let buildx = cli28().map(|cli| {
        run_with_timeout(
            p.cmd(cli).args(["buildx", "version"]),
            None,
            std::time::Duration::from_secs(30),
        )
    });
    if buildx.is_some_and(|o| o.status.success()) {
        // buildx pulls its BuildKit image first and, when that fails (no registry here), goes on
        // with a local image of that name: the test image stands in for it.
        let bk = "moby/buildkit:buildx-stable-1";
        let had = e.daemon(&["image", "inspect", bk]).status.success();
        if !had {
            ok(e.daemon(&["tag", IMAGE, bk]));
        }
        // A config directory of its own, so the builder record buildx writes goes with the test.
        let mut create = p.cmd(cli28().expect("cli"));
        create.env("DOCKER_CONFIG", p.workspace.join(".docker"));
        create.args([
            "buildx",
            "create",
            "--driver",
            "docker-container",
            "--name",
            &unique("bx"),
            "--bootstrap",
        ]);
        let o = run_with_timeout(&mut create, None, std::time::Duration::from_secs(120));
        if !had {
            let _ = e.daemon(&["rmi", bk]);
        }
        assert!(
            stderr(&o).contains("rule container.privileged"),
            "{}",
            stderr(&o)
        );
    }
    let r = post_json(
        &p,
        "/v1.41/containers/create?name=buildx_buildkit_x0",
        BUILDX_CREATE,
    );
    assert_eq!(status(&r), 403, "{r}");
    assert!(r.contains("container.privileged"), "{r}");
}

fn rejects_kind_node_containers(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let r = post_json(
        &p,
        "/v1.41/containers/create?name=kind-control-plane",
        KIND_NODE,
    );
    assert_eq!(status(&r), 403, "{r}");
    assert!(r.contains("container.privileged"), "{r}");
    assert!(r.contains("kind cannot run here"), "{r}");
    // Without `Privileged` the node is still refused (unconfined profiles, host module tree).
    let unprivileged = KIND_NODE.replace(r#""Privileged":true,"#, "");
    // (403 once the container rules refuse unconfined profiles; never a created container.)
    let r = post_json(
        &p,
        "/v1.41/containers/create?name=kind-control-plane",
        &unprivileged,
    );
    assert_ne!(status(&r), 201, "{r}");
}

per_engine!(
    swarm_init_is_refused_with_its_rule_id,
    plugin_install_is_refused_with_its_rule_id,
    swarm_plugin_distribution_and_checkpoint_endpoints_are_refused,
    rejects_buildx_docker_container_driver_because_its_container_is_privileged,
    rejects_kind_node_containers,
);
