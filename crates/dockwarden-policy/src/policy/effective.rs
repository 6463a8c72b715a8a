//! The one effective create configuration that every rule family judges.
//!
//! Engines before 27 read the HostConfig fields at the top level of a create body when its
//! `HostConfig` is absent or `null` (20.10 and 26.1 alike, whatever the request's API version:
//! `runconfig.ContainerConfigWrapper.getHostConfig`). `container::model` turns such a body into
//! the shape the proxy forwards, with those fields moved into `HostConfig`. That normalised
//! request is built once here and handed to every family (container, network, limits, pins,
//! kind), so none of them can read a different configuration from the one forwarded.

use std::borrow::Cow;

use super::{Denial, Permitted, Request, container};

/// A create request as every rule family sees it.
pub(super) struct Effective<'a> {
    /// The request with the effective `HostConfig`; the client's own when it was already so.
    pub req: Cow<'a, Request>,
    /// Top-level keys moved into `HostConfig` (legacy clients).
    moved: Vec<String>,
}

/// Normalises a create body; refuses the shapes `container::model` refuses.
pub(super) fn create(req: &Request) -> Result<Effective<'_>, Denial> {
    if container::is_effective(req) {
        return Ok(Effective {
            req: Cow::Borrowed(req),
            moved: Vec::new(),
        });
    }
    let (body, moved) = container::effective_body(req)?;
    let r = Request {
        method: req.method.clone(),
        route: req.route.clone(),
        query: req.query.clone(),
        body: Some(body),
        has_body: req.has_body,
    };
    Ok(Effective {
        req: Cow::Owned(r),
        moved,
    })
}

impl Effective<'_> {
    /// Records the move on an allowed create, for the audit log.
    pub(super) fn note(&self, p: Permitted) -> Permitted {
        if self.moved.is_empty() {
            return p;
        }
        let keys = self
            .moved
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        p.rewrite(
            "container.legacy_hostconfig",
            format!("moved top-level {keys} into `HostConfig`"),
        )
    }
}
