//! Volume rules: only the local driver, and no local-driver options that mount a host path or
//! device. `POST /volumes/create` here; the same option check guards `Mounts[].VolumeOptions`
//! and existing volumes named by a container create.
//!
//! The local driver mounts `device` on the volume directory with `type` and `o` whenever `type`
//! or `device` is set, so `type=none,o=bind,device=/etc` is a bind of `/etc` (and any `o`
//! containing `bind` makes the kernel ignore `type`). The one form allowed is a tmpfs:
//! `type=tmpfs`, `device=tmpfs` and `o` made only of the safe tmpfs options. `size` is allowed.

use super::catalogue::Rule;
use super::container::tmpfs_option_ok;
use super::{Denial, FactQuery, Facts, Permitted, Policy, Request};
use crate::api::json::Json;

pub const RULES: &[Rule] = &[
    Rule {
        id: "volume.driver",
        rationale: "volume drivers other than `local` are plugins that run on the host; cluster volumes belong to swarm",
        hint: "use the local volume driver (omit `driver`)",
    },
    Rule {
        id: "volume.options",
        rationale: "local driver options `type`/`o`/`device` mount arbitrary host paths, block devices or network filesystems",
        hint: "omit `driver_opts`, or use `type: tmpfs, device: tmpfs` with size/mode/uid/gid options",
    },
];

/// Checks local-driver options; the error is the message for the caller's rule.
pub(crate) fn check_local_options(opts: &[(String, String)]) -> Result<(), String> {
    let get = |k: &str| {
        opts.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    let (ty, o, dev) = (get("type"), get("o"), get("device"));
    if ty.is_none() && o.is_none() && dev.is_none() {
        return Ok(());
    }
    let tmpfs = ty == Some("tmpfs")
        && dev == Some("tmpfs")
        && o.unwrap_or("")
            .split(',')
            .filter(|x| !x.is_empty())
            .all(tmpfs_option_ok);
    if tmpfs {
        return Ok(());
    }
    let shown = |v: Option<&str>| {
        v.map(|s| format!("`{s}`"))
            .unwrap_or_else(|| "unset".into())
    };
    Err(format!(
        "local volume options type={} o={} device={} are not allowed",
        shown(ty),
        shown(o),
        shown(dev)
    ))
}

pub fn needs_create(_req: &Request) -> Result<Vec<FactQuery>, Denial> {
    Ok(Vec::new())
}

pub fn decide_create(req: &Request, _facts: &Facts, _policy: &Policy) -> Result<Permitted, Denial> {
    let body = match &req.body {
        None | Some(Json::Null) => return Ok(Permitted::allow(req)),
        Some(Json::Object(o)) => o,
        Some(_) => {
            return Err(Denial::new(
                "request.body.invalid",
                "the body must be a JSON object",
            ));
        }
    };
    let driver = body.str("Driver")?.unwrap_or("");
    if !(driver.is_empty() || driver == "local") {
        return Err(Denial::new(
            "volume.driver",
            format!("volume driver `{driver}` is not allowed"),
        ));
    }
    if body.field("ClusterVolumeSpec").is_some() {
        return Err(Denial::new(
            "volume.driver",
            "cluster volumes are not allowed",
        ));
    }
    let opts = body.str_map("DriverOpts")?.unwrap_or_default();
    check_local_options(&opts).map_err(|m| Denial::new("volume.options", m))?;
    Ok(Permitted::allow(req))
}
