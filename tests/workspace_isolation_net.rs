//! Issue 24, point 3 ("Network, the same for both runtimes") and the network checks of its
//! isolation tests: every workspace, standard or docker-compose, has a network namespace of
//! its own with one link to the host (`runtime::wsnet`). Each check runs as the workspace
//! user through `ws exec`.
//!
//! Test traffic stays on this machine: it goes to loopback, to the host's own addresses, to
//! the workspaces' namespaces and to a namespace the test makes (`Outside`), which also holds
//! `169.254.169.254` (the host routes that one /32 to it while the test runs, so a probe that
//! got through would land there, never on a real metadata service).
//!
//! Needs root, `ip`, `iptables`, `bash` and `timeout`; skips otherwise, except under CI
//! (`DW_ENGINES_REQUIRED` / `DW_WORKSPACE_ENGINE`), where a skip fails. The docker-compose test
//! also needs a dockerd (`DOCKWARDEN_TEST_DOCKERD`, default `/usr/sbin/dockerd`) and the host
//! daemon's `dockwarden-test:latest`.
#![allow(clippy::unwrap_used)]

mod common;
mod workspace_support;

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use workspace_support::Svc;

fn required() -> Option<String> {
    ["DW_WORKSPACE_ENGINE", "DW_ENGINES_REQUIRED"]
        .iter()
        .find_map(|k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| format!("{k}={v}"))
        })
}

fn skip_reason() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root (network namespaces, iptables)".into());
    }
    for tool in ["ip", "iptables", "bash", "timeout"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("no `{tool}` on PATH"));
        }
    }
    None
}

macro_rules! skip_unless {
    ($why:expr) => {
        if let Some(why) = $why {
            if let Some(req) = required() {
                panic!("this suite must run here ({req}) but cannot: {why}");
            }
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn sh(cmd: &str) -> String {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        out.status.success(),
        "`{cmd}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `cmd` as the workspace user; returns (exit code, stdout, stderr).
fn exec(svc: &Svc, id: &str, cmd: &str) -> (i64, String, String) {
    let r = svc.ok(
        "POST",
        &format!("/v1/workspaces/{id}/exec"),
        Some(json!({ "cmd": cmd, "timeout_ms": 180_000 })),
    );
    (
        r["exit_code"].as_i64().unwrap(),
        r["stdout"].as_str().unwrap().to_string(),
        r["stderr"].as_str().unwrap().to_string(),
    )
}

fn ok(svc: &Svc, id: &str, cmd: &str) -> String {
    let (code, out, err) = exec(svc, id, cmd);
    assert_eq!(code, 0, "`{cmd}` in {id}: stdout={out} stderr={err}");
    out
}

/// TCP connects from inside workspace `id`, all at once with a 3 s limit each; true where
/// the connection was made.
fn probe(svc: &Svc, id: &str, targets: &[(Ipv4Addr, u16)]) -> Vec<bool> {
    let mut cmd = String::new();
    for (i, (ip, port)) in targets.iter().enumerate() {
        cmd.push_str(&format!(
            "( timeout 3 bash -c '</dev/tcp/{ip}/{port}' 2>/dev/null && echo '{i} open' || echo '{i} closed' ) & "
        ));
    }
    cmd.push_str("wait");
    let out = ok(svc, id, &cmd);
    (0..targets.len())
        .map(|i| {
            let line = out
                .lines()
                .find(|l| l.split_whitespace().next() == Some(&i.to_string()))
                .unwrap_or_else(|| panic!("no probe result {i} in {out}"));
            line.ends_with("open")
        })
        .collect()
}

/// The interface names `ip -o link` prints (`eth0@if12` is `eth0`).
fn link_names(ip_o_link: &str) -> BTreeSet<String> {
    ip_o_link
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// The IPv4 addresses `ip -o -4 addr` prints.
fn addrs(ip_o_addr: &str) -> BTreeSet<Ipv4Addr> {
    ip_o_addr
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            f.position(|w| w == "inet")?;
            f.next()?.split('/').next()?.parse().ok()
        })
        .collect()
}

/// The address of `dev` inside workspace `id`, and its default gateway (if any).
fn inside(svc: &Svc, id: &str) -> (Ipv4Addr, Option<Ipv4Addr>) {
    let a = addrs(&ok(svc, id, "ip -o -4 addr show dev eth0"));
    let gw = ok(svc, id, "ip -4 route show default")
        .split_whitespace()
        .skip_while(|w| *w != "via")
        .nth(1)
        .and_then(|g| g.parse().ok());
    (*a.iter().next().expect("eth0 has an address"), gw)
}

fn host_docker0() -> Option<Ipv4Addr> {
    let out = Command::new("ip")
        .args(["-o", "-4", "addr", "show", "docker0"])
        .output()
        .ok()?;
    addrs(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .next()
}

/// Every host IPv4 address but loopback's.
fn host_addrs() -> BTreeSet<Ipv4Addr> {
    addrs(&sh("ip -o -4 addr"))
        .into_iter()
        .filter(|a| !a.is_loopback())
        .collect()
}

/// One at a time: each holds the host's `169.254.169.254/32` route while it lives.
static OUTSIDE: Mutex<()> = Mutex::new(());

/// A namespace of the test's own standing for "anything else": a veth to the host with a /30
/// of `198.18.0.0/15`, a listener on its address, and `169.254.169.254` on it too.
struct Outside {
    name: String,
    host_if: String,
    addr: Ipv4Addr,
    port: u16,
    /// Answers `outside` to every connection until told to stop.
    server: Option<(
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    )>,
    _one: std::sync::MutexGuard<'static, ()>,
}

impl Outside {
    fn start() -> Outside {
        let one = OUTSIDE.lock().unwrap_or_else(|p| p.into_inner());
        let pid = std::process::id();
        let (name, host_if) = (
            format!("dwtest-egress-{pid}"),
            format!("dwt{}", pid % 1_000_000),
        );
        let third = (pid % 250) as u8;
        let (host, addr) = (
            Ipv4Addr::new(198, 18, third, 1),
            Ipv4Addr::new(198, 18, third, 2),
        );
        assert!(
            !sh("ip -4 route show 198.18.0.0/15 root 198.18.0.0/15").contains("198.18"),
            "the host routes 198.18.0.0/15 already; the test's outside namespace would clash"
        );
        let meta = sh("ip -4 route show 169.254.169.254/32");
        assert!(
            meta.trim().is_empty(),
            "the host routes 169.254.169.254 itself: {meta}"
        );
        let o = Outside {
            name,
            host_if,
            addr,
            port: 0,
            server: None,
            _one: one,
        };
        let (n, h) = (&o.name, &o.host_if);
        sh(&format!(
            "ip netns add {n} && ip link add {h} type veth peer name eth0 netns {n} && \
             ip addr add {host}/30 dev {h} && ip link set {h} up && \
             ip -n {n} addr add {addr}/30 dev eth0 && ip -n {n} addr add 169.254.169.254/32 dev eth0 && \
             ip -n {n} link set eth0 up && ip -n {n} link set lo up && \
             ip route add 169.254.169.254/32 via {addr} dev {h}"
        ));
        let ns = format!("/run/netns/{n}");
        let listener = listen_in(&ns, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
        let mut o = o;
        o.port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = stop.clone();
        let serve = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                if let Ok(mut c) = conn {
                    let _ = std::io::Write::write_all(&mut c, b"outside\n");
                }
            }
        });
        o.server = Some((stop, serve));
        o
    }

    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        // The listener holds the namespace: closed first (woken by one last connection),
        // then the link and the name go.
        if let Some((stop, serve)) = self.server.take() {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = TcpStream::connect_timeout(
                &SocketAddr::from((self.addr, self.port)),
                Duration::from_secs(2),
            );
            let _ = serve.join();
        }
        let _ = Command::new("ip")
            .args(["route", "del", "169.254.169.254/32", "dev", &self.host_if])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A listener made by a thread that joined the namespace at `ns` (it stays in there).
fn listen_in(ns: &str, at: SocketAddr) -> TcpListener {
    let f = std::fs::File::open(ns).unwrap();
    std::thread::spawn(move || {
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        TcpListener::bind(at).unwrap()
    })
    .join()
    .unwrap()
}

/// The host itself reaches `what`: a probe from a workspace that fails is the wall's doing.
fn control(ip: Ipv4Addr, port: u16, what: &str) {
    TcpStream::connect_timeout(&SocketAddr::from((ip, port)), Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("control: the host cannot reach {what} ({ip}:{port}): {e}"));
}

fn create(svc: &Svc, body: Value) -> (String, u32) {
    let (status, v) = svc.api("POST", "/v1/workspaces", Some(body));
    assert_eq!(status, 201, "create: {v}");
    let ws = &v["workspace"];
    (
        ws["id"].as_str().unwrap().to_string(),
        ws["uid"].as_u64().unwrap() as u32,
    )
}

fn assert_closed(svc: &Svc, id: &str, targets: &[(&str, Ipv4Addr, u16)]) {
    let t: Vec<(Ipv4Addr, u16)> = targets.iter().map(|(_, a, p)| (*a, *p)).collect();
    for ((what, a, p), open) in targets.iter().zip(probe(svc, id, &t)) {
        assert!(!open, "{what} ({a}:{p}) is reachable from workspace {id}");
    }
}

#[test]
fn a_standard_workspace_has_its_own_link_and_reaches_neither_the_host_nor_another_workspace() {
    skip_unless!(skip_reason());
    let outside = Outside::start();
    let svc = Svc::start(27800, &["--no-docker"], &[]);
    let (a, uid_a) = create(&svc, json!({ "id": "na", "runtime": "standard" }));
    let (b, _) = create(&svc, json!({ "id": "nb", "runtime": "standard" }));

    // `lo` and the workspace's own link, nothing of the host's.
    let names = link_names(&ok(&svc, &a, "ip -o link"));
    assert_eq!(
        names,
        BTreeSet::from(["lo".to_string(), "eth0".to_string()])
    );
    assert!(
        Path::new(&format!("/sys/class/net/dwe{uid_a}")).exists(),
        "the host side is `dwe{uid_a}`"
    );
    let seen = addrs(&ok(&svc, &a, "ip -o -4 addr"));
    assert!(
        seen.is_disjoint(&host_addrs()),
        "host addresses seen inside: {seen:?}"
    );
    let (a_addr, a_gw) = inside(&svc, &a);
    let gw = a_gw.expect("a default route through the host side");
    assert!(
        a_addr.octets()[..2] == [10, 127],
        "{a_addr} is a link of 10.127.0.0/16"
    );

    // The host's loopback services and everything of the host itself: a listener on every
    // host address, reached from the host (control) but not from the workspace.
    let local = TcpListener::bind("127.0.0.1:0").unwrap();
    let any = TcpListener::bind("0.0.0.0:0").unwrap();
    let (lp, ap) = (
        local.local_addr().unwrap().port(),
        any.local_addr().unwrap().port(),
    );
    control(gw, ap, "the host side of the link");
    let mut closed = vec![
        ("the host's 127.0.0.1 service", Ipv4Addr::LOCALHOST, lp),
        ("the host side of the link", gw, ap),
    ];
    if let Some(d0) = host_docker0() {
        control(d0, ap, "the host's docker0 gateway");
        closed.push(("the host's docker0 gateway", d0, ap));
    }
    control(
        Ipv4Addr::new(169, 254, 169, 254),
        outside.port(),
        "169.254.169.254 (the outside namespace)",
    );
    closed.push((
        "169.254.169.254",
        Ipv4Addr::new(169, 254, 169, 254),
        outside.port(),
    ));

    // Another workspace's listener: reached from inside it (control), not from `a`.
    ok(
        &svc,
        &b,
        "(busybox httpd -f -p 0.0.0.0:8080 -h . >/dev/null 2>&1 &) ; sleep 0.3",
    );
    let (b_addr, _) = inside(&svc, &b);
    assert_eq!(
        probe(&svc, &b, &[(b_addr, 8080)]),
        vec![true],
        "control: b reaches its own listener"
    );
    closed.push(("workspace b's listener", b_addr, 8080));
    assert_closed(&svc, &a, &closed);

    // Anything else goes out (masqueraded): the test's outside namespace, reached from the
    // host (control) and from the workspace.
    control(outside.addr, outside.port(), "the outside namespace");
    assert_eq!(
        probe(&svc, &a, &[(outside.addr, outside.port())]),
        vec![true],
        "egress to the outside namespace"
    );

    // Released at delete: no link, no namespace mount.
    svc.ok("DELETE", &format!("/v1/workspaces/{a}"), None);
    assert!(
        !Path::new(&format!("/sys/class/net/dwe{uid_a}")).exists(),
        "the link goes at delete"
    );
    let netns = format!("workspaces/{a}/netns");
    assert!(
        !dockwarden::sys::mountinfo::own()
            .iter()
            .any(|m| m.point.ends_with(&netns)),
        "the namespace is unmounted at delete"
    );
}

#[test]
fn with_egress_none_a_workspace_reaches_nothing_outside() {
    skip_unless!(skip_reason());
    let outside = Outside::start();
    let svc = Svc::start(27850, &["--no-docker", "--egress", "none"], &[]);
    let (a, uid) = create(&svc, json!({ "id": "ea", "runtime": "standard" }));
    assert!(
        Path::new(&format!("/sys/class/net/dwi{uid}")).exists(),
        "the host side of an egress-off link is `dwi{uid}`"
    );
    assert_eq!(
        link_names(&ok(&svc, &a, "ip -o link")),
        BTreeSet::from(["lo".to_string(), "eth0".to_string()])
    );
    let (_, gw) = inside(&svc, &a);
    assert_eq!(gw, None, "no default route");
    control(outside.addr, outside.port(), "the outside namespace");
    assert_closed(
        &svc,
        &a,
        &[("the outside namespace", outside.addr, outside.port())],
    );
    // Even with a route of its own (root's doing here, through the namespace file), the host
    // forwards nothing from the link.
    let ns = svc.state.join("workspaces").join(&a).join("netns");
    // The host side is the /31's other address (the even one).
    let host_side = Ipv4Addr::from(u32::from(inside(&svc, &a).0) & !1);
    sh(&format!(
        "nsenter --net={} ip route add default via {host_side}",
        ns.display()
    ));
    assert_closed(
        &svc,
        &a,
        &[(
            "the outside namespace, with a route",
            outside.addr,
            outside.port(),
        )],
    );
}

fn dockerd() -> String {
    std::env::var("DOCKWARDEN_TEST_DOCKERD").unwrap_or_else(|_| "/usr/sbin/dockerd".into())
}

fn docker_skip_reason() -> Option<String> {
    skip_reason().or_else(|| {
        if !Path::new(&dockerd()).is_file() {
            return Some(format!("no dockerd at {}", dockerd()));
        }
        let img = Command::new("docker")
            .args(["image", "inspect", "dockwarden-test:latest"])
            .output();
        (!img.is_ok_and(|o| o.status.success()))
            .then(|| "the host daemon has no dockwarden-test:latest image to save".into())
    })
}

/// `docker save` of the test image, readable by every workspace uid.
fn image_tar(dir: &Path) -> PathBuf {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let tar = dir.join("dockwarden-test.tar");
    let st = Command::new("docker")
        .args(["save", "-o"])
        .arg(&tar)
        .arg("dockwarden-test:latest")
        .status()
        .unwrap();
    assert!(st.success(), "docker save of the test image");
    std::fs::set_permissions(&tar, std::fs::Permissions::from_mode(0o644)).unwrap();
    tar
}

/// Takes the service's docker workspaces down before the service goes (their daemons are
/// root's: the uid sweep of `Svc`'s drop does not reach them).
struct DeleteAll<'a>(&'a Svc);

impl Drop for DeleteAll<'_> {
    fn drop(&mut self) {
        if let Ok((_, list)) =
            std::panic::catch_unwind(|| self.0.api("GET", "/v1/workspaces", None))
        {
            for w in list.as_array().cloned().unwrap_or_default() {
                let id = w["id"].as_str().unwrap_or_default().to_string();
                let _ = common::http(
                    &self.0.socket,
                    "DELETE",
                    &format!("/v1/workspaces/{id}"),
                    b"",
                );
            }
        }
    }
}

#[test]
fn a_compose_workspace_gets_the_same_walls_and_its_published_ports_and_containers_still_work() {
    skip_unless!(docker_skip_reason());
    let outside = Outside::start();
    let images = tempfile::tempdir().unwrap();
    let tar = image_tar(images.path());
    let svc = Svc::start(
        27900,
        &[
            "--dockerd",
            &dockerd(),
            "--preload-image-tar",
            &tar.display().to_string(),
        ],
        &[],
    );
    std::fs::set_permissions(svc.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let _delete = DeleteAll(&svc);
    let repo = svc.dir.path().join("compose-repo");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/workspace/make-compose-repo.sh");
    assert!(
        Command::new("sh")
            .arg(script)
            .arg(&repo)
            .status()
            .unwrap()
            .success()
    );
    let (c, uid_c) = create(
        &svc,
        json!({ "id": "nc", "repo": repo.display().to_string(), "runtime": "docker-compose" }),
    );
    let (s, _) = create(&svc, json!({ "id": "ns", "runtime": "standard" }));
    ok(&svc, &c, "docker compose up -d --wait");

    // Its links: loopback, its own link, and what its private daemon made (its bridges and
    // their containers' veths); no host address.
    let names = link_names(&ok(&svc, &c, "ip -o link"));
    assert!(names.contains("eth0") && names.contains("lo"), "{names:?}");
    let others: Vec<&String> = names
        .iter()
        .filter(|n| {
            !["lo", "eth0", "docker0"].contains(&n.as_str())
                && !n.starts_with("br-")
                && !n.starts_with("veth")
        })
        .collect();
    assert!(
        others.is_empty(),
        "links that are not the workspace's own: {others:?}"
    );
    assert!(
        Path::new(&format!("/sys/class/net/dwe{uid_c}")).exists(),
        "the daemon's namespace got the link"
    );
    let seen = addrs(&ok(&svc, &c, "ip -o -4 addr"));
    assert!(
        seen.is_disjoint(&host_addrs()),
        "host addresses seen inside: {seen:?}"
    );
    let (c_addr, c_gw) = inside(&svc, &c);
    let gw = c_gw.expect("a default route through the host side");

    // Published ports still answer on the workspace's loopback (control), and nowhere else.
    assert_eq!(
        probe(&svc, &c, &[(Ipv4Addr::LOCALHOST, 8080)]),
        vec![true],
        "the published port answers inside"
    );
    let page = ok(
        &svc,
        &c,
        "curl -sS --max-time 10 http://127.0.0.1:8080/index.html",
    );
    assert_eq!(page.trim(), "hello-from-web");
    // host.docker.internal: a container reaches a workspace service on 0.0.0.0.
    ok(
        &svc,
        &c,
        "mkdir -p hdi && echo from-the-workspace > hdi/index.html && (busybox httpd -f -p 0.0.0.0:8099 -h hdi >/dev/null 2>&1 &) ; sleep 0.3",
    );
    let hdi = ok(
        &svc,
        &c,
        "docker run --rm dockwarden-test:latest wget -qO- http://host.docker.internal:8099/index.html",
    );
    assert_eq!(hdi.trim(), "from-the-workspace");

    let local = TcpListener::bind("127.0.0.1:0").unwrap();
    let any = TcpListener::bind("0.0.0.0:0").unwrap();
    let (lp, ap) = (
        local.local_addr().unwrap().port(),
        any.local_addr().unwrap().port(),
    );
    control(gw, ap, "the host side of the link");
    let mut closed = vec![
        ("the host's 127.0.0.1 service", Ipv4Addr::LOCALHOST, lp),
        ("the host side of the link", gw, ap),
    ];
    if let Some(d0) = host_docker0() {
        control(d0, ap, "the host's docker0 gateway");
        closed.push(("the host's docker0 gateway", d0, ap));
    }
    control(
        Ipv4Addr::new(169, 254, 169, 254),
        outside.port(),
        "169.254.169.254 (the outside namespace)",
    );
    closed.push((
        "169.254.169.254",
        Ipv4Addr::new(169, 254, 169, 254),
        outside.port(),
    ));
    ok(
        &svc,
        &s,
        "(busybox httpd -f -p 0.0.0.0:8080 -h . >/dev/null 2>&1 &) ; sleep 0.3",
    );
    let (s_addr, _) = inside(&svc, &s);
    closed.push(("the standard workspace's listener", s_addr, 8080));
    assert_closed(&svc, &c, &closed);
    // And the other way: the compose workspace's published port and its daemon's bridge.
    let bridge = addrs(&ok(&svc, &c, "ip -o -4 addr show dev docker0"))
        .into_iter()
        .next()
        .expect("the daemon's docker0");
    assert_closed(
        &svc,
        &s,
        &[
            ("the compose workspace's published port", c_addr, 8080),
            ("the compose workspace's bridge", bridge, 8080),
        ],
    );

    // Egress, from the workspace and from its containers (masqueraded twice).
    assert_eq!(
        probe(&svc, &c, &[(outside.addr, outside.port())]),
        vec![true],
        "egress from the compose workspace"
    );
    let (code, out, err) = exec(
        &svc,
        &c,
        &format!(
            "docker run --rm dockwarden-test:latest nc -w 5 {} {} </dev/null",
            outside.addr,
            outside.port()
        ),
    );
    assert!(
        code == 0 && out.contains("outside"),
        "egress from a container: {code} {out} {err}"
    );
    let (_, out, _) = exec(
        &svc,
        &c,
        &format!(
            "docker run --rm dockwarden-test:latest nc -w 3 169.254.169.254 {} </dev/null",
            outside.port()
        ),
    );
    assert!(
        !out.contains("outside"),
        "a container reached 169.254.169.254"
    );

    // Released with the runtime: the link goes at kill (the namespace with the daemon).
    svc.ok("POST", &format!("/v1/workspaces/{c}/kill"), None);
    assert!(
        !Path::new(&format!("/sys/class/net/dwe{uid_c}")).exists(),
        "the link goes with the daemon's namespace"
    );
}

/// A standard workspace's network namespace is a runtime part: its host link deleted, upkeep
/// makes it again within 5 s, records the recovery, and commands reach the host again.
#[test]
fn a_standard_workspace_whose_link_is_deleted_gets_its_network_back() {
    skip_unless!(skip_reason());
    let svc = Svc::start(27950, &["--tick-ms", "100"], &[]);
    let (id, uid) = create(&svc, json!({ "id": "nl", "runtime": "standard" }));
    let r = svc.exec(&id, "ip -o link show | grep -c eth0 || true");
    assert_eq!(r["exit_code"], 0, "{r}");
    let link = format!("dwe{uid}");
    assert!(
        Path::new(&format!("/sys/class/net/{link}")).exists(),
        "no host link {link}"
    );
    let st = Command::new("ip")
        .args(["link", "del", &link])
        .status()
        .unwrap();
    assert!(st.success(), "ip link del {link}");
    let t0 = std::time::Instant::now();
    common::wait_until(
        Duration::from_secs(5),
        "the workspace's network made again",
        || {
            svc.ok("GET", &format!("/v1/workspaces/{id}"), None)["last_recovery"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("network namespace"))
        },
    );
    eprintln!("network made again in {} ms", t0.elapsed().as_millis());
    assert!(
        Path::new(&format!("/sys/class/net/{link}")).exists(),
        "the link is back"
    );
    let r = svc.exec(&id, "echo alive");
    assert_eq!(r["stdout"], "alive\n", "{r}");
    svc.ok("DELETE", &format!("/v1/workspaces/{id}"), None);
}
