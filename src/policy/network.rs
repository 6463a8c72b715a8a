//! Network rules: only bridge networks with a short list of options.
//!
//! PLACEHOLDER until the surface issue fills it in.

use super::catalogue::Rule;
use super::{Denial, FactQuery, Facts, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[];

pub fn needs_connect(_req: &Request, id: &str) -> Result<Vec<FactQuery>, Denial> {
    Ok(vec![FactQuery::Network(id.to_owned())])
}

pub fn decide_create(req: &Request, _policy: &Policy) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}

pub fn decide_connect(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}
