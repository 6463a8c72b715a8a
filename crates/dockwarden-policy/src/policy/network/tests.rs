use std::net::Ipv4Addr;

use super::*;
use crate::api::path::CanonicalPath;
use crate::api::query::Query;
use crate::api::route;
use crate::policy::facts::HostRoute;
use crate::policy::{Verdict, decide};

fn req(method: &str, path: &str, body: &str) -> Request {
    let p = CanonicalPath::parse(path).expect("path");
    let body = (!body.is_empty()).then(|| crate::api::json::parse(body.as_bytes()).expect("json"));
    Request {
        method: method.into(),
        route: route::classify(method, &p),
        query: Query::default(),
        has_body: body.is_some(),
        body,
    }
}

fn facts() -> Facts {
    let r = |a: [u8; 4], p: u8, i: &str| HostRoute {
        network: Ipv4Addr::from(a),
        prefix: p,
        iface: i.into(),
    };
    Facts {
        host_routes: Some(vec![
            r([0, 0, 0, 0], 0, "eth0"),
            r([192, 0, 2, 0], 24, "eth0"),
            r([10, 9, 0, 0], 16, "br-0123456789ab"),
        ]),
        container_count: Some(0),
        ..Facts::default()
    }
}

fn rule(method: &str, path: &str, body: &str, f: &Facts) -> Option<&'static str> {
    match decide(&req(method, path, body), f, &Policy::default_policy()) {
        Verdict::Allow(_) => None,
        Verdict::Deny(d) => Some(d.rule),
    }
}

fn create(body: &str) -> Option<&'static str> {
    rule("POST", "/v1.41/networks/create", body, &facts())
}

#[test]
fn plain_bridge_networks_are_allowed() {
    assert_eq!(create(r#"{"Name":"n"}"#), None);
    assert_eq!(
        create(r#"{"Name":"n","Driver":"bridge","Internal":true,"Labels":{"a":"b"}}"#),
        None
    );
    assert_eq!(
        create(r#"{"Name":"n","Options":{"com.docker.network.driver.mtu":"1400"}}"#),
        None
    );
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Driver":"default","Config":[{"Subnet":"10.77.0.0/24"}]}}"#),
        None
    );
}

#[test]
fn rejects_drivers_that_reach_host_interfaces() {
    for d in [
        "macvlan", "ipvlan", "overlay", "host", "null", "Bridge", "BRIDGE", "bridge ", "weave",
    ] {
        assert_eq!(
            create(&format!(r#"{{"Name":"n","Driver":"{d}"}}"#)),
            Some("network.driver"),
            "{d}"
        );
    }
    assert_eq!(
        create(r#"{"Name":"n","driver":"macvlan"}"#),
        Some("network.driver")
    );
}

#[test]
fn rejects_bridge_name_adopting_docker0() {
    assert_eq!(
        create(r#"{"Name":"n","Options":{"com.docker.network.bridge.name":"docker0"}}"#),
        Some("network.option")
    );
}

#[test]
fn rejects_options_outside_the_allow_list() {
    for (k, v) in [
        ("com.docker.network.bridge.host_binding_ipv4", "0.0.0.0"),
        ("com.docker.network.bridge.enable_icc", "false"),
        ("com.docker.network.bridge.gateway_mode_ipv4", "routed"),
        ("com.docker.network.bridge.inhibit_ipv4", "true"),
        ("com.docker.network.bridge.trusted_host_interfaces", "eth0"),
        ("com.docker.network.bridge.enable_ip_masquerade", "false"),
        ("com.docker.network.driver.mtu", "68"),
        ("com.docker.network.driver.mtu", "+1500"),
        ("com.docker.network.driver.mtu", "1500.0"),
        ("com.docker.network.driver.mtu", "99999999999"),
        ("parent", "eth0"),
    ] {
        assert_eq!(
            create(&format!(r#"{{"Name":"n","Options":{{"{k}":"{v}"}}}}"#)),
            Some("network.option"),
            "{k}={v}"
        );
    }
}

#[test]
fn rejects_swarm_and_config_from_networks() {
    assert_eq!(
        create(r#"{"Name":"n","Scope":"swarm"}"#),
        Some("network.scope")
    );
    assert_eq!(
        create(r#"{"Name":"n","Attachable":true}"#),
        None,
        "docker-compose 1.x sends it"
    );
    assert_eq!(
        create(r#"{"Name":"n","Ingress":true}"#),
        Some("network.scope")
    );
    assert_eq!(
        create(r#"{"Name":"n","ConfigOnly":true}"#),
        Some("network.config_from")
    );
    assert_eq!(
        create(r#"{"Name":"n","ConfigFrom":{"Network":"cfg"}}"#),
        Some("network.config_from")
    );
}

#[test]
fn rejects_subnets_overlapping_host_routes() {
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Config":[{"Subnet":"192.0.2.128/25"}]}}"#),
        Some("network.ipam")
    );
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Config":[{"Subnet":"192.0.0.0/16"}]}}"#),
        Some("network.ipam")
    );
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Config":[{"Subnet":"fd00::/64"}]}}"#),
        Some("network.ipam")
    );
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Driver":"infoblox"}}"#),
        Some("network.ipam")
    );
    assert_eq!(
        create(r#"{"Name":"n","IPAM":{"Options":{"x":"y"}}}"#),
        Some("network.ipam")
    );
    let no_routes = Facts {
        host_routes: None,
        ..facts()
    };
    let body = r#"{"Name":"n","IPAM":{"Config":[{"Subnet":"10.77.0.0/24"}]}}"#;
    assert_eq!(
        rule("POST", "/networks/create", body, &no_routes),
        Some("network.ipam")
    );
}

#[test]
fn rejects_ipv6_networks() {
    assert_eq!(
        create(r#"{"Name":"n","EnableIPv6":true}"#),
        Some("network.ipv6")
    );
}

fn with_network(reference: &str, raw: &str) -> Facts {
    let raw = crate::api::json::parse(raw.as_bytes()).expect("json");
    let o = raw.as_object().cloned().unwrap_or_default();
    let s = |k: &str| o.str(k).ok().flatten().unwrap_or_default().to_owned();
    let nf = NetworkFact {
        id: s("Id"),
        name: s("Name"),
        driver: s("Driver"),
        options: o.str_map("Options").ok().flatten().unwrap_or_default(),
        raw: raw.clone(),
    };
    let mut f = facts();
    f.networks.insert(reference.into(), Some(nf));
    f
}

const USER_NET: &str = r#"{"Name":"app","Id":"0123456789abcdef","Driver":"bridge","Scope":"local","EnableIPv6":false,
  "IPAM":{"Driver":"default","Options":null,"Config":[{"Subnet":"10.9.0.0/16","Gateway":"10.9.0.1"}]},
  "ConfigFrom":{"Network":""},"ConfigOnly":false,"Options":{},"Labels":{}}"#;
const HOST_NET: &str =
    r#"{"Name":"host","Id":"a2771aeb41e0aaaa","Driver":"host","Scope":"local","Options":{}}"#;
const DOCKER0: &str = r#"{"Name":"bridge","Id":"293cbacfd6a0aaaa","Driver":"bridge","Scope":"local",
  "Options":{"com.docker.network.bridge.default_bridge":"true","com.docker.network.bridge.name":"docker0"}}"#;
const MACVLAN: &str =
    r#"{"Name":"lan","Id":"feedfeedfeedfeed","Driver":"macvlan","Options":{"parent":"eth0"}}"#;

#[test]
fn connect_follows_the_target_network() {
    let ok = r#"{"Container":"c","EndpointConfig":{"Aliases":["db"],"IPAMConfig":{"IPv4Address":"10.9.0.7"}}}"#;
    assert_eq!(
        rule(
            "POST",
            "/networks/app/connect",
            ok,
            &with_network("app", USER_NET)
        ),
        None
    );
    assert_eq!(
        rule(
            "POST",
            "/networks/bridge/connect",
            r#"{"Container":"c"}"#,
            &with_network("bridge", DOCKER0)
        ),
        None
    );
    assert_eq!(
        rule(
            "POST",
            "/networks/lan/connect",
            r#"{"Container":"c"}"#,
            &with_network("lan", MACVLAN)
        ),
        Some("network.connect")
    );
    assert_eq!(
        rule(
            "POST",
            "/networks/a27/connect",
            r#"{"Container":"c"}"#,
            &with_network("a27", HOST_NET)
        ),
        Some("network.connect")
    );
    assert_eq!(
        rule(
            "POST",
            "/networks/gone/connect",
            r#"{"Container":"c"}"#,
            &facts()
        ),
        Some("network.connect")
    );
}

#[test]
fn rejects_endpoint_driver_opts_on_connect() {
    let body = r#"{"Container":"c","EndpointConfig":{"DriverOpts":{"com.docker.network.endpoint.sysctls":"net.ipv4.conf.IFNAME.forwarding=1"}}}"#;
    assert_eq!(
        rule(
            "POST",
            "/networks/app/connect",
            body,
            &with_network("app", USER_NET)
        ),
        Some("network.endpoint")
    );
}

#[test]
fn container_create_endpoints_are_checked() {
    let policy = Policy::default_policy();
    let body = r#"{"Image":"x","HostConfig":{"NetworkMode":"lan"},"NetworkingConfig":{"EndpointsConfig":{"lan":{}}}}"#;
    let r = req("POST", "/containers/create", body);
    assert_eq!(
        needs_endpoints(&r).expect("needs"),
        vec![FactQuery::Network("lan".into()), FactQuery::HostRoutes]
    );
    let err =
        check_endpoints(&r, &with_network("lan", MACVLAN), &policy).expect_err("macvlan refused");
    assert_eq!(err.rule, "network.connect");
    let body = r#"{"Image":"x","HostConfig":{"NetworkMode":"app"},"NetworkingConfig":{"EndpointsConfig":{"app":{"Aliases":["a"]}}}}"#;
    assert!(
        check_endpoints(
            &req("POST", "/containers/create", body),
            &with_network("app", USER_NET),
            &policy
        )
        .is_ok()
    );
    let body = r#"{"Image":"x","NetworkingConfig":{"EndpointsConfig":{"bridge":{"DriverOpts":{"com.docker.network.endpoint.ifname":"eth9"}}}}}"#;
    let err = check_endpoints(&req("POST", "/containers/create", body), &facts(), &policy)
        .expect_err("driver opts refused");
    assert_eq!(err.rule, "network.endpoint");
    let plain = req(
        "POST",
        "/containers/create",
        r#"{"Image":"x","HostConfig":{"NetworkMode":"bridge"}}"#,
    );
    assert_eq!(needs_endpoints(&plain).expect("needs"), vec![]);
}
