//! The pure `/grpc` decisions on Solve requests captured from buildx 0.13 and Compose 2.26
//! (`fixtures/grpc/README.md` says how).

use dockwarden::policy::facts::{BuildPlacement, Environment};
use dockwarden::policy::grpc::messages::{ControlSolveRequest, GatewaySolveRequest};
use dockwarden::policy::grpc::{self, Judged, Refusal};
use prost::Message;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/grpc");

fn load(file: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{file}")).expect("fixture")
}

fn judged(m: &str) -> Judged {
    match m {
        "ControlSolve" => Judged::ControlSolve,
        "GatewaySolve" => Judged::GatewaySolve,
        other => panic!("unknown method {other}"),
    }
}

fn rule(r: &Result<grpc::Allowed, Refusal>) -> Option<String> {
    match r {
        Ok(_) => None,
        Err(Refusal::Denied(d)) => Some(d.rule.to_owned()),
        Err(Refusal::Invalid(m)) => Some(format!("invalid: {m}")),
    }
}

#[test]
fn captured_solve_requests_get_their_expected_decisions() {
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{DIR}/cases.json")).expect("cases"))
            .expect("json");
    // The budget on Engine 26.1 with the daemon's settings from packaging/daemon.json.
    let budget = Environment {
        cgroup_parent: Some("/dockwarden".into()),
        builds: BuildPlacement {
            daemon_inside: true,
            llb_cgroup: true,
            allow_unbudgeted: false,
        },
        ..Environment::default()
    };
    let mut n = 0;
    for c in cases.as_array().expect("list") {
        let file = c["file"].as_str().expect("file");
        let msg = load(file);
        let j = judged(c["method"].as_str().expect("method"));
        let want = c["expect"].as_str().map(str::to_owned);
        assert_eq!(
            rule(&grpc::decide(j, &msg, &Environment::default())),
            want,
            "{file}"
        );
        let with_budget = grpc::decide(j, &msg, &budget);
        assert_eq!(rule(&with_budget), want, "{file} with the budget on");
        if c["budget_rewrite"].as_bool() == Some(true) {
            let out = with_budget
                .expect("allowed")
                .message()
                .expect("rewritten")
                .to_vec();
            assert!(out.starts_with(&msg), "{file}: the client's bytes are kept");
            let attrs = GatewaySolveRequest::decode(out.as_slice())
                .expect("decodes")
                .frontend_opt;
            assert_eq!(
                attrs.get("cgroup-parent").map(String::as_str),
                Some("/dockwarden"),
                "{file}"
            );
            assert_eq!(
                attrs.get("cmdline").map(String::as_str),
                Some(""),
                "{file}: no hand-over to a `# syntax=` image frontend"
            );
            assert_eq!(
                attrs.get("filename").map(String::as_str),
                Some("Dockerfile"),
                "{file}: other attributes stay"
            );
        }
        n += 1;
    }
    assert_eq!(n, 10);
}

#[test]
fn host_network_without_the_entitlement_is_refused_by_its_attribute() {
    // `--network host` without `--allow`: the same request minus its entitlement.
    let mut r =
        ControlSolveRequest::decode(load("buildx-allow-network-host.control-solve.bin").as_slice())
            .expect("decodes");
    assert!(r.entitlements.iter().all(|e| e == "network.host") && !r.entitlements.is_empty());
    assert_eq!(
        r.frontend_attrs
            .get("force-network-mode")
            .map(String::as_str),
        Some("host")
    );
    r.entitlements.clear();
    let out = grpc::decide(
        Judged::ControlSolve,
        &r.encode_to_vec(),
        &Environment::default(),
    );
    assert_eq!(rule(&out).as_deref(), Some("build.network"));
}

#[test]
fn a_truncated_capture_is_invalid_not_allowed() {
    let msg = load("compose-build.gateway-solve.bin");
    for cut in [1, msg.len() / 2, msg.len() - 1] {
        let r = grpc::decide(Judged::GatewaySolve, &msg[..cut], &Environment::default());
        assert!(matches!(r, Err(Refusal::Invalid(_))), "cut at {cut}: {r:?}");
    }
}
