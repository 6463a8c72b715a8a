//! BuildKit's gRPC API (`POST /grpc`, what buildx and Compose v2 use) through the proxy, on both
//! engines: each test is named after the attack it shows refused, or the build it shows working.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// buildx (a CLI plugin of the Docker CLI 28), or `None` with `skipped: <reason>` printed; a
/// failure instead when `DW_ENGINES_REQUIRED` is set (CI installs it with the engines).
fn buildx() -> Option<&'static str> {
    let ok = cli28().filter(|cli| {
        Command::new(cli)
            .args(["buildx", "version"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if ok.is_none() {
        let reason = "no buildx plugin for Docker CLI 28 at /usr/local/bin/docker";
        assert!(
            !engines_required(),
            "{reason}, but DW_ENGINES_REQUIRED is set"
        );
        println!("skipped: {reason}");
    }
    ok
}

fn proxy(e: &Engine, extra: &[&str]) -> Proxy {
    Proxy::start_on(e, extra)
}

/// A build context in the workspace with this Dockerfile.
fn context(p: &Proxy, name: &str, dockerfile: &str) -> PathBuf {
    let ctx = p.workspace.join(name);
    std::fs::create_dir_all(&ctx).expect("ctx");
    std::fs::write(ctx.join("Dockerfile"), dockerfile).expect("Dockerfile");
    ctx
}

fn buildx_build(p: &Proxy, cli: &str, args: &[&str]) -> Output {
    let mut c = p.cmd(cli);
    c.env("BUILDX_NO_DEFAULT_ATTESTATIONS", "1")
        .args(["buildx", "build", "--progress=plain", "--pull=false"])
        .args(args);
    run_with_timeout(&mut c, None, Duration::from_secs(300))
}

/// Both streams, for messages and for "the step never ran" checks.
fn all_output(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

fn host_network_run_step_is_refused_over_grpc(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "hostnet",
        &format!(
            "FROM {IMAGE}\nRUN echo IFACES; ip -o link | grep -c . ; echo HOSTNET-$((40+2))\n"
        ),
    );
    let ctx = ctx.to_str().expect("utf-8");
    let o = buildx_build(
        &p,
        cli,
        &[
            "--no-cache",
            "--allow",
            "network.host",
            "--network",
            "host",
            ctx,
        ],
    );
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("rule build.entitlement"),
        "{}: {out}",
        e.name
    );
    assert!(!out.contains("HOSTNET-42"), "{}: the step ran", e.name);
    // buildx adds the entitlement itself for `--network host`; the attribute
    // `force-network-mode=host` alone is refused as `build.network` (tests/grpc_cases.rs).
    let o = buildx_build(&p, cli, &["--no-cache", "--network", "host", ctx]);
    let out = all_output(&o);
    assert!(
        !o.status.success()
            && (out.contains("rule build.entitlement") || out.contains("rule build.network")),
        "{}: {out}",
        e.name
    );
    assert!(!out.contains("HOSTNET-42"), "{}: the step ran", e.name);
    if e.name == "26.1" {
        // `RUN --network=host` in the Dockerfile (the 20.10 frontend does not know the flag).
        let ctx = context(
            &p,
            "runnet",
            &format!("FROM {IMAGE}\nRUN --network=host ip -o link; echo RUNNET-$((40+2))\n"),
        );
        let ctx = ctx.to_str().expect("utf-8");
        let o = buildx_build(&p, cli, &["--no-cache", "--allow", "network.host", ctx]);
        let out = all_output(&o);
        assert!(
            !o.status.success() && out.contains("rule build.entitlement"),
            "{out}"
        );
        // Without the entitlement BuildKit itself refuses the step.
        let o = buildx_build(&p, cli, &["--no-cache", ctx]);
        let out = all_output(&o);
        assert!(
            !o.status.success()
                && out.contains("network.host is not allowed")
                && !out.contains("RUNNET-42"),
            "{out}"
        );
    }
    assert!(
        p.audit_log().contains("/moby.buildkit.v1.Control/Solve"),
        "{}: the Solve call is audited",
        e.name
    );
}

fn insecure_entitlement_is_refused_over_grpc(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "insecure",
        &format!("FROM {IMAGE}\nRUN echo INSECURE-$((40+2))\n"),
    );
    let o = buildx_build(
        &p,
        cli,
        &[
            "--no-cache",
            "--allow",
            "security.insecure",
            ctx.to_str().expect("utf-8"),
        ],
    );
    let out = all_output(&o);
    assert!(
        !o.status.success()
            && out.contains("rule build.entitlement")
            && out.contains("security.insecure"),
        "{}: {out}",
        e.name
    );
    assert!(!out.contains("INSECURE-42"), "{}: the step ran", e.name);
}

/// A plain HTTP server in the daemon's network namespace, logging the requests it gets.
struct HttpServer {
    child: std::process::Child,
    log: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl HttpServer {
    fn start(netns: Option<&Path>, port: u16) -> HttpServer {
        let dir = tempfile::Builder::new()
            .prefix("dwhttp")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let docroot = dir.path().join("www");
        std::fs::create_dir_all(&docroot).expect("docroot");
        // A gzip tar holding a Dockerfile: what `docker buildx build http://…/ctx.tar` fetches.
        let src = dir.path().join("src");
        std::fs::create_dir_all(&src).expect("src");
        std::fs::write(
            src.join("Dockerfile"),
            format!("FROM {IMAGE}\nRUN echo FETCHED-$((40+2))\n"),
        )
        .expect("Dockerfile");
        let st = Command::new("tar")
            .arg("-czf")
            .arg(docroot.join("ctx.tar"))
            .arg("-C")
            .arg(&src)
            .arg("Dockerfile")
            .status()
            .expect("tar");
        assert!(st.success());
        let log = dir.path().join("http.log");
        let mut c = match netns {
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("python3");
                c
            }
            None => Command::new("python3"),
        };
        c.args([
            "-u",
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(&docroot);
        c.stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log")));
        let child = c.spawn().expect("http server");
        let s = HttpServer {
            child,
            log,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if std::fs::read_to_string(&s.log)
                .unwrap_or_default()
                .contains("Serving HTTP")
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .matches("\"GET ")
            .count()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon_fetched_remote_context_over_grpc_is_refused(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let port = 18_700
        + u16::try_from(std::process::id() % 1000).unwrap_or(0)
        + if e.name == "26.1" { 1000 } else { 0 };
    let http = HttpServer::start(e.netns.as_deref(), port);
    let url = format!("http://127.0.0.1:{}/ctx.tar", http.port);
    // The attack is real: straight to the daemon, BuildKit fetches the URL itself.
    let mut direct = Command::new(cli);
    direct.env("DOCKER_HOST", e.host()).args([
        "buildx",
        "build",
        "--progress=plain",
        "--pull=false",
        "--no-cache",
        &url,
    ]);
    let o = run_with_timeout(&mut direct, None, Duration::from_secs(300));
    assert!(
        http.requests() >= 1,
        "{}: the daemon fetched nothing directly: {}",
        e.name,
        all_output(&o)
    );
    let before = http.requests();
    let p = proxy(e, &[]);
    let o = buildx_build(&p, cli, &["--no-cache", &url]);
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("rule build.remote"),
        "{}: {out}",
        e.name
    );
    assert_eq!(
        http.requests(),
        before,
        "{}: the daemon fetched the URL through the proxy",
        e.name
    );
    for git in [
        format!("git://127.0.0.1:{}/repo.git", http.port),
        format!("https://127.0.0.1:{}/repo.git#main", http.port),
    ] {
        let o = buildx_build(&p, cli, &["--no-cache", &git]);
        let out = all_output(&o);
        assert!(
            !o.status.success() && out.contains("rule build.remote"),
            "{}: {git}: {out}",
            e.name
        );
    }
    // A named context from a URL is refused the same way; a local one is not.
    let ctx = context(
        &p,
        "named",
        &format!("FROM {IMAGE}\nCOPY --from=extra Dockerfile /x\n"),
    );
    let o = buildx_build(
        &p,
        cli,
        &[
            "--no-cache",
            "--build-context",
            &format!("extra={url}"),
            ctx.to_str().expect("utf-8"),
        ],
    );
    assert!(
        all_output(&o).contains("rule build.remote"),
        "{}: {}",
        e.name,
        all_output(&o)
    );
    assert_eq!(http.requests(), before, "{}", e.name);
}

fn buildx_prune_follows_the_prune_policy(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let o = run_with_timeout(
        p.cmd(cli).args(["buildx", "prune", "-f", "--all"]),
        None,
        Duration::from_secs(120),
    );
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("rule system.prune"),
        "{}: {out}",
        e.name
    );
    // The same rule as the REST endpoint.
    let r = p.raw(b"POST /v1.41/build/prune HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert!(
        r.starts_with("HTTP/1.1 403") && r.contains("system.prune"),
        "{r}"
    );
    // Read-only cache listing (DiskUsage) is allowed.
    let o = run_with_timeout(
        p.cmd(cli).args(["buildx", "du"]),
        None,
        Duration::from_secs(120),
    );
    assert!(
        o.status.success(),
        "{}: buildx du: {}",
        e.name,
        all_output(&o)
    );
}

fn legitimate_buildx_build_with_cache_mount_secret_and_two_stages_works(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "legit",
        &format!(
            "FROM {IMAGE} AS base\nRUN --mount=type=cache,target=/cache echo hit >> /cache/count && wc -l < /cache/count > /n\n\
             RUN --mount=type=secret,id=tok cat /run/secrets/tok > /tok-copy\n\
             FROM {IMAGE}\nCOPY --from=base /tok-copy /n /out/\nRUN echo SECRET=$(cat /out/tok-copy) CACHE=$(cat /out/n)\n"
        ),
    );
    let secret = p.workspace.join("tok");
    std::fs::write(&secret, "s3cr3t-value\n").expect("secret");
    let tag = unique("bxlegit");
    let o = buildx_build(
        &p,
        cli,
        &[
            "--no-cache",
            "--secret",
            &format!("id=tok,src={}", secret.display()),
            "-t",
            &tag,
            ctx.to_str().expect("utf-8"),
        ],
    );
    let out = all_output(&o);
    assert!(o.status.success(), "{}: {out}", e.name);
    assert!(
        out.contains("SECRET=s3cr3t-value CACHE="),
        "{}: {out}",
        e.name
    );
    let o = run_with_timeout(
        p.cmd(cli).args(["image", "inspect", &tag]),
        None,
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}: the image exists", e.name);
    let _ = run_with_timeout(
        p.cmd(cli).args(["image", "rm", &tag]),
        None,
        Duration::from_secs(60),
    );
    let log = p.audit_log();
    assert!(
        log.contains("/moby.buildkit.v1.frontend.LLBBridge/Solve")
            && log.contains("/moby.buildkit.v1.Control/Status"),
        "{}",
        e.name
    );
}

/// `docker buildx build --cgroup-parent /` (the frontend attribute `cgroup-parent`) would put
/// the RUN steps outside the budget: refused before any step runs.
fn buildx_build_with_a_cgroup_parent_is_refused(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "cgparent",
        &format!("FROM {IMAGE}\nRUN echo CGPARENT-$((40+2))\n"),
    );
    let ctx = ctx.to_str().expect("utf-8");
    for parent in ["/", "/system.slice", "../.."] {
        let o = buildx_build(&p, cli, &["--no-cache", "--cgroup-parent", parent, ctx]);
        let out = all_output(&o);
        assert!(
            !o.status.success() && out.contains("rule build.cgroup_parent"),
            "{}: `{parent}`: {out}",
            e.name
        );
        assert!(
            !out.contains("CGPARENT-42"),
            "{}: `{parent}`: the step ran",
            e.name
        );
    }
}

/// buildx as users run it: default attestations left on (no `BUILDX_NO_DEFAULT_ATTESTATIONS`,
/// which the other tests set), so the Solve carries whatever attestation attributes buildx adds
/// by default for the `docker` driver; the build and its image work.
fn buildx_build_with_default_attestations_works(e: &Engine) {
    let Some(cli) = buildx() else { return };
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "attest",
        &format!("FROM {IMAGE}\nRUN echo ATTEST-$((40+2)) > /attest\n"),
    );
    let tag = unique("bxattest");
    let mut c = p.cmd(cli);
    c.env_remove("BUILDX_NO_DEFAULT_ATTESTATIONS")
        .args([
            "buildx",
            "build",
            "--progress=plain",
            "--pull=false",
            "--no-cache",
            "-t",
            &tag,
        ])
        .arg(&ctx);
    let o = run_with_timeout(&mut c, None, Duration::from_secs(300));
    let out = all_output(&o);
    assert!(o.status.success(), "{}: {out}", e.name);
    assert_eq!(
        ok(p.docker(&["run", "--rm", &tag, "cat", "/attest"])),
        "ATTEST-42",
        "{}",
        e.name
    );
    let _ = e.daemon(&["image", "rm", &tag]);
}

fn docker_compose_v2_build_works_over_grpc(e: &Engine) {
    let Some(cli) = buildx() else { return };
    // A missing Compose v2 plugin is a printed skip, or a failure under DW_COMPOSE_REQUIRED.
    if !Compose::ALL.iter().any(|c| c.name == "v2" && c.present()) {
        return;
    }
    let p = proxy(e, &[]);
    let ctx = context(
        &p,
        "composeapp",
        &format!(
            "FROM {IMAGE} AS one\nRUN echo one > /one\nFROM {IMAGE}\nCOPY --from=one /one /one\nRUN echo COMPOSE-$((40+2))\n"
        ),
    );
    let tag = unique("cbuild");
    std::fs::write(ctx.join("compose.yaml"), format!("services:\n  app:\n    build:\n      context: .\n      pull: false\n    image: {tag}:latest\n")).expect("compose");
    let mut c = p.cmd(cli);
    c.current_dir(&ctx)
        .args(["compose", "--progress=plain", "build", "--no-cache"]);
    let o = run_with_timeout(&mut c, None, Duration::from_secs(300));
    let out = all_output(&o);
    assert!(
        o.status.success() && out.contains("COMPOSE-42"),
        "{}: {out}",
        e.name
    );
    assert!(
        p.audit_log().contains("/moby.buildkit.v1.Control/Solve"),
        "{}: Compose v2 built over /grpc",
        e.name
    );
    let _ = run_with_timeout(
        p.cmd(cli).args(["image", "rm", &format!("{tag}:latest")]),
        None,
        Duration::from_secs(60),
    );
}

/// Raw gRPC over the proxy: `POST /grpc` with `Upgrade: h2c`, then HTTP/2 on the upgraded
/// connection, as buildx does it.
mod raw {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    pub struct Answer {
        pub status: Option<String>,
        pub message: String,
    }

    impl Answer {
        /// The proxy itself (not the daemon) ended the call with gRPC status `code`.
        pub fn refused_by_proxy(&self, code: &str, what: &str, engine: &str) {
            assert_eq!(
                self.status.as_deref(),
                Some(code),
                "{engine}: {what}: {}",
                self.message
            );
            assert!(
                self.message.starts_with(super::PROXY_PREFIX),
                "{engine}: {what}: the proxy answered: {}",
                self.message
            );
        }
    }

    /// Calls `method` with one gRPC frame (`flag`, `payload`) and returns the gRPC status.
    pub async fn call(sock: &std::path::Path, method: &str, flag: u8, payload: &[u8]) -> Answer {
        let io = TokioIo::new(
            tokio::net::UnixStream::connect(sock)
                .await
                .expect("connect"),
        );
        let (mut send, conn) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io)
            .await
            .expect("http1");
        tokio::spawn(conn.with_upgrades());
        let req = http::Request::post("/grpc")
            .header("host", "x")
            .header("upgrade", "h2c")
            .header("connection", "Upgrade")
            .body(Full::new(Bytes::new()))
            .expect("request");
        let resp = send.send_request(req).await.expect("upgrade request");
        assert_eq!(resp.status(), 101, "the daemon switched to h2c");
        let up = hyper::upgrade::on(resp).await.expect("upgraded");
        let (mut h2, conn) =
            hyper::client::conn::http2::handshake::<_, _, Full<Bytes>>(TokioExecutor::new(), up)
                .await
                .expect("h2");
        tokio::spawn(conn);
        let mut body = vec![flag];
        body.extend_from_slice(&u32::try_from(payload.len()).expect("len").to_be_bytes());
        body.extend_from_slice(payload);
        let req = http::Request::post(format!("http://localhost{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let resp = h2.send_request(req).await.expect("call");
        let head = resp.headers().clone();
        let collected = resp.into_body().collect().await.expect("body");
        let trailers = collected.trailers().cloned().unwrap_or_default();
        let get = |k: &str| {
            head.get(k)
                .or_else(|| trailers.get(k))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Answer {
            status: get("grpc-status"),
            message: get("grpc-message").unwrap_or_default(),
        }
    }
}

fn unknown_grpc_method_is_refused(e: &Engine) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let p = proxy(e, &[]);
    rt.block_on(async {
        let a = raw::call(&p.socket, "/moby.buildkit.v1.Control/NoSuchMethod", 0, &[]).await;
        a.refused_by_proxy("7", "PERMISSION_DENIED", e.name);
        assert!(
            a.message.contains("rule build.grpc_method"),
            "{}: {}",
            e.name,
            a.message
        );
        let a = raw::call(
            &p.socket,
            "/moby.buildkit.v1.frontend.LLBBridge/NewContainer",
            0,
            &[],
        )
        .await;
        assert_eq!(a.status.as_deref(), Some("7"), "{}", e.name);
        // A known read-only method goes through the same connection kind to the daemon.
        let a = raw::call(&p.socket, "/moby.buildkit.v1.Control/ListWorkers", 0, &[]).await;
        assert_eq!(
            a.status.as_deref(),
            Some("0"),
            "{}: ListWorkers: {}",
            e.name,
            a.message
        );
        // An unparseable Solve message ends its stream with an error; it is not forwarded.
        let a = raw::call(
            &p.socket,
            "/moby.buildkit.v1.Control/Solve",
            0,
            &[0xff, 0xff, 0xff, 0xff],
        )
        .await;
        a.refused_by_proxy("3", "INVALID_ARGUMENT", e.name);
        let a = raw::call(
            &p.socket,
            "/moby.buildkit.v1.Control/Solve",
            1,
            &[0x0a, 0x01, 0x61],
        )
        .await;
        a.refused_by_proxy("3", "compressed", e.name);
        // A message over the cap is refused.
        let big = vec![0u8; (16 << 20) + 1];
        let a = raw::call(&p.socket, "/moby.buildkit.v1.Control/Solve", 0, &big).await;
        a.refused_by_proxy("8", "RESOURCE_EXHAUSTED", e.name);
    });
    let log = p.audit_log();
    assert!(
        log.contains("NoSuchMethod") && log.contains("\"decision\":\"deny\""),
        "{}: audited",
        e.name
    );
}

/// How every answer the proxy itself gives on `/grpc` starts (`grpc-message`), so a test can
/// tell the proxy's refusals from the daemon's answers.
const PROXY_PREFIX: &str = "dockwarden: ";

/// A valid `Control/Solve` of about `size` bytes, with its session ID (one no client opened):
/// the padding is the value of a frontend attribute the policy allows (`label:…`). Each call
/// gets its own ref (BuildKit refuses a second job with the same ID).
fn padded_solve(size: usize) -> (Vec<u8>, String) {
    use dockwarden::policy::grpc::messages::ControlSolveRequest;
    use prost::Message;
    let session = unique("nosession");
    let req = ControlSolveRequest {
        r#ref: unique("bigsolve"),
        frontend: "dockerfile.v0".into(),
        session: session.clone(),
        frontend_attrs: [("label:dwt-padding".to_owned(), "p".repeat(size))]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    (req.encode_to_vec(), session)
}

/// Large Solves under the proxy's 16 MiB cap are read, judged and forwarded whole; the answer
/// is the daemon's (the same status as the same call made straight to the daemon), never one of
/// the proxy's refusals, which all start with `dockwarden: `. The daemon's BuildKit has its own
/// 4 MiB receive limit (grpc-go's default): a 3.5 MiB Solve is processed by BuildKit, an 8 MiB
/// one is refused by the daemon, whose message counts the proxy's appended rewrite.
fn large_solve_under_the_cap_reaches_the_daemon(e: &Engine) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let p = proxy(e, &[]);
    let limit = Duration::from_secs(120);
    for size in [(7 << 20) / 2, 8 << 20] {
        let (first, _) = padded_solve(size);
        let (msg, session) = padded_solve(size);
        let (direct, through) = rt.block_on(async {
            let direct = tokio::time::timeout(
                limit,
                raw::call(&e.socket, "/moby.buildkit.v1.Control/Solve", 0, &first),
            )
            .await
            .expect("direct call timed out");
            let through = tokio::time::timeout(
                limit,
                raw::call(&p.socket, "/moby.buildkit.v1.Control/Solve", 0, &msg),
            )
            .await
            .expect("call through the proxy timed out");
            (direct, through)
        });
        println!(
            "engine {}: a {}-byte Solve: straight to the daemon {:?} `{}`; through the proxy {:?} `{}`",
            e.name,
            msg.len(),
            direct.status,
            direct.message,
            through.status,
            through.message
        );
        assert!(
            !through.message.starts_with(PROXY_PREFIX),
            "{}: the proxy answered: {:?} {}",
            e.name,
            through.status,
            through.message
        );
        assert!(through.status.is_some(), "{}: no gRPC status", e.name);
        assert_eq!(
            through.status, direct.status,
            "{}: the daemon's answer, as straight to it: {} / {}",
            e.name, through.message, direct.message
        );
        if msg.len() < 4 << 20 {
            // BuildKit read the whole message: it looked for the session the message names.
            assert!(
                through
                    .message
                    .contains(&format!("no active session for {session}")),
                "{}: BuildKit processed the Solve: {}",
                e.name,
                through.message
            );
        } else {
            // grpc-go's own refusal names the size it received: the client's message plus the
            // proxy's `cgroup-parent` rewrite, so the proxy forwarded all of it.
            let received = format!(
                "received message larger than max ({} vs. ",
                msg.len() + rewrite_len(&p)
            );
            assert!(
                through.message.contains(&received),
                "{}: {} (expected `{received}`)",
                e.name,
                through.message
            );
        }
    }
    let log = p.audit_log();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("/moby.buildkit.v1.Control/Solve")
                && l.contains("\"decision\":\"allow\""))
            .count(),
        2,
        "{}: both Solves were judged and allowed: {log}",
        e.name
    );
}

/// The bytes the proxy appends to a Solve with a frontend, as its audit log names them: on
/// Engine 26.1 the frontend attributes `cgroup-parent` (its parent) and `cmdline` (empty), one
/// map entry of field 7 each; on 20.10 none (the daemon's own cgroup parent places the steps).
fn rewrite_len(p: &Proxy) -> usize {
    use dockwarden::policy::grpc::messages::ControlSolveRequest;
    use prost::Message;
    let log = p.audit_log();
    let mut attrs = std::collections::HashMap::new();
    if let Some(parent) = log.lines().find_map(|l| {
        l.split("cgroup-parent` set to `")
            .nth(1)
            .and_then(|r| r.split('`').next())
            .map(str::to_owned)
    }) {
        attrs.insert("cgroup-parent".to_owned(), parent);
    }
    if log.contains("frontend attribute `cmdline` set") {
        attrs.insert("cmdline".to_owned(), String::new());
    }
    ControlSolveRequest {
        frontend_attrs: attrs,
        ..Default::default()
    }
    .encode_to_vec()
    .len()
}

/// Removes a test's parent cgroup once its processes are gone (best effort).
struct CgroupCleanup(String);

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        for ctl in ["memory", "pids"] {
            let dir = format!("/sys/fs/cgroup/{ctl}/{}", self.0);
            // BuildKit leaves `buildkit/` beneath the parent; remove the tree bottom-up.
            let mut dirs = Vec::new();
            collect_dirs(Path::new(&dir), &mut dirs);
            for d in dirs.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

fn collect_dirs(d: &Path, out: &mut Vec<PathBuf>) {
    if !d.is_dir() {
        return;
    }
    out.push(d.to_owned());
    for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_dirs(&e.path(), out);
        }
    }
}

/// Every process in a cgroup tree (cgroup v1 `pids` hierarchy).
fn procs_in(root: &Path) -> Vec<i32> {
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs);
    dirs.iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Engine 26.1 only: the BuildKit of 20.10 ignores the `cgroup-parent` frontend attribute (its
/// RUN steps stay under the daemon's cgroup parent, docs/limits.md); the daemon's own
/// `cgroup-parent` is what places them there, shown by
/// `run_step_budget_holds_on_engine_20_10_with_the_daemon_cgroup_parent`.
/// The budget's memory use (cgroup v1, hierarchical: its children's pages count).
fn memory_usage(name: &str) -> u64 {
    std::fs::read_to_string(format!(
        "/sys/fs/cgroup/memory/{name}/memory.usage_in_bytes"
    ))
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}

/// Builds, with `build` (a buildx or 20.10 CLI command with every argument but the context), a
/// RUN step that writes 32 MiB into its `/dev/shm` (a tmpfs: the pages stay charged to the
/// step's memory cgroup while it lives) and then sleeps. While it sleeps, the budget `name`'s
/// `memory.usage_in_bytes` is sampled; then the sleep is ended and the build must finish.
/// Asserts the step's memory cgroup is beneath the budget and the budget rose by the 32 MiB.
fn run_step_memory_is_in_the_budget(p: &Proxy, name: &str, label: &str, mut build: Command) {
    let ctx = context(
        p,
        &format!(
            "holdmem-{}",
            label
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect::<String>()
        ),
        &format!(
            "FROM {IMAGE}\nRUN grep -E 'pids|memory' /proc/self/cgroup; dd if=/dev/zero of=/dev/shm/hold bs=1048576 count=32 2>&1; sleep 1000 || true; \
             echo HELD-$(($(wc -c < /dev/shm/hold) >> 20))-MIB\n"
        ),
    );
    let pids = PathBuf::from(format!("/sys/fs/cgroup/pids/{name}"));
    let before = memory_usage(name);
    let log = p.workspace.join(format!(
        "{}.log",
        ctx.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("holdmem")
    ));
    let f = std::fs::File::create(&log).expect("log");
    build
        .arg(&ctx)
        .stdout(Stdio::from(f.try_clone().expect("dup")))
        .stderr(Stdio::from(f));
    let mut child = build.spawn().expect("build");
    let mut held = None;
    for _ in 0..3000 {
        let sleeps: Vec<i32> = procs_in(&pids)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect();
        if !sleeps.is_empty() {
            held = Some(memory_usage(name));
            for pid in &sleeps {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
            break;
        }
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait().expect("wait");
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    let held = held.unwrap_or_else(|| {
        panic!("{label}: the step's sleep never appeared in the budget's pids cgroups: {out}")
    });
    let rise = held.saturating_sub(before);
    println!(
        "{label}: the RUN step holding 32 MiB in /dev/shm: budget memory.usage_in_bytes {before} -> {held} (+{} MiB)",
        rise >> 20
    );
    assert!(
        status.success() && out.contains("HELD-32-MIB"),
        "{label}: {out}"
    );
    assert!(
        out.contains(&format!("memory:/{name}/")),
        "{label}: the step's memory cgroup is beneath the budget: {out}"
    );
    assert!(
        rise >= 30 << 20,
        "{label}: the budget's memory use rose by {rise} bytes only while the step held 32 MiB: {out}"
    );
}

/// A buildx build through `p` with every argument but the context.
fn buildx_cmd(p: &Proxy, cli: &str) -> Command {
    let mut c = p.cmd(cli);
    c.env("BUILDX_NO_DEFAULT_ATTESTATIONS", "1").args([
        "buildx",
        "build",
        "--progress=plain",
        "--pull=false",
        "--no-cache",
    ]);
    c
}

#[test]
fn run_step_budget_holds_over_grpc() {
    on_engine("26.1", run_step_budget_holds_over_grpc_on)
}

fn run_step_budget_holds_over_grpc_on(e: &Engine) {
    let Some(cli) = buildx() else { return };
    assert!(
        Path::new("/sys/fs/cgroup/pids").is_dir() && Path::new("/sys/fs/cgroup/memory").is_dir(),
        "this test reads the cgroup v1 pids and memory hierarchies (the proxy's budget uses them)"
    );
    let name = format!("dwt_bkpids_{}", std::process::id());
    let _cg = CgroupCleanup(name.clone());
    let p = proxy(e, &["--cgroup-name", &name, "--pids-budget", "40"]);
    let root = PathBuf::from(format!("/sys/fs/cgroup/pids/{name}"));
    let current = || {
        std::fs::read_to_string(root.join("pids.current"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert_eq!(current(), 0, "the budget starts empty");

    // 12 processes that live until the test ends them: they are counted in the budget.
    let ctx = context(
        &p,
        "budget",
        &format!(
            "FROM {IMAGE}\nRUN grep -E 'pids|memory' /proc/self/cgroup; for i in $(seq 12); do sleep 1000 & done; sleep 1000 || true; echo BUDGET-$((40+2))\n"
        ),
    );
    let log = p.workspace.join("budget-build.log");
    let mut c = p.cmd(cli);
    c.env("BUILDX_NO_DEFAULT_ATTESTATIONS", "1")
        .args([
            "buildx",
            "build",
            "--progress=plain",
            "--pull=false",
            "--no-cache",
        ])
        .arg(&ctx);
    let f = std::fs::File::create(&log).expect("log");
    c.stdout(Stdio::from(f.try_clone().expect("dup")))
        .stderr(Stdio::from(f));
    let mut child = c.spawn().expect("buildx");
    // Wait (bounded) until the step's 13 sleeps exist, then end them.
    let sleeping = || -> Vec<i32> {
        procs_in(&root)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            })
            .collect()
    };
    let mut seen = 0;
    let mut sleeps = Vec::new();
    for _ in 0..3000 {
        sleeps = sleeping();
        if sleeps.len() >= 13 {
            seen = current();
            break;
        }
        if child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in &sleeps {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    let status = child.wait().expect("wait");
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    println!(
        "engine {}: the RUN step's processes in the budget: pids.current = {seen}, {} sleeps ended by the test",
        e.name,
        sleeps.len()
    );
    assert!(seen >= 13, "{}: pids.current was {seen}: {out}", e.name);
    assert!(
        sleeps.len() >= 13,
        "{}: {} sleeps found in the budget's cgroups",
        e.name,
        sleeps.len()
    );
    assert!(
        status.success() && out.contains("BUDGET-42"),
        "{}: {out}",
        e.name
    );
    assert!(
        out.contains(&format!("pids:/{name}/")),
        "{}: the step ran beneath the parent: {out}",
        e.name
    );

    // Its memory is counted in the budget too.
    run_step_memory_is_in_the_budget(
        &p,
        &name,
        &format!("engine {}: /grpc", e.name),
        buildx_cmd(&p, cli),
    );

    // A fork loop past the budget's pids.max (40) is stopped by the kernel.
    let ctx = context(
        &p,
        "forkloop",
        &format!(
            "FROM {IMAGE}\nRUN for i in $(seq 100); do sleep 30 & done; echo FORKED-$((40+2))\n"
        ),
    );
    let o = buildx_build(&p, cli, &["--no-cache", ctx.to_str().expect("utf-8")]);
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("can't fork") && !out.contains("FORKED-42"),
        "{}: {out}",
        e.name
    );
    for pid in procs_in(&root) {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
}

per_engine!(
    host_network_run_step_is_refused_over_grpc,
    insecure_entitlement_is_refused_over_grpc,
    daemon_fetched_remote_context_over_grpc_is_refused,
    buildx_prune_follows_the_prune_policy,
    legitimate_buildx_build_with_cache_mount_secret_and_two_stages_works,
    docker_compose_v2_build_works_over_grpc,
    buildx_build_with_a_cgroup_parent_is_refused,
    buildx_build_with_default_attestations_works,
    unknown_grpc_method_is_refused,
    large_solve_under_the_cap_reaches_the_daemon,
);

#[test]
fn run_step_budget_holds_on_engine_20_10_with_the_daemon_cgroup_parent() {
    run_step_budget_holds_with_the_daemon_cgroup_parent("20.10");
}

#[test]
fn run_step_budget_holds_on_engine_26_1_with_the_daemon_cgroup_parent() {
    run_step_budget_holds_with_the_daemon_cgroup_parent("26.1");
}

/// Both BuildKit paths (`/grpc` from buildx, `/build?version=2` from the 20.10 CLI) on a private
/// daemon of the engine started with `--cgroup-parent` set to the budget's parent.
fn run_step_budget_holds_with_the_daemon_cgroup_parent(engine: &'static str) {
    let Some(cli) = buildx() else { return };
    let Some(cli2010) = cli2010() else {
        assert!(
            !engines_required(),
            "no Docker CLI 20.10 at /usr/bin/docker, but DW_ENGINES_REQUIRED is set"
        );
        println!("skipped: no Docker CLI 20.10 for the /build?version=2 path");
        return;
    };
    let tag = format!("grpcbk{}-{}", std::process::id(), engine.replace('.', "_"));
    let name = format!(
        "dwt_pdbk_{}_{}",
        std::process::id(),
        engine.replace('.', "_")
    );
    let _cg = CgroupCleanup(name.clone());
    let Some(base) = installed(engine) else {
        return;
    };
    let d = PrivateDaemon::start_with(
        &base,
        &tag,
        DaemonOptions {
            cgroup_parent: Some(format!("/{name}")),
            remove_dir: true,
            ..DaemonOptions::default()
        },
    );
    let e = Engine {
        name: if engine == "26.1" {
            "26.1 (private)"
        } else {
            "20.10 (private)"
        },
        socket: d.socket.clone(),
        netns: None,
        prefix: None,
    };
    let p = proxy(&e, &["--cgroup-name", &name, "--pids-budget", "40"]);
    // The proxy read the daemon's own settings from its process: entitlements left at their
    // defaults (its daemon.json is `{}`) are a start-up error, and its `--cgroup-parent` flag is
    // the budget's, so nothing is said about placing builds.
    let log = p.log();
    assert!(
        log.contains("ERROR")
            && log.contains("network-host")
            && log.contains("/daemon.json")
            && !log.contains("limits.build_budget"),
        "{log}"
    );

    let ctx = context(
        &p,
        "pdfork",
        &format!(
            "FROM {IMAGE}\nRUN grep -E 'pids|memory' /proc/self/cgroup; for i in $(seq 100); do sleep 30 & done; echo FORKED-$((40+2))\n"
        ),
    );
    let ctx = ctx.to_str().expect("utf-8");
    // /grpc (buildx).
    let o = buildx_build(&p, cli, &["--no-cache", ctx]);
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("can't fork") && !out.contains("FORKED-42"),
        "/grpc: {out}"
    );
    assert!(
        out.contains(&format!("pids:/{name}/buildkit/")),
        "/grpc: the step ran beneath the parent: {out}"
    );
    // /build?version=2 (the 20.10 CLI with BuildKit).
    let mut c = p.cmd(cli2010);
    c.env("DOCKER_BUILDKIT", "1")
        .args(["build", "--progress=plain", "--no-cache", ctx]);
    let o = run_with_timeout(&mut c, None, Duration::from_secs(300));
    let out = all_output(&o);
    assert!(
        !o.status.success() && out.contains("can't fork") && !out.contains("FORKED-42"),
        "/build?version=2: {out}"
    );
    assert!(
        out.contains(&format!("pids:/{name}/buildkit/")),
        "/build?version=2: {out}"
    );
    // The steps' memory is in the budget on both paths.
    run_step_memory_is_in_the_budget(
        &p,
        &name,
        &format!("engine {}: /grpc", e.name),
        buildx_cmd(&p, cli),
    );
    let mut c = p.cmd(cli2010);
    c.env("DOCKER_BUILDKIT", "1")
        .args(["build", "--progress=plain", "--no-cache"]);
    run_step_memory_is_in_the_budget(
        &p,
        &name,
        &format!("engine {}: /build?version=2", e.name),
        c,
    );
    let root = PathBuf::from(format!("/sys/fs/cgroup/pids/{name}"));
    for pid in procs_in(&root) {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    let _ = Command::new("/usr/bin/docker")
        .env("DOCKER_HOST", d.host())
        .args(["builder", "prune", "-af"])
        .output();
}
