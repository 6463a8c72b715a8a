//! Route-table tests: the ordering traps of dockerd's router.

use super::*;

fn route(method: &str, path: &str) -> Route {
    let p = CanonicalPath::parse(path).expect("canonical test path");
    classify(method, &p)
}

#[test]
fn versioned_and_bare_paths_classify_alike() {
    assert_eq!(route("POST", "/v1.41/containers/create").endpoint, Endpoint::ContainerCreate);
    assert_eq!(route("POST", "/containers/create").endpoint, Endpoint::ContainerCreate);
    assert_eq!(route("POST", "/v1.41/containers/create").version, ApiVersion::parse("1.41"));
    assert_eq!(route("GET", "/_ping").version, None);
}

#[test]
fn name_variables_swallow_slashes_like_gorilla() {
    assert_eq!(
        route("GET", "/v1.41/containers/web/db/json").endpoint,
        Endpoint::ContainerInspect("web/db".into())
    );
    assert_eq!(route("POST", "/containers/a/b/start").endpoint, Endpoint::ContainerStart("a/b".into()));
}

#[test]
fn checkpoint_routes_win_over_container_delete() {
    assert_eq!(
        route("DELETE", "/containers/x/checkpoints/y").endpoint,
        Endpoint::CheckpointDelete("x".into(), "y".into())
    );
    assert_eq!(route("DELETE", "/containers/x/y/z").endpoint, Endpoint::ContainerDelete("x/y/z".into()));
}

#[test]
fn wrong_method_and_unknown_paths_are_unknown() {
    assert_eq!(route("GET", "/containers/create").endpoint, Endpoint::Unknown);
    assert_eq!(route("get", "/_ping").endpoint, Endpoint::Unknown);
    assert_eq!(route("HEAD", "/info").endpoint, Endpoint::Unknown);
    assert_eq!(route("GET", "/V1.41/info").endpoint, Endpoint::Unknown);
    assert_eq!(route("GET", "/v1.41/nope").endpoint, Endpoint::Unknown);
    assert_eq!(route("POST", "/v1.41/containers/json").endpoint, Endpoint::Unknown);
}

#[test]
fn surfaces_the_policy_never_allows_are_classified() {
    assert_eq!(route("POST", "/v1.41/swarm/init").endpoint, Endpoint::Swarm);
    assert_eq!(route("GET", "/services").endpoint, Endpoint::SwarmRead);
    for (m, p) in [("GET", "/v1.41/swarm"), ("GET", "/nodes/x"), ("GET", "/tasks/x/logs"), ("GET", "/secrets"), ("GET", "/configs/c")] {
        assert_eq!(route(m, p).endpoint, Endpoint::SwarmRead, "{m} {p}");
    }
    assert_eq!(route("POST", "/v1.41/swarm/leave").endpoint, Endpoint::SwarmLeave);
    for (m, p) in [("GET", "/swarm/unlockkey"), ("POST", "/swarm/leave/x"), ("GET", "/nodes/x/y"), ("HEAD", "/nodes"), ("DELETE", "/nodes/x"), ("POST", "/secrets/create")] {
        assert_eq!(route(m, p).endpoint, Endpoint::Swarm, "{m} {p}");
    }
    assert_eq!(route("POST", "/plugins/pull").endpoint, Endpoint::PluginMutate);
    assert_eq!(route("GET", "/plugins").endpoint, Endpoint::PluginList);
    assert_eq!(route("PUT", "/debug/pprof/").endpoint, Endpoint::Debug);
    assert_eq!(route("OPTIONS", "/anything").endpoint, Endpoint::Options);
    assert_eq!(route("POST", "/grpc").endpoint, Endpoint::Grpc);
    assert_eq!(route("POST", "/session").endpoint, Endpoint::Session);
}

#[test]
fn version_prefix_is_lenient_like_dockerd() {
    assert_eq!(route("GET", "/v1../info").version, ApiVersion::parse("1"));
    assert_eq!(route("GET", "/v01.041/info").version, ApiVersion::parse("1.41"));
}

#[test]
fn endpoint_names_are_the_variant_names() {
    assert_eq!(Endpoint::ContainerList.name(), "ContainerList");
    assert_eq!(Endpoint::ContainerInspect("a(b)\"c".into()).name(), "ContainerInspect");
    assert_eq!(Endpoint::CheckpointDelete("x".into(), "y".into()).name(), "CheckpointDelete");
    assert_eq!(Endpoint::Unknown.name(), "Unknown");
}
