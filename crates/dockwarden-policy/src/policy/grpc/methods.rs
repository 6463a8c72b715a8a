//! The gRPC method table for `/grpc`: every method is allowed, judged on its message, or
//! refused. The match has no wildcard arm but the refusal of unknown methods.

use crate::policy::config::Policy;
use crate::policy::{Denial, profile};

/// What a method path needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// Forwarded as it is (read-only, or acting only on results already judged).
    Allow,
    /// Forwarded only after its request message is judged.
    Judge(Judged),
    /// Refused without reading its messages.
    Deny(Denial),
}

/// The methods whose request message is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    ControlSolve,
    GatewaySolve,
    ResolveSourceMeta,
}

const CONTROL: &str = "/moby.buildkit.v1.Control/";
const GATEWAY: &str = "/moby.buildkit.v1.frontend.LLBBridge/";
const TRACES: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Classifies a gRPC method path (`/package.Service/Method`, exact, case-sensitive as grpc-go
/// routes it).
pub fn classify(path: &str, policy: &Policy) -> Call {
    let deny = |msg: &str| Call::Deny(Denial::new("build.grpc_method", msg.to_owned()));
    if let Some(m) = path.strip_prefix(CONTROL) {
        return match m {
            "DiskUsage" | "Status" | "ListWorkers" | "Info" | "ListenBuildHistory" => Call::Allow,
            "Solve" => Call::Judge(Judged::ControlSolve),
            // INVARIANT: one rule id for build-cache prune, whichever path it comes by.
            // The same decision as `POST /build/prune` (allowed under `private-daemon`).
            "Prune" => match profile::prune_decision(policy) {
                Ok(()) => Call::Allow,
                Err(d) => Call::Deny(Denial::new(
                    d.rule,
                    "BuildKit cache prune acts on the whole daemon's build cache and is not allowed",
                )),
            },
            // The buildx `docker` driver runs its session over `POST /session`; the control
            // API's session stream would let the daemon call back into the client unseen.
            "Session" => deny(
                "the BuildKit session over the control API is not served; the docker driver uses `/session`",
            ),
            "UpdateBuildHistory" => {
                deny("changing or deleting the daemon's build history is not allowed")
            }
            other => Call::Deny(Denial::new(
                "build.grpc_method",
                format!("BuildKit method `{}` is not available", truncate(other)),
            )),
        };
    }
    if let Some(m) = path.strip_prefix(GATEWAY) {
        return match m {
            "ResolveImageConfig" | "ReadFile" | "ReadDir" | "StatFile" | "Evaluate" | "Ping"
            | "Return" | "Inputs" | "Warn" => Call::Allow,
            "Solve" => Call::Judge(Judged::GatewaySolve),
            "ResolveSourceMeta" => Call::Judge(Judged::ResolveSourceMeta),
            "NewContainer" | "ReleaseContainer" | "ExecProcess" => deny(
                "build containers (`docker buildx build --invoke`, `docker buildx debug`) are not available",
            ),
            other => Call::Deny(Denial::new(
                "build.grpc_method",
                format!(
                    "BuildKit gateway method `{}` is not available",
                    truncate(other)
                ),
            )),
        };
    }
    // Health checks are read-only. buildx uploads its own trace spans, which BuildKit keeps
    // with the build's history; neither reaches the host.
    if path == "/grpc.health.v1.Health/Check" || path == TRACES {
        return Call::Allow;
    }
    Call::Deny(Denial::new(
        "build.grpc_method",
        format!("gRPC method `{}` is not available", truncate(path)),
    ))
}

/// User input in a message, bounded.
fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buildkit_prune_follows_the_profile_like_build_prune() {
        let private = Policy::from_toml(
            &crate::policy::config::DEFAULT_POLICY
                .replace("profile = \"default\"", "profile = \"private-daemon\""),
        )
        .expect("private-daemon policy");
        assert_eq!(
            classify("/moby.buildkit.v1.Control/Prune", &private),
            Call::Allow
        );
        match classify("/moby.buildkit.v1.Control/Prune", &Policy::default_policy()) {
            Call::Deny(d) => assert_eq!(d.rule, "system.prune"),
            other => panic!("default profile allowed BuildKit prune: {other:?}"),
        }
    }

    #[test]
    fn read_only_methods_are_allowed_and_unknown_ones_refused() {
        let pol = Policy::default_policy();
        for m in [
            "DiskUsage",
            "Status",
            "ListWorkers",
            "Info",
            "ListenBuildHistory",
        ] {
            assert_eq!(classify(&format!("{CONTROL}{m}"), &pol), Call::Allow, "{m}");
        }
        assert_eq!(
            classify("/moby.buildkit.v1.Control/Solve", &pol),
            Call::Judge(Judged::ControlSolve)
        );
        assert_eq!(
            classify("/moby.buildkit.v1.frontend.LLBBridge/Solve", &pol),
            Call::Judge(Judged::GatewaySolve)
        );
        let rule = |p: &str| match classify(p, &pol) {
            Call::Deny(d) => Some(d.rule),
            _ => None,
        };
        assert_eq!(
            rule("/moby.buildkit.v1.Control/Prune"),
            Some("system.prune")
        );
        for p in [
            "/moby.buildkit.v1.Control/solve",
            "/moby.buildkit.v1.Control/Nope",
            "/moby.buildkit.v1.Control/Session",
            "/moby.buildkit.v1.frontend.LLBBridge/NewContainer",
            "/moby.buildkit.v1.frontend.LLBBridge/ExecProcess",
            "/x.Y/Z",
            "",
            "/moby.buildkit.v1.Control/Solve/",
            "/grpc.health.v1.Health/Watch",
        ] {
            assert_eq!(rule(p), Some("build.grpc_method"), "{p}");
        }
    }
}
