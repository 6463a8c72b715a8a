//! Limits: the container cap and the shared cgroup budget.
//!
//! PLACEHOLDER until the surface issue fills it in.

use super::catalogue::Rule;
use super::{Denial, Facts, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[];

/// Applies limit rewrites to an allowed request.
pub fn apply(_req: &Request, _facts: &Facts, _policy: &Policy, p: Permitted) -> Result<Permitted, Denial> {
    Ok(p)
}
