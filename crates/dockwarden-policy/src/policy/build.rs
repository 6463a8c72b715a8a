//! Build rules: the classic `/build` parameters and BuildKit's `/session` and `/grpc`.
//!
//! dockerd reads every `/build` parameter with `FormValue`, so they could also arrive in a
//! form-encoded or multipart body; the transport refuses those bodies (`request.form_body`), which
//! leaves the query string as the only source. Where dockerd reads the first value of a key, we
//! check every value, so a repeated key cannot smuggle a second meaning past us.
//!
//! BuildKit's `/session` and `/grpc` upgrades are allowed here. `/session` is tunnelled (the
//! daemon is the gRPC client on it); `/grpc` is served as HTTP/2 by the proxy after the upgrade
//! and every call on it is judged by `policy::grpc`. The daemon's `builder.Entitlements`
//! (network-host and security-insecure off) is the second wall; `dockwarden proxy` logs an
//! error at start-up when it can see that they are not set.

use super::catalogue::Rule;
pub use super::profile::prune_decision;
use super::{Denial, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[
    Rule {
        id: "build.network",
        rationale: "RUN steps may use the default network or none; `host`, `container:` and user networks reach the host's stack or other containers",
        hint: "drop `--network` from `docker build`, or use `--network none` (a private-daemon profile also allows a user bridge network that passes the network rules)",
    },
    Rule {
        id: "build.cgroup_parent",
        rationale: "a build's cgroup parent is set by the proxy (the shared budget), never by the client",
        hint: "drop `--cgroup-parent` from `docker build`",
    },
    Rule {
        id: "build.remote",
        rationale: "with `remote` the daemon itself fetches a URL or runs git on the host (server-side request forgery)",
        hint: "clone or download the context yourself and build from the local directory",
    },
    Rule {
        id: "build.option",
        rationale: "`isolation` other than the default and `securityopt` do not apply to Linux builds and are refused rather than passed on",
        hint: "drop `--isolation` and `--security-opt` from `docker build`",
    },
];

/// Network modes a build may use: the default bridge (all spellings dockerd treats as the
/// default in both builders) and no network.
const NETWORK_MODES: &[&str] = &["", "default", "bridge", "none"];

/// The `remote` value BuildKit uses for "the context comes over the session".
const CLIENT_SESSION: &str = "client-session";

/// `POST /build` and `POST /build/cancel`.
pub fn decide_build(req: &Request, policy: &Policy) -> Result<Permitted, Denial> {
    let q = &req.query;
    // A private daemon's user networks are judged with their facts (`profile::check_build_network`).
    let refused = |m: &&str| {
        !NETWORK_MODES.contains(m) && !super::profile::build_user_network_allowed(m, policy)
    };
    if let Some(m) = q.all("networkmode").into_iter().find(refused) {
        return Err(Denial::new(
            "build.network",
            format!("build network mode `{m}` is not allowed"),
        ));
    }
    if let Some(c) = q.all("cgroupparent").into_iter().find(|c| !c.is_empty()) {
        return Err(Denial::new(
            "build.cgroup_parent",
            format!("build cgroup parent `{c}` is not allowed"),
        ));
    }
    if let Some(r) = q
        .all("remote")
        .into_iter()
        .find(|r| !r.is_empty() && *r != CLIENT_SESSION)
    {
        return Err(Denial::new(
            "build.remote",
            format!("building from remote context `{r}` is not allowed"),
        ));
    }
    if let Some(i) = q
        .all("isolation")
        .into_iter()
        .find(|i| !i.is_empty() && !i.eq_ignore_ascii_case("default"))
    {
        return Err(Denial::new(
            "build.option",
            format!("build isolation `{i}` is not allowed"),
        ));
    }
    if let Some(s) = q.all("securityopt").into_iter().find(|s| !s.is_empty()) {
        return Err(Denial::new(
            "build.option",
            format!("build security option `{s}` is not allowed"),
        ));
    }
    Ok(Permitted::allow(req))
}

/// `POST /session` and `POST /grpc` upgrades: allowed; see the module comment for what guards them.
pub fn decide_buildkit(req: &Request) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::path::CanonicalPath;
    use crate::api::query::Query;
    use crate::api::route;

    fn check(query: &str) -> Option<&'static str> {
        let req = Request {
            method: "POST".into(),
            route: route::classify("POST", &CanonicalPath::parse("/v1.41/build").expect("path")),
            query: Query::parse(Some(query)).expect("query"),
            body: None,
            has_body: true,
        };
        decide_build(&req, &Policy::default_policy())
            .err()
            .map(|d| d.rule)
    }

    #[test]
    fn default_builds_are_allowed() {
        for q in [
            "t=x&dockerfile=Dockerfile",
            "networkmode=default",
            "networkmode=none",
            "networkmode=bridge",
            "remote=client-session&version=2",
            "extrahosts=db:10.0.0.1&buildargs=%7B%22A%22%3A%22b%22%7D&platform=linux/amd64&shmsize=67108864&isolation=default",
        ] {
            assert_eq!(check(q), None, "{q}");
        }
    }

    #[test]
    fn rejects_host_and_container_network_in_build() {
        for q in [
            "networkmode=host",
            "networkmode=container:abc",
            "networkmode=mynet",
            "networkmode=Host",
            "networkmode=bridge&networkmode=host",
        ] {
            assert_eq!(check(q), Some("build.network"), "{q}");
        }
    }

    #[test]
    fn rejects_cgroup_parent_remote_and_odd_options() {
        assert_eq!(check("cgroupparent=/"), Some("build.cgroup_parent"));
        assert_eq!(
            check("remote=https://example.com/ctx.tar"),
            Some("build.remote")
        );
        assert_eq!(check("remote=git://example.com/repo"), Some("build.remote"));
        assert_eq!(check("isolation=hyperv"), Some("build.option"));
        assert_eq!(
            check("securityopt=seccomp=unconfined"),
            Some("build.option")
        );
    }
}
