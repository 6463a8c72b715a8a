//! Networks through the proxy: which `docker network create` / `connect` variants reach the
//! daemon, checked afterwards against the daemon's own view.

mod common;
use common::*;

/// Removes the test's networks and containers through the daemon on drop.
struct Cleanup {
    engine: Engine,
    containers: Vec<String>,
    networks: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &self.containers {
            self.engine.force_remove(c);
        }
        for n in &self.networks {
            let _ = self.engine.daemon(&["network", "rm", n]);
        }
    }
}

fn exists(e: &Engine, network: &str) -> bool {
    e.daemon(&["network", "inspect", network]).status.success()
}

/// A subnet no host route covers: 10.(200+pid%50).(pid/50%250 + engine offset).0/24. The proxy
/// checks subnets against the routes of its own (the host's) network namespace, where Engine
/// 20.10's bridges are: the two engines' tests, which run at once, take different subnets.
fn free_subnet(e: &Engine) -> String {
    let pid = std::process::id();
    let offset = if e.name == "20.10" { 0 } else { 125 };
    format!("10.{}.{}.0/24", 200 + pid % 50, (pid / 50 + offset) % 250)
}

/// A host route with a real prefix (not the default route, not a Docker bridge).
/// A route of the daemon's own network namespace (what the policy reads since the daemon may
/// run in another namespace than the proxy).
fn host_route(e: &Engine) -> Option<String> {
    let routes = dockwarden::hostnet::daemon_routes(&e.socket).ok()?;
    routes
        .into_iter()
        .find(|r| r.prefix > 0 && r.iface != "docker0" && !r.iface.starts_with("br-"))
        .map(|r| format!("{}/{}", r.network, r.prefix))
}

fn network_create_allows_plain_bridges_and_refuses_the_rest(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let ok_plain = unique("net-plain");
    let ok_tuned = unique("net-tuned");
    let mut clean = Cleanup {
        engine: e.clone(),
        containers: vec![],
        networks: vec![ok_plain.clone(), ok_tuned.clone()],
    };
    ok(p.docker(&["network", "create", &ok_plain]));
    let subnet = free_subnet(e);
    ok(p.docker(&[
        "network",
        "create",
        "--subnet",
        &subnet,
        "--internal",
        "-o",
        "com.docker.network.driver.mtu=1400",
        &ok_tuned,
    ]));
    let refused: Vec<(Vec<String>, &str)> = vec![
        (vec!["-d".into(), "macvlan".into()], "network.driver"),
        (vec!["-d".into(), "ipvlan".into()], "network.driver"),
        (vec!["-d".into(), "overlay".into()], "network.driver"),
        (vec!["-d".into(), "Bridge".into()], "network.driver"),
        (
            vec!["-o".into(), "com.docker.network.bridge.name=docker0".into()],
            "network.option",
        ),
        (
            vec![
                "-o".into(),
                "com.docker.network.bridge.host_binding_ipv4=0.0.0.0".into(),
            ],
            "network.option",
        ),
        (
            vec![
                "-o".into(),
                "com.docker.network.bridge.enable_icc=false".into(),
            ],
            "network.option",
        ),
        (
            vec![
                "-o".into(),
                "com.docker.network.bridge.gateway_mode_ipv4=routed".into(),
            ],
            "network.option",
        ),
        (
            vec!["-o".into(), "com.docker.network.driver.mtu=100000".into()],
            "network.option",
        ),
        (
            vec![
                "--ipv6".into(),
                "--subnet".into(),
                "fd42:dead:beef::/64".into(),
            ],
            "network.ipv6",
        ),
        (vec!["--scope".into(), "swarm".into()], "network.scope"),
        (vec!["--config-only".into()], "network.config_from"),
        (
            vec!["--ipam-driver".into(), "custom".into()],
            "network.ipam",
        ),
    ];
    for (args, rule) in &refused {
        let name = unique("net-refused");
        clean.networks.push(name.clone());
        let mut a: Vec<&str> = vec!["network", "create"];
        a.extend(args.iter().map(String::as_str));
        a.push(&name);
        let o = p.docker(&a);
        assert!(!o.status.success(), "{args:?} was allowed");
        assert!(
            stderr(&o).contains(&format!("rule {rule}")),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!exists(e, &name), "{args:?} reached the daemon");
    }
    if let Some(route) = host_route(e) {
        let name = unique("net-overlap");
        clean.networks.push(name.clone());
        let o = p.docker(&["network", "create", "--subnet", &route, &name]);
        assert!(
            stderr(&o).contains("rule network.ipam"),
            "subnet {route}: {}",
            stderr(&o)
        );
        assert!(!exists(e, &name));
    }
    // The daemon's view: the allowed networks exist, with what was asked for.
    let tuned = ok(e.daemon(&["network", "inspect", &ok_tuned]));
    let v: serde_json::Value = serde_json::from_str(&tuned).expect("json");
    assert_eq!(v[0]["Driver"], "bridge");
    assert_eq!(v[0]["Options"]["com.docker.network.driver.mtu"], "1400");
    assert_eq!(v[0]["IPAM"]["Config"][0]["Subnet"], subnet.as_str());
    assert!(exists(e, &ok_plain));
}

fn containers_join_only_networks_that_pass_the_rules(e: &Engine) {
    let p = Proxy::start_on(e, &[]);
    let good = unique("net-good");
    let admin = unique("net-admin");
    let c = unique("net-c");
    let c2 = unique("net-c2");
    let _clean = Cleanup {
        engine: e.clone(),
        containers: vec![c.clone(), c2.clone()],
        networks: vec![good.clone(), admin.clone()],
    };
    ok(p.docker(&["network", "create", &good]));
    // A network the proxy would not create, made directly on the daemon (as an admin might).
    ok(e.daemon(&[
        "network",
        "create",
        "-o",
        "com.docker.network.bridge.enable_icc=false",
        &admin,
    ]));
    ok(p.docker(&["create", "--name", &c, IMAGE, "sleep", "60"]));

    ok(p.docker(&["network", "connect", "--alias", "db", &good, &c]));
    let o = p.docker(&["network", "connect", &admin, &c]);
    assert!(
        stderr(&o).contains("rule network.connect"),
        "{}",
        stderr(&o)
    );
    let o = p.docker(&["network", "connect", "host", &c]);
    assert!(
        stderr(&o).contains("rule network.connect"),
        "{}",
        stderr(&o)
    );
    let o = p.docker(&[
        "network",
        "connect",
        "--driver-opt",
        "com.docker.network.endpoint.sysctls=net.ipv4.conf.IFNAME.forwarding=1",
        &good,
        &c2,
    ]);
    assert!(
        stderr(&o).contains("rule network.endpoint"),
        "{}",
        stderr(&o)
    );

    // At create: a user network that passes is fine, one that does not is refused.
    let o = p.docker(&["create", "--network", &admin, IMAGE]);
    assert!(
        stderr(&o).contains("rule network.connect"),
        "{}",
        stderr(&o)
    );
    ok(p.docker(&["create", "--name", &c2, "--network", &good, IMAGE]));

    let nets = e.inspect(&c)["NetworkSettings"]["Networks"].clone();
    let names: Vec<&String> = nets
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert!(names.contains(&&good), "{names:?}");
    assert!(
        !names.contains(&&admin) && !names.iter().any(|n| *n == "host"),
        "{names:?}"
    );
    assert_eq!(
        nets[&good]["Aliases"]
            .as_array()
            .map(|a| a.iter().any(|x| x == "db")),
        Some(true)
    );
}

per_engine!(
    network_create_allows_plain_bridges_and_refuses_the_rest,
    containers_join_only_networks_that_pass_the_rules,
);
