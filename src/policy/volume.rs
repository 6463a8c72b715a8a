//! Volume rules: only the local driver, without options that bind a host path.
//!
//! PLACEHOLDER until the container-policy issue fills it in.

use super::catalogue::Rule;
use super::{Denial, FactQuery, Facts, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[];

pub fn needs_create(_req: &Request) -> Result<Vec<FactQuery>, Denial> {
    Ok(Vec::new())
}

pub fn decide_create(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}
