//! Microbenchmarks of the pure core: route classification, and body decode plus policy
//! decision for a small create body and for a real compose-generated one.
//!
//! Facts are gathered before the timed loop (every host path answers "inside the workspace",
//! every daemon look-up answers with a plausible object), so the numbers are the policy's own
//! cost, not the daemon's or the filesystem's.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dockwarden::api::json::{self, Json};
use dockwarden::api::path::CanonicalPath;
use dockwarden::api::query::Query;
use dockwarden::api::route;
use dockwarden::policy::facts::{Environment, HostPathFact, ImageFact, NetworkFact, VolumeFact};
use dockwarden::policy::{self, FactQuery, Facts, Policy, Verdict};

const SMALL: &[u8] = include_bytes!("../fixtures/bodies/small-create.json");
const COMPOSE: &[u8] = include_bytes!("../fixtures/bodies/compose-create.json");

const PATHS: &[(&str, &str)] = &[
    ("GET", "/_ping"),
    ("GET", "/v1.41/containers/json"),
    ("GET", "/v1.41/containers/3f2a9c1b7e4d/json"),
    ("POST", "/v1.41/containers/create"),
    ("POST", "/v1.41/exec/9d8c7b6a5f4e/start"),
    ("DELETE", "/v1.41/containers/x/checkpoints/y"),
    ("GET", "/v1.41/no/such/endpoint"),
];

fn bench_route(c: &mut Criterion) {
    let mut g = c.benchmark_group("route");
    for (m, p) in PATHS {
        g.bench_function(format!("{m} {p}"), |b| {
            b.iter(|| {
                let path = CanonicalPath::parse(black_box(p)).expect("canonical");
                black_box(route::classify(black_box(m), &path))
            })
        });
    }
    g.finish();
}

fn env() -> Environment {
    Environment {
        workspace: "/home/dev/proj".into(),
        proxy_socket: "/run/dockwarden/docker.sock".into(),
        daemon_sockets: vec!["/var/run/docker.sock".into(), "/run/docker.sock".into()],
        cgroup_parent: None,
    }
}

/// Answers every query the way a healthy daemon and a tidy workspace would.
fn fake_facts(qs: Vec<FactQuery>) -> Facts {
    let mut f = Facts { env: env(), ..Facts::default() };
    for q in qs {
        match q {
            FactQuery::HostPath(p) => {
                f.host_paths.insert(p, HostPathFact::Inside { is_dir: true });
            }
            FactQuery::Container(r) => {
                f.containers.insert(r, None);
            }
            FactQuery::Network(r) => {
                let fact = NetworkFact {
                    id: "0123456789ab".into(),
                    name: r.clone(),
                    driver: "bridge".into(),
                    options: Vec::new(),
                    raw: json::parse(br#"{"Name":"n","Driver":"bridge","Options":{}}"#).expect("json"),
                };
                f.networks.insert(r, Some(fact));
            }
            FactQuery::Volume(r) => {
                let fact = VolumeFact { name: r.clone(), driver: "local".into(), options: Vec::new() };
                f.volumes.insert(r, Some(fact));
            }
            FactQuery::Image(r) => {
                f.images.insert(r, Some(ImageFact { exposed_ports: vec!["8080/tcp".into()] }));
            }
            FactQuery::ContainerCount => f.container_count = Some(3),
        }
    }
    f
}

fn request(body: Option<Json>) -> policy::Request {
    let path = CanonicalPath::parse("/v1.41/containers/create").expect("canonical");
    policy::Request {
        method: "POST".into(),
        route: route::classify("POST", &path),
        query: Query::parse(Some("name=dwbench_web_1")).expect("query"),
        body,
        has_body: true,
    }
}

/// Decode, ask for facts, decide, and serialise what is forwarded: the proxy's CPU path for a
/// create, minus the I/O.
fn decide(body: &[u8], facts: &Facts, pol: &Policy) -> Option<Vec<u8>> {
    let parsed: Json = json::parse(body).ok()?;
    let req = request(Some(parsed));
    let _qs = policy::needs(&req, pol).ok()?;
    match policy::decide(&req, facts, pol) {
        Verdict::Allow(p) => Some(p.body().map(Json::to_bytes).unwrap_or_default()),
        Verdict::Deny(_) => None,
    }
}

fn bench_policy(c: &mut Criterion) {
    let pol = Policy::default_policy();
    let mut g = c.benchmark_group("create");
    for (name, body) in [("small", SMALL), ("compose", COMPOSE)] {
        let req = request(Some(json::parse(body).expect("fixture is valid JSON")));
        let facts = fake_facts(policy::needs(&req, &pol).unwrap_or_default());
        g.bench_function(format!("decode/{name}"), |b| b.iter(|| black_box(json::parse(black_box(body)))));
        g.bench_function(format!("decode+decide/{name}"), |b| b.iter(|| black_box(decide(black_box(body), &facts, &pol))));
    }
    g.finish();
}

criterion_group!(benches, bench_route, bench_policy);
criterion_main!(benches);
