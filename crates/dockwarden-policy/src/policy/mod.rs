//! The pure policy core: a classified, decoded request plus gathered facts go in; a
//! [`Verdict`] comes out, carrying the ids of the rules that matched.
//!
//! Nothing here does I/O. Host-path checks and daemon look-ups arrive as [`Facts`], gathered
//! beforehand from the list [`needs`] returns. Only this module can build a [`Permitted`], and
//! the forwarding code accepts nothing else.

pub mod build;
pub mod catalogue;
pub mod config;
pub mod container;
mod effective;
pub mod endpoints;
pub mod facts;
pub mod grpc;
pub mod kind;
pub mod limits;
pub mod network;
pub mod pins;
pub mod profile;
pub mod volume;

use crate::api::json::{DecodeError, Json};
use crate::api::query::Query;
use crate::api::route::{Endpoint, Route};

pub use config::Policy;
pub use facts::{FactQuery, Facts};

/// Everything the policy may look at for one request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub route: Route,
    pub query: Query,
    /// The decoded body, when the endpoint's body was read (see [`body_need`]).
    pub body: Option<Json>,
    /// Whether the client sent any body bytes at all.
    pub has_body: bool,
}

/// How much of the body the policy needs before deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyNeed {
    /// The body streams to the daemon untouched (build contexts, archives, image loads).
    Stream,
    /// The body is JSON the policy reads whole, under the configured cap.
    Json,
}

/// A refusal with the rule that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub rule: &'static str,
    /// What is refused, lowercase, user input in backticks.
    pub message: String,
}

impl Denial {
    pub fn new(rule: &'static str, message: impl Into<String>) -> Self {
        Self {
            rule,
            message: message.into(),
        }
    }

    /// The hint from the rule catalogue.
    pub fn hint(&self) -> &'static str {
        catalogue::hint(self.rule)
    }

    /// The text the Docker CLI prints after `Error response from daemon: `.
    pub fn client_message(&self) -> String {
        let hint = self.hint();
        if hint.is_empty() {
            format!("dockwarden: {} (rule {})", self.message, self.rule)
        } else {
            format!(
                "dockwarden: {} (rule {}): {}",
                self.message, self.rule, hint
            )
        }
    }
}

/// A change the policy made to the request before forwarding, recorded for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub rule: &'static str,
    pub what: String,
}

/// A side effect the proxy must carry out before forwarding (pinning a bind source, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Bind-mount the checked host path onto a root-only pin and hand the daemon the pin.
    PinBindSource { host_path: String },
}

/// A request the policy allowed, with any rewrites applied. Only `policy` can build one.
#[derive(Debug, Clone)]
pub struct Permitted {
    endpoint: Endpoint,
    body: Option<Json>,
    query: Option<Query>,
    container: Option<String>,
    rewrites: Vec<Rewrite>,
    effects: Vec<Effect>,
}

impl Permitted {
    pub(in crate::policy) fn allow(req: &Request) -> Self {
        Self {
            endpoint: req.route.endpoint.clone(),
            body: None,
            query: None,
            container: None,
            rewrites: Vec::new(),
            effects: Vec::new(),
        }
    }

    /// Replace the forwarded body with this value (serialised canonically).
    pub(in crate::policy) fn with_body(mut self, body: Json) -> Self {
        self.body = Some(body);
        self
    }

    /// Edits the body that will be forwarded in place: the rules' rewrite if there is one,
    /// else a copy of the client's object (an absent or null body counts as `{}`).
    pub(in crate::policy) fn edit_body<T>(
        &mut self,
        req: &Request,
        f: impl FnOnce(&mut crate::api::json::Object) -> Result<T, Denial>,
    ) -> Result<T, Denial> {
        if self.body.is_none() {
            self.body = Some(match &req.body {
                None | Some(Json::Null) => Json::Object(crate::api::json::Object::new()),
                Some(b) => b.clone(),
            });
        }
        match &mut self.body {
            Some(Json::Object(o)) => f(o),
            _ => Err(Denial::new(
                "request.body.invalid",
                "the body must be a JSON object",
            )),
        }
    }

    pub(in crate::policy) fn with_query(mut self, q: Query) -> Self {
        self.query = Some(q);
        self
    }

    /// Pins the container the request reaches to the full id that was judged: the request is
    /// forwarded naming that id, never the client's name or prefix, so the daemon cannot resolve
    /// the reference to another container between the decision and the forward.
    pub(in crate::policy) fn on_container(mut self, id: &str) -> Self {
        self.container = Some(id.to_owned());
        self
    }

    pub(in crate::policy) fn rewrite(
        mut self,
        rule: &'static str,
        what: impl Into<String>,
    ) -> Self {
        self.rewrites.push(Rewrite {
            rule,
            what: what.into(),
        });
        self
    }

    pub(in crate::policy) fn effect(mut self, e: Effect) -> Self {
        self.effects.push(e);
        self
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
    /// The body to forward in place of the client's, if the policy replaced it.
    pub fn body(&self) -> Option<&Json> {
        self.body.as_ref()
    }
    pub fn query(&self) -> Option<&Query> {
        self.query.as_ref()
    }
    /// The full id of the container named in the path, when the policy judged it.
    pub fn container(&self) -> Option<&str> {
        self.container.as_deref()
    }

    /// The path to forward when the policy pinned the container: the client's canonical path
    /// with its reference replaced by the full id (the version prefix kept). `None`: forward
    /// the client's path.
    pub fn pinned_path(&self, canonical: &crate::api::path::CanonicalPath) -> Option<String> {
        let id = self.container.as_deref()?;
        let suffix = match &self.endpoint {
            Endpoint::ExecCreate(_) => "exec",
            Endpoint::ContainerAttach(_) => "attach",
            Endpoint::ContainerAttachWs(_) => "attach/ws",
            Endpoint::ContainerArchiveGet(_)
            | Endpoint::ContainerArchiveHead(_)
            | Endpoint::ContainerArchivePut(_) => "archive",
            Endpoint::ContainerExport(_) => "export",
            Endpoint::ContainerUpdate(_) => "update",
            Endpoint::ContainerRename(_) => "rename",
            _ => return None,
        };
        // The routes matched `[/v<version>]/containers/{name:.*}/<suffix>`: what precedes the
        // first `/containers/` is the version prefix.
        let path = canonical.as_str();
        let prefix = &path[..path.find("/containers/")?];
        Some(format!("{prefix}/containers/{id}/{suffix}"))
    }
    pub fn rewrites(&self) -> &[Rewrite] {
        &self.rewrites
    }
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }
    /// The ids of the rules that rewrote this request.
    pub fn rules(&self) -> Vec<&'static str> {
        self.rewrites.iter().map(|w| w.rule).collect()
    }
}

/// The outcome of [`decide`].
#[derive(Debug, Clone)]
pub enum Verdict {
    Allow(Permitted),
    Deny(Denial),
}

impl Verdict {
    pub fn rule_ids(&self) -> Vec<&'static str> {
        match self {
            Verdict::Allow(p) => p.rules(),
            Verdict::Deny(d) => vec![d.rule],
        }
    }
}

impl From<DecodeError> for Denial {
    fn from(e: DecodeError) -> Self {
        Denial::new("request.body.invalid", e.to_string())
    }
}

/// Which endpoints have their body read whole before the decision.
pub fn body_need(endpoint: &Endpoint) -> BodyNeed {
    endpoints::body_need(endpoint)
}

/// The facts the policy needs for this request. Pure: it only reads the request.
pub fn needs(req: &Request, policy: &Policy) -> Result<Vec<FactQuery>, Denial> {
    endpoints::needs(req, policy)
}

/// Facts that depend on facts already gathered (an exec instance's container, the volumes
/// of a `VolumesFrom` target): asked for after each round until none is new. Pure.
pub fn needs_more(req: &Request, facts: &Facts) -> Vec<FactQuery> {
    endpoints::needs_more(req, facts)
}

/// Decides one request. Pure: no I/O, no clock, no filesystem.
pub fn decide(req: &Request, facts: &Facts, policy: &Policy) -> Verdict {
    match endpoints::decide(req, facts, policy) {
        Ok(p) => Verdict::Allow(p),
        Err(d) => Verdict::Deny(d),
    }
}
