//! Namespace rules: no host namespaces, a private cgroup namespace, and joins of other
//! containers (`container:` modes, `VolumesFrom`, `Links`) only when the target's own stored
//! HostConfig passes this same policy.
//!
//! The mode strings are compared exactly as dockerd does (case-sensitive `host`, prefix
//! `container:`). A join target is re-checked in [`Mode::Stored`], where a target that itself
//! joins another container is refused: its own target could not be looked up in the same pass.

use super::{Changes, Ctx, Mode, check_host_config, fact_missing};
use crate::api::json::{Json, Object};
use crate::policy::{Denial, FactQuery};

/// Namespace fields and the flag that would set them to `host`.
const HOST_MODES: &[(&str, &str)] = &[
    ("NetworkMode", "--network host"),
    ("PidMode", "--pid host"),
    ("IpcMode", "--ipc host"),
    ("UTSMode", "--uts host"),
    ("UsernsMode", "--userns host"),
    ("CgroupnsMode", "--cgroupns host"),
];

/// Mode fields that may name `container:<ref>`.
const JOIN_MODES: &[&str] = &["NetworkMode", "PidMode", "IpcMode"];

/// One reference to another container.
#[derive(Debug)]
struct Join {
    /// Where it came from, for messages (`NetworkMode`, `VolumesFrom`, `Links`).
    field: &'static str,
    /// The reference as the daemon will resolve it.
    reference: String,
}

fn joins(hc: &Object) -> Result<Vec<Join>, Denial> {
    let mut out = Vec::new();
    for field in JOIN_MODES {
        if let Some(r) = hc.str(field)?.and_then(|m| m.strip_prefix("container:")) {
            out.push(Join {
                field,
                reference: r.to_owned(),
            });
        }
    }
    for spec in hc.str_list("VolumesFrom")?.unwrap_or_default() {
        let r = spec.split_once(':').map_or(spec.as_str(), |(r, _)| r);
        out.push(Join {
            field: "VolumesFrom",
            reference: r.to_owned(),
        });
    }
    for link in hc.str_list("Links")?.unwrap_or_default() {
        let name = link.split(':').next().unwrap_or("");
        out.push(Join {
            field: "Links",
            reference: name.strip_prefix('/').unwrap_or(name).to_owned(),
        });
    }
    if let Some(j) = out.iter().find(|j| j.reference.is_empty()) {
        return Err(Denial::new(
            "container.join",
            format!("`{}` names no container", j.field),
        ));
    }
    Ok(out)
}

/// The containers a create joins.
pub(super) fn needs(hc: &Object) -> Result<Vec<FactQuery>, Denial> {
    Ok(joins(hc)?
        .into_iter()
        .map(|j| FactQuery::Container(j.reference))
        .collect())
}

pub(super) fn check(hc: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<(), Denial> {
    for (field, flag) in HOST_MODES {
        if hc.str(field)? == Some("host") {
            return Err(Denial::new(
                "container.namespace.host",
                format!("the host's namespace (`{flag}`) is not allowed"),
            ));
        }
    }
    if hc.str("Cgroup")?.is_some_and(|c| !c.is_empty()) {
        return Err(Denial::new(
            "container.cgroup_join",
            "a `Cgroup` spec (another container's cgroup) is not allowed",
        ));
    }
    cgroupns(hc, ctx, ch)?;
    for j in joins(hc)? {
        if ctx.mode == Mode::Stored {
            return Err(Denial::new(
                "container.join",
                format!(
                    "it joins container `{}` through `{}` in turn",
                    j.reference, j.field
                ),
            ));
        }
        let id = check_target(&j, ctx)?;
        if j.field == "VolumesFrom" {
            check_volumes_brought_in(&j, ctx)?;
        }
        pin_reference(hc, &j, &id, ch)?;
    }
    Ok(())
}

/// Forces `CgroupnsMode: private` on create; a stored target must have it.
fn cgroupns(hc: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<(), Denial> {
    match (hc.str("CgroupnsMode")?.unwrap_or(""), ctx.mode) {
        ("private", _) => Ok(()),
        ("", Mode::Create) => {
            hc.set("CgroupnsMode", Json::String("private".into()));
            ch.rewrite("container.cgroupns", "set `CgroupnsMode` to `private`");
            Ok(())
        }
        (other, _) => Err(Denial::new(
            "container.namespace.host",
            format!("cgroup namespace mode `{other}` is not allowed"),
        )),
    }
}

/// The volumes of each `VolumesFrom` target, once the target was looked up: the daemon
/// copies every mount point of the target, named volumes included.
pub(super) fn needs_more(
    hc: &Object,
    facts: &crate::policy::Facts,
) -> Result<Vec<FactQuery>, Denial> {
    let mut q = Vec::new();
    for j in joins(hc)?.into_iter().filter(|j| j.field == "VolumesFrom") {
        if let Some(Some(c)) = facts.containers.get(&j.reference) {
            q.extend(c.volumes.iter().cloned().map(FactQuery::Volume));
        }
    }
    Ok(q)
}

/// Every volume `VolumesFrom` brings in meets the rules of a direct mount of it: a target
/// that passes its own check may still mount a local volume with `o=bind,device=/etc`.
fn check_volumes_brought_in(j: &Join, ctx: &Ctx<'_>) -> Result<(), Denial> {
    let Some(Some(c)) = ctx.facts.containers.get(&j.reference) else {
        return Ok(());
    };
    for name in &c.volumes {
        super::mounts::check_existing_volume(name, ctx).map_err(|d| {
            Denial::new(
                d.rule,
                format!(
                    "`VolumesFrom` container `{}` brings in {}",
                    j.reference, d.message
                ),
            )
        })?;
    }
    Ok(())
}

/// Re-checks the target's stored HostConfig; returns its full ID.
fn check_target(j: &Join, ctx: &Ctx<'_>) -> Result<String, Denial> {
    let fact = match ctx.facts.containers.get(&j.reference) {
        None => return Err(fact_missing(&format!("container `{}`", j.reference))),
        Some(None) => {
            return Err(Denial::new(
                "container.join",
                format!(
                    "container `{}` named in `{}` does not exist",
                    j.reference, j.field
                ),
            ));
        }
        Some(Some(c)) => c,
    };
    let refuse = |why: String| {
        Denial::new(
            "container.join",
            format!(
                "joining container `{}` through `{}` is not allowed: {why}",
                j.reference, j.field
            ),
        )
    };
    let Json::Object(stored) = &fact.host_config else {
        return Err(refuse("its host config is unreadable".into()));
    };
    let mut stored = stored.clone();
    let sub = super::Ctx {
        facts: ctx.facts,
        policy: ctx.policy,
        mode: Mode::Stored,
    };
    check_host_config(&mut stored, &sub, &mut Changes::default()).map_err(|d| refuse(d.message))?;
    Ok(fact.id.clone())
}

/// Rewrites `container:<ref>` and `VolumesFrom` to the full ID the policy checked, so a
/// container renamed between the check and the create cannot take the reference over.
fn pin_reference(hc: &mut Object, j: &Join, id: &str, ch: &mut Changes) -> Result<(), Denial> {
    if id.is_empty() || id == j.reference {
        return Ok(());
    }
    match j.field {
        "VolumesFrom" => {
            let list = hc.str_list("VolumesFrom")?.unwrap_or_default();
            let new: Vec<Json> = list
                .into_iter()
                .map(|s| match s.split_once(':') {
                    Some((r, mode)) if r == j.reference => format!("{id}:{mode}"),
                    None if s == j.reference => id.to_owned(),
                    _ => s,
                })
                .map(Json::String)
                .collect();
            hc.set("VolumesFrom", Json::Array(new));
        }
        "Links" => return Ok(()),
        field => hc.set(field, Json::String(format!("container:{id}"))),
    }
    ch.rewrite(
        "container.join",
        format!(
            "`{}` now names container `{}` by its full ID",
            j.field, j.reference
        ),
    );
    Ok(())
}
