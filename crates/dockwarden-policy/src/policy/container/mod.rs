//! Container rules: create, start, update and exec create. One file per rule family; this
//! module runs them in a fixed order and turns their findings into a [`Permitted`].
//!
//! The same host-config checks run in two modes: [`Mode::Create`] on a request body (where
//! some findings become rewrites) and [`Mode::Stored`] on the stored HostConfig of a container
//! another one wants to join (where nothing can be rewritten, so those findings refuse).

mod binds;
mod foreign;
mod hosts;
mod model;
mod mounts;
mod namespaces;
mod ports;
mod privilege;
mod rules;
mod security;
mod sysctls;
mod verbs;

#[cfg(test)]
mod tests;

use super::{Denial, Effect, FactQuery, Facts, Permitted, Policy, Request};
use crate::api::json::Object;

pub use foreign::RULES as FOREIGN_RULES;
pub use foreign::{
    Judged, check as check_foreign, needs as needs_foreign, needs_more as needs_more_foreign,
};
pub(crate) use privilege::tmpfs_option_ok;
pub use rules::RULES;
pub use verbs::{decide_exec, decide_start, decide_update};

/// Whether a HostConfig arrives in a request or is stored on an existing container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A create request: findings such as `0.0.0.0` ports are rewritten.
    Create,
    /// A join target's stored HostConfig: anything create would rewrite is refused instead.
    Stored,
}

/// What a decision may look at.
pub(crate) struct Ctx<'a> {
    pub facts: &'a Facts,
    pub policy: &'a Policy,
    pub mode: Mode,
}

/// Rewrites and side effects collected while checking a create.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    rewrites: Vec<(&'static str, String)>,
    effects: Vec<Effect>,
}

impl Changes {
    pub(crate) fn rewrite(&mut self, rule: &'static str, what: impl Into<String>) {
        self.rewrites.push((rule, what.into()));
    }
    pub(crate) fn effect(&mut self, e: Effect) {
        if !self.effects.contains(&e) {
            self.effects.push(e);
        }
    }
}

/// A denial for a fact that was not gathered (fail closed).
pub(crate) fn fact_missing(what: &str) -> Denial {
    Denial::new(
        "container.fact_missing",
        format!("{what} was not looked up"),
    )
}

/// The facts a create needs: bind sources, referenced volumes, join targets and, for
/// `PublishAllPorts`, the image. The container count is for the limits rules.
pub fn needs_create(req: &Request, _policy: &Policy) -> Result<Vec<FactQuery>, Denial> {
    let owned;
    let (body, hc) = match model::borrowed(req) {
        Some(pair) => pair,
        None => {
            owned = model::effective(req)?;
            (&owned.body, &owned.hc)
        }
    };
    let mut q = vec![FactQuery::ContainerCount];
    q.extend(binds::needs(hc)?);
    q.extend(mounts::needs(hc)?);
    q.extend(namespaces::needs(hc)?);
    q.extend(ports::needs(body, hc)?);
    q.sort();
    q.dedup();
    Ok(q)
}

/// Follow-up facts of a create: the volumes its `VolumesFrom` targets would bring in.
pub fn needs_more_create(req: &Request, facts: &Facts) -> Result<Vec<FactQuery>, Denial> {
    let cb = model::effective(req)?;
    namespaces::needs_more(&cb.hc, facts)
}

/// Decides a create; an allowed create is always forwarded as the proxy's rewritten body.
pub fn decide_create(req: &Request, facts: &Facts, policy: &Policy) -> Result<Permitted, Denial> {
    // `policy::effective` hands over a body whose top-level host settings were already moved.
    let mut cb = model::effective(req)?;
    let ctx = Ctx {
        facts,
        policy,
        mode: Mode::Create,
    };
    let mut ch = Changes::default();
    check_host_config(&mut cb.hc, &ctx, &mut ch)?;
    ports::publish_all(&cb.body, &mut cb.hc, &ctx, &mut ch)?;
    hosts::apply(&mut cb.hc, &mut ch)?;
    let mut p = Permitted::allow(req).with_body(cb.into_json());
    for (rule, what) in ch.rewrites {
        p = p.rewrite(rule, what);
    }
    for e in ch.effects {
        p = p.effect(e);
    }
    Ok(p)
}

/// True when the create body already has its host settings in `HostConfig` alone.
pub(crate) fn is_effective(req: &Request) -> bool {
    model::borrowed(req).is_some()
}

/// The create body the daemon will read, with top-level host settings moved into
/// `HostConfig`, and the keys that were moved.
pub(crate) fn effective_body(
    req: &Request,
) -> Result<(crate::api::json::Json, Vec<String>), Denial> {
    let cb = model::effective(req)?;
    let moved = cb.moved.clone();
    Ok((cb.into_json(), moved))
}

/// Every host-config rule, in both modes. In [`Mode::Create`] it may rewrite `hc`.
pub(crate) fn check_host_config(
    hc: &mut Object,
    ctx: &Ctx<'_>,
    ch: &mut Changes,
) -> Result<(), Denial> {
    privilege::check(hc, ctx)?;
    privilege::drop_mknod(hc, ctx, ch)?;
    security::check(hc, ctx)?;
    namespaces::check(hc, ctx, ch)?;
    binds::check(hc, ctx, ch)?;
    mounts::check(hc, ctx, ch)?;
    ports::check_bindings(hc, ctx, ch)?;
    Ok(())
}
