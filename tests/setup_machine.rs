//! The machine `scripts/setup.sh` prepares (issue 25): the daemons it starts run with the
//! settings the proxy expects (`packaging/daemon.json`), checked on the running processes and
//! by the daemons' own behaviour; the merge of those settings into an existing daemon.json keeps
//! everything else; and packages of another suite come from the machine's own Debian source.

mod common;
use common::*;

use std::process::Command;
use std::time::Duration;

const TOP: &str = env!("CARGO_MANIFEST_DIR");

/// The running dockerd behind a pidfile: its pid and its configuration file's JSON.
fn running(pidfile: &str) -> (u32, serde_json::Value) {
    let pid: u32 = std::fs::read_to_string(pidfile)
        .unwrap_or_else(|e| panic!("{pidfile}: {e} (scripts/setup.sh starts the daemons)"))
        .trim()
        .parse()
        .expect("pid");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(args[0].ends_with("dockerd"), "{pidfile}: {args:?}");
    assert!(
        !args.iter().any(|a| a.starts_with("--cgroup-parent")),
        "set in the file, not as a flag: {args:?}"
    );
    let conf = args
        .iter()
        .position(|a| a == "--config-file")
        .map(|i| args[i + 1].clone())
        .unwrap_or_else(|| "/etc/docker/daemon.json".into());
    let text = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("{conf}: {e}"));
    (pid, serde_json::from_str(&text).expect("daemon.json"))
}

#[test]
fn the_machine_daemons_run_with_the_proxys_settings() {
    let want: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{TOP}/packaging/daemon.json")).expect("packaged"),
    )
    .expect("json");
    for e in engines() {
        let pidfile = if e.name == "20.10" {
            "/var/run/docker.pid"
        } else {
            "/run/docker26/docker.pid"
        };
        let (pid, conf) = running(pidfile);
        let ent = &conf["builder"]["Entitlements"];
        assert_eq!(
            ent["network-host"], false,
            "engine {} (pid {pid}): {conf}",
            e.name
        );
        assert_eq!(
            ent["security-insecure"], false,
            "engine {} (pid {pid}): {conf}",
            e.name
        );
        assert_eq!(
            conf["cgroup-parent"], want["cgroup-parent"],
            "engine {} (pid {pid}): {conf}",
            e.name
        );
        println!(
            "engine {} (dockerd {pid}): entitlements off, cgroup-parent {}",
            e.name, conf["cgroup-parent"]
        );
    }
}

/// What the daemons do with those settings, asked of them directly (not through the proxy):
/// a BuildKit step lands under the budget's parent, and the host-network entitlement is refused
/// by the daemon itself.
fn the_daemon_itself_places_steps_and_refuses_entitlements(e: &Engine) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM {IMAGE}\nRUN grep pids /proc/self/cgroup\n"),
    )
    .expect("Dockerfile");
    let mut c = Command::new(cli2010().expect("Docker CLI 20.10"));
    c.env("DOCKER_HOST", e.host())
        .env("DOCKER_BUILDKIT", "1")
        .args(["build", "--progress=plain", "--no-cache"])
        .arg(dir.path());
    let o = run_with_timeout(&mut c, None, Duration::from_secs(180));
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        o.status.success() && out.contains("pids:/dockwarden/buildkit/"),
        "engine {}: {out}",
        e.name
    );
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!("FROM {IMAGE}\nRUN --network=host echo HOSTNET-$((40+2))\n"),
    )
    .expect("Dockerfile");
    let mut c = Command::new(cli28().expect("Docker CLI 28 with buildx"));
    c.env("DOCKER_HOST", e.host())
        .env("BUILDX_NO_DEFAULT_ATTESTATIONS", "1")
        .args([
            "buildx",
            "build",
            "--progress=plain",
            "--pull=false",
            "--no-cache",
        ])
        .args(["--allow", "network.host"])
        .arg(dir.path());
    let o = run_with_timeout(&mut c, None, Duration::from_secs(180));
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        !o.status.success()
            && out.contains("network.host is not allowed by build daemon configuration")
            && !out.contains("HOSTNET-42"),
        "engine {}: {out}",
        e.name
    );
}

per_engine!(the_daemon_itself_places_steps_and_refuses_entitlements);

fn daemon_config(args: &[&str]) -> String {
    let o = Command::new(format!("{TOP}/scripts/daemon-config.py"))
        .args(args)
        .output()
        .expect("daemon-config.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("utf-8")
}

#[test]
fn the_proxys_settings_merge_into_a_daemon_json_keeping_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("daemon.json");
    // dockerd matches keys case-insensitively: the user's spelling is kept, not doubled.
    std::fs::write(
        &f,
        r#"{"debug": true, "Builder": {"gc": {"enabled": true}, "entitlements": {"network-host": true}}}"#,
    )
    .expect("write");
    let f = f.to_str().expect("utf-8");
    let diff = daemon_config(&["diff", f]);
    assert!(
        diff.contains("builder.Entitlements.network-host is true, the proxy expects false")
            && diff.contains("cgroup-parent is unset, the proxy expects \"/dockwarden\""),
        "{diff}"
    );
    let merged: serde_json::Value =
        serde_json::from_str(&daemon_config(&["merge", f])).expect("json");
    assert_eq!(merged["debug"], true);
    assert_eq!(merged["Builder"]["gc"]["enabled"], true);
    assert_eq!(merged["Builder"]["entitlements"]["network-host"], false);
    assert_eq!(
        merged["Builder"]["entitlements"]["security-insecure"],
        false
    );
    assert!(merged.get("builder").is_none(), "{merged}");
    assert_eq!(merged["cgroup-parent"], "/dockwarden");
    // On the systemd cgroup driver the parent is the proxy's slice.
    let systemd: serde_json::Value =
        serde_json::from_str(&daemon_config(&["merge", "/nonexistent", "--systemd"]))
            .expect("json");
    assert_eq!(systemd["cgroup-parent"], "dockwarden.slice");
    // The packaged file needs nothing merged.
    assert_eq!(
        daemon_config(&["diff", &format!("{TOP}/packaging/daemon.json")]),
        ""
    );
}

#[test]
fn another_suite_comes_from_the_machines_own_debian_source() {
    let dir = tempfile::tempdir().expect("tempdir");
    let codename = std::fs::read_to_string("/etc/os-release")
        .expect("os-release")
        .lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME=").map(str::to_owned))
        .expect("VERSION_CODENAME");
    // A machine whose only Debian source is a local mirror (never fetched: no lists).
    let list = dir.path().join("sources.list");
    std::fs::write(
        &list,
        format!("deb http://mirror.example.invalid/debian {codename} main\ndeb http://mirror.example.invalid/other {codename}-updates main\n"),
    )
    .expect("list");
    let conf = dir.path().join("apt.conf");
    std::fs::create_dir_all(dir.path().join("lists")).expect("lists");
    std::fs::write(
        &conf,
        format!(
            "Dir::Etc::SourceList \"{}\";\nDir::Etc::SourceParts \"/dev/null\";\nDir::State::Lists \"{}\";\n",
            list.display(),
            dir.path().join("lists").display()
        ),
    )
    .expect("conf");
    let o = Command::new(format!("{TOP}/scripts/debian-source.sh"))
        .arg("trixie")
        .env("APT_CONFIG", &conf)
        .output()
        .expect("debian-source.sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example.invalid/debian/ trixie main"
    );
    // engine26.sh writes exactly that into its private sources list.
    let script =
        std::fs::read_to_string(format!("{TOP}/scripts/engine26.sh")).expect("engine26.sh");
    assert!(script.contains("debian_source_line trixie >\"$D26_APT/sources.list\""));
    assert!(
        !script.contains("deb.debian.org"),
        "no hard-coded mirror in engine26.sh"
    );
    // No source for the machine's suite: an error saying so, not a guess.
    std::fs::write(&list, "deb http://mirror.example.invalid/debian sid main\n").expect("list");
    let o = Command::new(format!("{TOP}/scripts/debian-source.sh"))
        .env("APT_CONFIG", &conf)
        .output()
        .expect("debian-source.sh");
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("no apt source"));
}

/// `scripts/run-proxy.sh` on the set-up machine: the proxy with its defaults finds nothing to
/// complain about in the daemon's settings.
fn the_proxy_with_its_defaults_logs_no_error_on_the_set_up_daemon(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let log = p.log();
    assert!(log.contains("shared budget in place"), "{log}");
    assert!(
        !log.contains("ERROR") && !log.contains("limits.build_budget"),
        "engine {}: {log}",
        e.name
    );
}

per_engine!(the_proxy_with_its_defaults_logs_no_error_on_the_set_up_daemon);
