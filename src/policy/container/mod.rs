//! Container rules: create, start, update and exec create. One file per rule family.
//!
//! PLACEHOLDER: the container-policy issue fills these in; until then create only refuses
//! `Privileged` and passes everything else, so nothing here may be called done.

use super::catalogue::Rule;
use super::{Denial, FactQuery, Facts, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[Rule {
    id: "container.privileged",
    rationale: "a privileged container has every capability and device of the host",
    hint: "remove `--privileged` or `privileged: true`",
}];

fn body_object(req: &Request) -> Result<crate::api::json::Object, Denial> {
    match &req.body {
        None => Ok(crate::api::json::Object::new()),
        Some(crate::api::json::Json::Object(o)) => Ok(o.clone()),
        Some(_) => Err(Denial::new("request.body.invalid", "the body must be a JSON object")),
    }
}

pub fn needs_create(_req: &Request, _policy: &Policy) -> Result<Vec<FactQuery>, Denial> {
    Ok(vec![FactQuery::ContainerCount])
}

pub fn decide_create(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    let body = body_object(req)?;
    let hc = body.object("HostConfig")?.cloned().unwrap_or_else(|| body.clone());
    if hc.bool("Privileged")? == Some(true) {
        return Err(Denial::new("container.privileged", "privileged containers are not allowed"));
    }
    Ok(Permitted::allow(req))
}

pub fn decide_start(req: &Request) -> Result<Permitted, Denial> {
    if req.has_body && !matches!(&req.body, None | Some(crate::api::json::Json::Null)) {
        let empty = matches!(&req.body, Some(crate::api::json::Json::Object(o)) if o.is_empty());
        if !empty {
            return Err(Denial::new("container.start_body", "a start request must not carry a body"));
        }
    }
    Ok(Permitted::allow(req))
}

pub fn decide_update(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    Ok(Permitted::allow(req))
}

pub fn decide_exec(req: &Request) -> Result<Permitted, Denial> {
    let body = body_object(req)?;
    if body.bool("Privileged")? == Some(true) {
        return Err(Denial::new("container.privileged", "privileged exec is not allowed"));
    }
    Ok(Permitted::allow(req))
}
