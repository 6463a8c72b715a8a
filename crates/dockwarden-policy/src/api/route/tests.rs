//! Route-table tests: the ordering traps of dockerd's router.

use super::*;

fn route(method: &str, path: &str) -> Route {
    let p = CanonicalPath::parse(path).expect("canonical test path");
    classify(method, &p)
}

#[test]
fn versioned_and_bare_paths_classify_alike() {
    assert_eq!(
        route("POST", "/v1.41/containers/create").endpoint,
        Endpoint::ContainerCreate
    );
    assert_eq!(
        route("POST", "/containers/create").endpoint,
        Endpoint::ContainerCreate
    );
    assert_eq!(
        route("POST", "/v1.41/containers/create").version,
        ApiVersion::parse("1.41")
    );
    assert_eq!(route("GET", "/_ping").version, None);
}

#[test]
fn name_variables_swallow_slashes_like_gorilla() {
    assert_eq!(
        route("GET", "/v1.41/containers/web/db/json").endpoint,
        Endpoint::ContainerInspect("web/db".into())
    );
    assert_eq!(
        route("POST", "/containers/a/b/start").endpoint,
        Endpoint::ContainerStart("a/b".into())
    );
}

#[test]
fn checkpoint_routes_win_over_container_delete() {
    assert_eq!(
        route("DELETE", "/containers/x/checkpoints/y").endpoint,
        Endpoint::CheckpointDelete("x".into(), "y".into())
    );
    assert_eq!(
        route("DELETE", "/containers/x/y/z").endpoint,
        Endpoint::ContainerDelete("x/y/z".into())
    );
}

#[test]
fn wrong_method_and_unknown_paths_are_unknown() {
    assert_eq!(
        route("GET", "/containers/create").endpoint,
        Endpoint::Unknown
    );
    assert_eq!(route("get", "/_ping").endpoint, Endpoint::Unknown);
    assert_eq!(route("HEAD", "/info").endpoint, Endpoint::Unknown);
    assert_eq!(route("GET", "/V1.41/info").endpoint, Endpoint::Unknown);
    assert_eq!(route("GET", "/v1.41/nope").endpoint, Endpoint::Unknown);
    assert_eq!(
        route("POST", "/v1.41/containers/json").endpoint,
        Endpoint::Unknown
    );
}

#[test]
fn surfaces_the_policy_never_allows_are_classified() {
    assert_eq!(route("POST", "/v1.41/swarm/init").endpoint, Endpoint::Swarm);
    assert_eq!(route("GET", "/services").endpoint, Endpoint::SwarmRead);
    for (m, p) in [
        ("GET", "/v1.41/swarm"),
        ("GET", "/nodes/x"),
        ("GET", "/tasks/x/logs"),
        ("GET", "/secrets"),
        ("GET", "/configs/c"),
    ] {
        assert_eq!(route(m, p).endpoint, Endpoint::SwarmRead, "{m} {p}");
    }
    assert_eq!(
        route("POST", "/v1.41/swarm/leave").endpoint,
        Endpoint::SwarmLeave
    );
    for (m, p) in [
        ("GET", "/swarm/unlockkey"),
        ("POST", "/swarm/leave/x"),
        ("GET", "/nodes/x/y"),
        ("HEAD", "/nodes"),
        ("DELETE", "/nodes/x"),
        ("POST", "/secrets/create"),
    ] {
        assert_eq!(route(m, p).endpoint, Endpoint::Swarm, "{m} {p}");
    }
    assert_eq!(
        route("POST", "/plugins/pull").endpoint,
        Endpoint::PluginMutate
    );
    assert_eq!(route("GET", "/plugins").endpoint, Endpoint::PluginList);
    assert_eq!(route("PUT", "/debug/pprof/").endpoint, Endpoint::Debug);
    assert_eq!(route("OPTIONS", "/anything").endpoint, Endpoint::Options);
    assert_eq!(route("POST", "/grpc").endpoint, Endpoint::Grpc);
    assert_eq!(route("POST", "/session").endpoint, Endpoint::Session);
}

#[test]
fn version_prefix_is_lenient_like_dockerd() {
    assert_eq!(route("GET", "/v1../info").version, ApiVersion::parse("1"));
    assert_eq!(
        route("GET", "/v01.041/info").version,
        ApiVersion::parse("1.41")
    );
}

#[test]
fn endpoint_names_are_the_variant_names() {
    assert_eq!(Endpoint::ContainerList.name(), "ContainerList");
    assert_eq!(
        Endpoint::ContainerInspect("a(b)\"c".into()).name(),
        "ContainerInspect"
    );
    assert_eq!(
        Endpoint::CheckpointDelete("x".into(), "y".into()).name(),
        "CheckpointDelete"
    );
    assert_eq!(Endpoint::Unknown.name(), "Unknown");
    // Every endpoint the table builds: the name is what `Debug` writes before any `(`.
    for (_, _, build) in TABLE {
        let e = build(&["a(b)", "c"]);
        let debug = format!("{e:?}");
        assert_eq!(
            e.name(),
            debug.split('(').next().unwrap_or_default(),
            "{debug}"
        );
    }
}

/// Paths built from the table's own words, ids with slashes, dots and version prefixes,
/// so that generated cases reach every template and its ordering traps.
fn arb_path() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let word = prop_oneof![
        Just("containers"),
        Just("json"),
        Just("exec"),
        Just("images"),
        Just("checkpoints"),
        Just("archive"),
        Just("networks"),
        Just("volumes"),
        Just("swarm"),
        Just("services"),
        Just("tasks"),
        Just("nodes"),
        Just("secrets"),
        Just("configs"),
        Just("logs"),
        Just("plugins"),
        Just("debug"),
        Just("build"),
        Just("prune"),
        Just("create"),
        Just("_ping"),
        Just("attach"),
        Just("ws"),
        Just("start"),
        Just("get"),
        Just("distribution"),
        Just("grpc"),
        Just("session"),
        Just("v1.41"),
        Just("v1..2"),
        Just("v"),
        Just("x"),
        Just("a b"),
        Just("1.41"),
        Just("privileges"),
        Just("load"),
        Just("cancel"),
        Just("leave"),
        Just("info"),
    ];
    let version = prop_oneof![
        Just(""),
        Just("/v1.41"),
        Just("/v1"),
        Just("/v.1"),
        Just("/v01.041"),
        Just("/v1.24.9")
    ];
    (
        version,
        proptest::collection::vec(word, 0..6),
        any::<bool>(),
    )
        .prop_map(|(v, words, slash)| {
            let mut p = v.to_owned();
            for w in words {
                p.push('/');
                p.push_str(w);
            }
            if slash || p.is_empty() {
                p.push('/');
            }
            p
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]
    #[test]
    fn string_shapes_classify_like_the_regex_table(
        method in proptest::prop_oneof![
            proptest::strategy::Just("GET"), proptest::strategy::Just("POST"), proptest::strategy::Just("PUT"),
            proptest::strategy::Just("DELETE"), proptest::strategy::Just("HEAD"), proptest::strategy::Just("OPTIONS"),
            proptest::strategy::Just("PATCH"), proptest::strategy::Just("get"),
        ],
        path in arb_path(),
    ) {
        if let Ok(p) = CanonicalPath::parse(&path) {
            proptest::prop_assert_eq!(classify(method, &p), classify_by_regex(method, &p), "{} {}", method, path);
        }
    }

    #[test]
    fn any_canonical_path_classifies_like_the_regex_table(path in "(/[a-z0-9._v]{0,6}){0,5}/?") {
        if let Ok(p) = CanonicalPath::parse(&path) {
            for m in ["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS"] {
                proptest::prop_assert_eq!(classify(m, &p), classify_by_regex(m, &p), "{} {}", m, path);
            }
        }
    }
}
