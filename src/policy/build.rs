//! Build rules: the classic `/build` parameters and BuildKit's `/session` and `/grpc`.
//!
//! PLACEHOLDER until the surface issue fills it in.

use super::catalogue::Rule;
use super::{Denial, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[];

pub fn decide_build(req: &Request, _policy: &Policy) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}

pub fn decide_buildkit(req: &Request) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}
