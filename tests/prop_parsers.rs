//! Property tests for everything that parses untrusted input, run on stable in CI: the body
//! decoder, the path router and the policy. The last test cross-checks the policy against the
//! Go oracle: a body Go decodes to a forbidden setting is never allowed.

mod gooracle;

use dockwarden::api::json::{self, Json, Object};
use dockwarden::api::model_view::{CreateShape, create_view};
use dockwarden::api::path::CanonicalPath;
use dockwarden::api::query::Query;
use dockwarden::api::route::{Endpoint, classify};
use dockwarden::api::version::ApiVersion;
use dockwarden::policy::facts::{Environment, HostPathFact, ImageFact};
use dockwarden::policy::{self, FactQuery, Facts, Policy, Request, Verdict};
use gooracle::generate::Gen;
use proptest::prelude::*;
use serde_json::Value;

const WORKSPACE: &str = "/ws";

/// Any JSON value our reader can hold: no NUL, no fold-equal keys, no `ſ`/`K` in keys.
fn any_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(|n| Json::Number(n.into())),
        any::<u64>().prop_map(|n| Json::Number(n.into())),
        (-1e12f64..1e12).prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Json::Number)),
        any::<String>()
            .prop_filter("no NUL", |s| !s.contains('\0'))
            .prop_map(Json::String),
        prop::sample::select(FIELD_WORDS).prop_map(|s| Json::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Json::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(|kv| {
                let mut o = Object::new();
                for (k, v) in kv {
                    o.set(&k, v);
                }
                Json::Object(o)
            }),
        ]
    })
}

/// Field names (in random case) and values that the policy looks at.
const FIELD_WORDS: &[&str] = &[
    "HostConfig",
    "Privileged",
    "Binds",
    "CapAdd",
    "NetworkMode",
    "PidMode",
    "Mounts",
    "Devices",
    "SecurityOpt",
    "PortBindings",
    "HostIp",
    "Type",
    "Source",
    "VolumeOptions",
    "DriverConfig",
    "Options",
    "Driver",
    "host",
    "bind",
    "/etc",
    "/ws/a:/a",
    "container:x",
    "local",
    "0.0.0.0",
    "ExtraHosts",
    "Sysctls",
    "Image",
    "Cmd",
    "PublishAllPorts",
    "ExposedPorts",
    "IPAM",
    "Config",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(FIELD_WORDS).prop_flat_map(|w| {
            prop::collection::vec(any::<bool>(), w.len()).prop_map(move |up| {
                w.chars()
                    .zip(up)
                    .map(|(c, u)| {
                        if u {
                            c.to_ascii_uppercase()
                        } else {
                            c.to_ascii_lowercase()
                        }
                    })
                    .collect()
            })
        }),
        "[a-zA-Z0-9_./é☃-]{1,8}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(j) = json::parse(&bytes) {
            exercise(&j);
        }
    }

    #[test]
    fn decoder_never_panics_on_json_like_text(parts in prop::collection::vec(prop::sample::select(JSON_BITS), 0..40)) {
        let text: String = parts.concat();
        if let Ok(j) = json::parse(text.as_bytes()) {
            exercise(&j);
            prop_assert_eq!(json::parse(&j.to_bytes()), Ok(j));
        }
    }

    #[test]
    fn canonical_bytes_parse_back_to_the_same_value(v in any_json()) {
        prop_assert_eq!(json::parse(&v.to_bytes()), Ok(v));
    }

    #[test]
    fn router_never_panics_and_versioned_paths_classify_like_bare_ones(
        method in prop::sample::select(&["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"][..]),
        segs in prop::collection::vec(prop::sample::select(SEGMENTS), 1..5),
        raw in "[/a-z0-9%._~v-]{0,24}",
        trailing in any::<bool>(),
    ) {
        let _ = CanonicalPath::parse(&raw).map(|p| classify(method, &p));
        let bare = format!("/{}{}", segs.join("/"), if trailing { "/" } else { "" });
        let Ok(p) = CanonicalPath::parse(&bare) else { return Ok(()) };
        let r = classify(method, &p);
        // Docker names each router by the path's first segment: under any other, nothing is known
        // (but `OPTIONS`, which its CORS preflight route answers on every path).
        if method != "OPTIONS" && !ROUTER_ROOTS.contains(&segs[0]) {
            prop_assert_eq!(&r.endpoint, &Endpoint::Unknown, "{} {} has no router", method, bare);
        }
        let vp = CanonicalPath::parse(&format!("/v1.41{bare}")).expect("a clean path stays clean");
        let vr = classify(method, &vp);
        prop_assert_eq!(&vr.endpoint, &r.endpoint, "{} vs /v1.41{}", bare, bare);
        if vr.endpoint != Endpoint::Unknown {
            prop_assert_eq!(vr.version, ApiVersion::parse("1.41"));
        }
    }

    #[test]
    fn known_routes_classify_as_dockers_router_routes_them(
        (method, template, expected) in prop::sample::select(KNOWN_ROUTES),
        id in prop::sample::select(SEGMENTS),
        versioned in any::<bool>(),
    ) {
        let bare = template.replace("{id}", id);
        let path = if versioned { format!("/v1.41{bare}") } else { bare.clone() };
        let p = CanonicalPath::parse(&path).expect("a clean path");
        let r = classify(method, &p);
        prop_assert_eq!(&r.endpoint, &expected(id.to_owned()), "{} {}", method, path);
        prop_assert_eq!(r.version, versioned.then(|| ApiVersion::parse("1.41")).flatten(), "{} {}", method, path);
        // The same path under a method its route does not take is another endpoint.
        let other = if method == "GET" { "PUT" } else { "GET" };
        prop_assert_ne!(&classify(other, &p).endpoint, &expected(id.to_owned()), "{} {}", other, path);
    }

    #[test]
    fn policy_never_panics_on_arbitrary_bodies(
        path in prop::sample::select(BODY_PATHS),
        body in any_json(),
    ) {
        let _ = verdict(path, Some(body));
    }
}

/// Runs every accessor on every key of every object, and the create view in both shapes.
fn exercise(j: &Json) {
    for shape in [CreateShape::Modern, CreateShape::Legacy] {
        let _ = create_view(j, shape);
    }
    match j {
        Json::Object(o) => {
            for (k, v) in o.entries() {
                let _ = (
                    o.bool(k),
                    o.str(k),
                    o.int(k),
                    o.object(k),
                    o.str_list(k),
                    o.object_list(k),
                    o.str_map(k),
                );
                exercise(v);
            }
        }
        Json::Array(items) => items.iter().for_each(exercise),
        _ => {}
    }
}

const JSON_BITS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "null",
    "true",
    "1",
    "-0",
    "1e999",
    "\"HostConfig\"",
    "\"privileged\"",
    "\"Binds\"",
    "\"\\u0050\"",
    "\"\\u017f\"",
    "\"\\ud800\"",
    "\"\\u0000\"",
    "\"a\"",
    " ",
    "\u{17f}",
    "\u{fffd}",
    "\\",
    "{\"Privileged\":true}",
    "[\"/etc:/x\"]",
];

const SEGMENTS: &[&str] = &[
    "containers",
    "create",
    "json",
    "exec",
    "start",
    "images",
    "networks",
    "volumes",
    "plugins",
    "_ping",
    "info",
    "x",
    "web",
    "checkpoints",
    "archive",
    "attach",
    "ws",
    "build",
    "swarm",
    "services",
    "debug",
    "grpc",
    "session",
    "connect",
    "prune",
    "distribution",
    "tag",
    "events",
];

/// The first segments of the paths Docker's routers serve, among [`SEGMENTS`].
const ROUTER_ROOTS: &[&str] = &[
    "containers",
    "exec",
    "images",
    "networks",
    "volumes",
    "plugins",
    "_ping",
    "info",
    "build",
    "swarm",
    "services",
    "grpc",
    "session",
    "distribution",
    "events",
    "debug",
];

/// Routes as Docker's router (`api/server/router/*/…go`) defines them, written out by hand as
/// the reference for `classify`: method, path with `{id}` for one segment, and the endpoint.
type Expect = fn(String) -> Endpoint;
const KNOWN_ROUTES: &[(&str, &str, Expect)] = &[
    ("GET", "/_ping", |_| Endpoint::Ping),
    ("HEAD", "/_ping", |_| Endpoint::PingHead),
    ("GET", "/info", |_| Endpoint::Info),
    ("GET", "/events", |_| Endpoint::Events),
    ("GET", "/containers/json", |_| Endpoint::ContainerList),
    ("POST", "/containers/create", |_| Endpoint::ContainerCreate),
    ("POST", "/containers/prune", |_| Endpoint::ContainerPrune),
    ("GET", "/containers/{id}/json", Endpoint::ContainerInspect),
    ("GET", "/containers/{id}/logs", Endpoint::ContainerLogs),
    (
        "GET",
        "/containers/{id}/attach/ws",
        Endpoint::ContainerAttachWs,
    ),
    ("POST", "/containers/{id}/start", Endpoint::ContainerStart),
    ("POST", "/containers/{id}/stop", Endpoint::ContainerStop),
    ("POST", "/containers/{id}/kill", Endpoint::ContainerKill),
    ("POST", "/containers/{id}/attach", Endpoint::ContainerAttach),
    ("POST", "/containers/{id}/exec", Endpoint::ExecCreate),
    ("POST", "/containers/{id}/update", Endpoint::ContainerUpdate),
    ("GET", "/exec/{id}/json", Endpoint::ExecInspect),
    ("POST", "/exec/{id}/start", Endpoint::ExecStart),
    ("GET", "/images/json", |_| Endpoint::ImageList),
    ("POST", "/images/{id}/tag", Endpoint::ImageTag),
    ("GET", "/networks", |_| Endpoint::NetworkList),
    ("POST", "/networks/{id}/connect", Endpoint::NetworkConnect),
    ("GET", "/volumes", |_| Endpoint::VolumeList),
    ("GET", "/plugins", |_| Endpoint::PluginList),
    ("GET", "/swarm", |_| Endpoint::SwarmRead),
    ("POST", "/build", |_| Endpoint::Build),
    ("POST", "/session", |_| Endpoint::Session),
    ("POST", "/grpc", |_| Endpoint::Grpc),
];

const BODY_PATHS: &[&str] = &[
    "/v1.41/containers/create",
    "/v1.41/containers/c1/exec",
    "/v1.41/containers/c1/update",
    "/v1.41/containers/c1/start",
    "/v1.41/networks/create",
    "/v1.41/networks/n1/connect",
    "/v1.41/volumes/create",
];

/// Facts as a gatherer on a machine with the workspace at `/ws` would report them.
fn facts_for(queries: &[FactQuery]) -> Facts {
    let mut f = Facts {
        env: Environment {
            workspace: WORKSPACE.into(),
            proxy_socket: "/run/dockwarden.sock".into(),
            daemon_sockets: vec!["/var/run/docker.sock".into(), "/run/docker.sock".into()],
            pin_dir: "/pins".into(),
            ..Environment::default()
        }
        .into(),
        container_count: Some(0),
        ..Facts::default()
    };
    for q in queries {
        match q {
            FactQuery::HostPath(p) => {
                let inside = p == WORKSPACE || p.starts_with(&format!("{WORKSPACE}/"));
                let fact = if inside {
                    HostPathFact::Inside { is_dir: true }
                } else {
                    HostPathFact::Outside
                };
                f.host_paths.insert(p.clone(), fact);
                // The proxy pins every source it resolves inside; `/pins<path>` stands in.
                if inside {
                    f.pins.insert(p.clone(), format!("/pins{p}"));
                }
            }
            FactQuery::Container(c) => drop(f.containers.insert(c.clone(), None)),
            FactQuery::Exec(e) => drop(f.execs.insert(e.clone(), None)),
            FactQuery::Network(n) => drop(f.networks.insert(n.clone(), None)),
            FactQuery::Volume(v) => drop(f.volumes.insert(v.clone(), None)),
            FactQuery::Image(i) => drop(f.images.insert(
                i.clone(),
                Some(ImageFact {
                    exposed_ports: vec![],
                }),
            )),
            FactQuery::ContainerCount => f.container_count = Some(0),
            FactQuery::HostRoutes => f.host_routes = Some(Vec::new()),
            FactQuery::SwarmState => f.swarm_state = Some("inactive".into()),
        }
    }
    f
}

/// The whole decision for a POST with this JSON body: needs, facts, decide.
fn verdict(path: &str, body: Option<Json>) -> Verdict {
    let policy = Policy::default_policy();
    let p = CanonicalPath::parse(path).expect("test paths are canonical");
    let has_body = body.is_some();
    let req = Request {
        method: "POST".into(),
        route: classify("POST", &p),
        query: Query::default(),
        body,
        has_body,
    };
    match policy::needs(&req, &policy) {
        Err(d) => Verdict::Deny(d),
        Ok(q) => policy::decide(&req, &facts_for(&q), &policy),
    }
}

/// The decision on raw create-body bytes, as the proxy makes it (unparsable → refused).
fn create_verdict(body: &[u8]) -> Verdict {
    match json::parse(body) {
        Err(e) => Verdict::Deny(e.into()),
        Ok(j) => verdict("/v1.41/containers/create", Some(j)),
    }
}

#[path = "prop_parsers/monotonic.rs"]
mod monotonic;
#[path = "prop_parsers/oracle_policy.rs"]
mod oracle_policy;
