//! The other verbs that can carry container settings: start (no body), update (only the
//! resource fields the daemon applies) and exec create (no `Privileged`).

use crate::api::json::{Json, Object};
use crate::policy::{Denial, Facts, Permitted, Policy, Request};

fn body_object(req: &Request) -> Result<Object, Denial> {
    match &req.body {
        None | Some(Json::Null) => Ok(Object::new()),
        Some(Json::Object(o)) => Ok(o.clone()),
        Some(_) => Err(Denial::new(
            "request.body.invalid",
            "the body must be a JSON object",
        )),
    }
}

/// On API < 1.24 a start body replaces the HostConfig (the proxy refuses those versions too);
/// only no body, `null` or `{}` is accepted.
pub fn decide_start(req: &Request) -> Result<Permitted, Denial> {
    let empty = match &req.body {
        None | Some(Json::Null) => true,
        Some(Json::Object(o)) => o.is_empty(),
        Some(_) => false,
    };
    if !empty {
        return Err(Denial::new(
            "container.start_body",
            "a start request must not carry a body",
        ));
    }
    Ok(Permitted::allow(req))
}

/// Update decodes the whole `Resources` block; the daemon ignores the device and cgroup fields
/// today, but a field the create rules refuse is refused here too rather than trusted to stay
/// ignored.
pub fn decide_update(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    let body = body_object(req)?;
    if body.object_list("Devices")?.is_some_and(|d| !d.is_empty())
        || body
            .object_list("DeviceRequests")?
            .is_some_and(|d| !d.is_empty())
        || body
            .str_list("DeviceCgroupRules")?
            .is_some_and(|d| !d.is_empty())
    {
        return Err(Denial::new(
            "container.devices",
            "devices cannot be added by an update",
        ));
    }
    if let Some(parent) = body.str("CgroupParent")?.filter(|p| !p.is_empty()) {
        return Err(Denial::new(
            "container.cgroup_parent",
            format!("cgroup parent `{parent}` is not allowed"),
        ));
    }
    Ok(Permitted::allow(req))
}

/// Exec create: `Privileged` gives the process every capability; `User` is fine.
pub fn decide_exec(req: &Request) -> Result<Permitted, Denial> {
    let body = body_object(req)?;
    if body.bool("Privileged")? == Some(true) {
        return Err(Denial::new(
            "container.privileged",
            "privileged exec is not allowed",
        ));
    }
    Ok(Permitted::allow(req))
}
