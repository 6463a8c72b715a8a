//! Fuzzes the policy: an arbitrary body for container create goes through `policy::needs`,
//! made-up facts and `policy::decide` with the default policy, and never panics.
#![no_main]

use dockwarden_policy::api::json;
use dockwarden_policy::api::path::CanonicalPath;
use dockwarden_policy::api::query::Query;
use dockwarden_policy::api::route::classify;
use dockwarden_policy::policy::facts::{HostPathFact, ImageFact};
use dockwarden_policy::policy::{self, FactQuery, Facts, Policy, Request};
use libfuzzer_sys::fuzz_target;

const PATHS: &[&str] = &[
    "/v1.41/containers/create",
    "/v1.41/containers/c1/exec",
    "/v1.41/containers/c1/update",
    "/v1.41/containers/c1/start",
    "/v1.41/networks/create",
    "/v1.41/volumes/create",
];

fn facts_for(queries: &[FactQuery]) -> Facts {
    let mut f = Facts::default();
    let env = std::sync::Arc::make_mut(&mut f.env);
    env.workspace = "/ws".into();
    env.pin_dir = "/pins".into();
    f.container_count = Some(0);
    for q in queries {
        match q {
            FactQuery::HostPath(p) => {
                let inside = p == "/ws" || p.starts_with("/ws/");
                f.host_paths.insert(
                    p.clone(),
                    if inside {
                        HostPathFact::Inside { is_dir: true }
                    } else {
                        HostPathFact::Outside
                    },
                );
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
            FactQuery::ContainerCount => {}
            FactQuery::HostRoutes => f.host_routes = Some(Vec::new()),
            FactQuery::SwarmState => f.swarm_state = Some("inactive".into()),
        }
    }
    f
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let Ok(body) = json::parse(body) else { return };
    let policy = Policy::default_policy();
    let path = CanonicalPath::parse(PATHS[usize::from(sel) % PATHS.len()]).expect("canonical");
    let req = Request {
        method: "POST".into(),
        route: classify("POST", &path),
        query: Query::default(),
        body: Some(body),
        has_body: true,
    };
    if let Ok(q) = policy::needs(&req, &policy) {
        let _ = policy::decide(&req, &facts_for(&q), &policy);
    }
});
