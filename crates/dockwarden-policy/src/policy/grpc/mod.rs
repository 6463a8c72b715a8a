//! BuildKit's gRPC API on `POST /grpc`, judged call by call.
//!
//! The proxy terminates the HTTP/2 that buildx and Compose v2 speak after the `/grpc` upgrade
//! (`crates/dockwarden-proxy/src/proxy/grpc.rs`) and asks this module about every call (one HTTP/2 stream): first by
//! its method path ([`classify`]), then, for the methods that need it, by its one request
//! message ([`decide`]). Everything here is pure; decisions are in `docs/networks-build.md`.
//!
//! - `methods`: the exhaustive method table (unknown methods are refused).
//! - `solve`: `Control/Solve`, `LLBBridge/Solve` and the LLB definitions they carry.
//! - `messages`: the prost declarations of the messages read.

pub mod messages;
pub mod methods;
pub mod solve;

use super::catalogue::Rule;
use super::facts::Environment;
use super::{Denial, Rewrite};

pub use methods::{Call, Judged, classify};

pub const RULES: &[Rule] = &[
    Rule {
        id: "build.grpc_method",
        rationale: "only the BuildKit calls that builds with buildx and Compose make are served on `/grpc`; anything else (build containers, history changes, unknown methods) is refused",
        hint: "build with `docker buildx build` or `docker compose build` (the default `docker` driver)",
    },
    Rule {
        id: "build.entitlement",
        rationale: "BuildKit entitlements (`network.host`, `security.insecure`, `device`) and insecure LLB steps give build steps the host's network, privileges or devices",
        hint: "drop `--allow` from `docker buildx build` and `RUN --security=insecure` from the Dockerfile",
    },
    Rule {
        id: "build.frontend",
        rationale: "only the Dockerfile frontend (`dockerfile.v0`), gateway frontends (`gateway.v0`, `# syntax=`) and plain LLB are judged; other frontends are refused",
        hint: "build from a Dockerfile",
    },
    Rule {
        id: "build.llb",
        rationale: "LLB steps the proxy cannot judge (nested builds, unknown source types, unknown network or security modes) are refused",
        hint: "build from a Dockerfile, or send only exec, file, merge, diff and image/local source steps",
    },
];

/// Most bytes of one judged gRPC message. BuildKit's own server takes 16 MiB messages.
pub const MAX_MESSAGE: usize = 16 << 20;

/// What a judged call may forward: its message unchanged, or the policy's rewrite of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    message: Option<Vec<u8>>,
    rewrites: Vec<Rewrite>,
}

impl Allowed {
    pub(in crate::policy) fn unchanged() -> Self {
        Self {
            message: None,
            rewrites: Vec::new(),
        }
    }

    pub(in crate::policy) fn edited(message: Vec<u8>, rewrites: Vec<Rewrite>) -> Self {
        Self {
            message: Some(message),
            rewrites,
        }
    }

    /// Adds a note (a rule that let the call by with a caveat) to the rewrites.
    pub(in crate::policy) fn noting(mut self, note: Option<Rewrite>) -> Self {
        self.rewrites.extend(note);
        self
    }

    /// The message to forward in place of the client's, if the policy changed it.
    pub fn message(&self) -> Option<&[u8]> {
        self.message.as_deref()
    }

    pub fn rewrites(&self) -> &[Rewrite] {
        &self.rewrites
    }

    /// The ids of the rules that rewrote (or noted) this call.
    pub fn rules(&self) -> Vec<&'static str> {
        self.rewrites.iter().map(|w| w.rule).collect()
    }
}

/// Why a judged call is not forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A rule refused it (gRPC `PERMISSION_DENIED`).
    Denied(Denial),
    /// The message could not be read (gRPC `INVALID_ARGUMENT`); never forwarded.
    Invalid(String),
}

impl From<Denial> for Refusal {
    fn from(d: Denial) -> Self {
        Refusal::Denied(d)
    }
}

/// Decides one judged call on its request message (the payload of its one gRPC frame).
pub fn decide(call: Judged, message: &[u8], env: &Environment) -> Result<Allowed, Refusal> {
    match call {
        Judged::ControlSolve => solve::control_solve(message, env),
        Judged::GatewaySolve => solve::gateway_solve(message, env),
        Judged::ResolveSourceMeta => solve::resolve_source_meta(message),
    }
}
