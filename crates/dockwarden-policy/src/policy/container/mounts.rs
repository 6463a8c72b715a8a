//! `Mounts` (the `--mount` syntax), `VolumeDriver`, and the check of existing named volumes.
//!
//! Only `bind`, `volume` and `tmpfs` are understood; any other type (`npipe`, `cluster`,
//! `image`, unknown or missing) is refused. A `volume` mount with `DriverConfig` creates the
//! volume when it does not exist, so its driver and options get the `/volumes/create` rules; an
//! existing volume is checked as the daemon reports it.

use super::binds::{Source, check_propagation, judge_source};
use super::{Changes, Ctx, Mode, fact_missing};
use crate::api::json::{Json, Object};
use crate::path_clean::clean;
use crate::policy::volume::check_local_options;
use crate::policy::{Denial, Effect, FactQuery};

fn driver_ok(d: &str) -> bool {
    d.is_empty() || d == "local"
}

/// The host paths and volumes that `Mounts` name.
pub(super) fn needs(hc: &Object) -> Result<Vec<FactQuery>, Denial> {
    let mut q = Vec::new();
    for m in hc.object_list("Mounts")?.unwrap_or_default() {
        let source = m.str("Source")?.unwrap_or("");
        match m.str("Type")?.unwrap_or("") {
            "bind" if source.starts_with('/') => q.push(FactQuery::HostPath(clean(source))),
            "volume" if !source.is_empty() => q.push(FactQuery::Volume(source.to_owned())),
            _ => {}
        }
    }
    Ok(q)
}

/// Checks `VolumeDriver` and every `Mounts` entry; rewrites Docker-socket binds.
pub(super) fn check(hc: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<(), Denial> {
    let vd = hc.str("VolumeDriver")?.unwrap_or("");
    if !driver_ok(vd) {
        return Err(Denial::new(
            "container.volume.driver",
            format!("volume driver `{vd}` is not allowed"),
        ));
    }
    let Some(list) = hc.object_list("Mounts")? else {
        return Ok(());
    };
    let mut out = Vec::with_capacity(list.len());
    let mut changed = false;
    for mut m in list {
        changed |= check_one(&mut m, ctx, ch)?;
        out.push(Json::Object(m));
    }
    if changed {
        hc.set("Mounts", Json::Array(out));
    }
    Ok(())
}

/// Checks one mount; returns whether it was rewritten.
fn check_one(m: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<bool, Denial> {
    let source = m.str("Source")?.unwrap_or("").to_owned();
    match m.str("Type")?.unwrap_or("") {
        "bind" => bind(m, &source, ctx, ch),
        "volume" => {
            if let Some(opts) = m.object("VolumeOptions")? {
                driver_config(opts)?;
            }
            if !source.is_empty() {
                check_existing_volume(&source, ctx)?;
            }
            Ok(false)
        }
        "tmpfs" => Ok(false),
        other => Err(Denial::new(
            "container.mount.type",
            format!("mount type `{other}` is not allowed"),
        )),
    }
}

fn bind(m: &mut Object, source: &str, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<bool, Denial> {
    if !source.starts_with('/') {
        return Err(Denial::new(
            "container.mount.invalid",
            format!("bind mount source `{source}` is not an absolute path"),
        ));
    }
    if let Some(b) = m.object("BindOptions")? {
        check_propagation(b.str("Propagation")?.into_iter(), source)?;
    }
    match judge_source(source, ctx)? {
        Source::Workspace(path) => {
            // Forward the cleaned path the policy judged: the kernel resolves a `..` after a
            // symlink physically, `path.Clean` lexically.
            let changed = path != source;
            if changed {
                m.set("Source", Json::String(path.clone()));
            }
            ch.effect(Effect::PinBindSource { host_path: path });
            Ok(changed)
        }
        Source::DockerSocket => {
            let sock = ctx.facts.env.proxy_socket.clone();
            if source == sock {
                return Ok(false);
            }
            ch.rewrite(
                "container.bind.docker_socket",
                format!("mount of `{source}` now uses the proxy socket"),
            );
            m.set("Source", Json::String(sock));
            Ok(true)
        }
    }
}

/// `VolumeOptions.DriverConfig`: the driver and options a missing volume is created with.
fn driver_config(opts: &Object) -> Result<(), Denial> {
    let Some(dc) = opts.object("DriverConfig")? else {
        return Ok(());
    };
    let name = dc.str("Name")?.unwrap_or("");
    if !driver_ok(name) {
        return Err(Denial::new(
            "container.volume.driver",
            format!("volume driver `{name}` is not allowed"),
        ));
    }
    let options = dc.str_map("Options")?.unwrap_or_default();
    check_local_options(&options).map_err(|m| Denial::new("container.volume.options", m))
}

/// A named volume that already exists keeps its creation options: check them. One that does
/// not exist is created by the daemon with `VolumeDriver` (checked) and no options.
pub(super) fn check_existing_volume(name: &str, ctx: &Ctx<'_>) -> Result<(), Denial> {
    if ctx.mode == Mode::Stored {
        // A join target's stored `Binds` name volumes by the name they had at its create;
        // what `VolumesFrom` really brings in is the target's mounted volumes, looked up in a
        // second round and checked in create mode (`namespaces::check_volumes_brought_in`).
        return Ok(());
    }
    let v = match ctx.facts.volumes.get(name) {
        None => return Err(fact_missing(&format!("volume `{name}`"))),
        Some(None) => return Ok(()),
        Some(Some(v)) => v,
    };
    if !driver_ok(&v.driver) {
        return Err(Denial::new(
            "container.volume.driver",
            format!("volume `{name}` uses driver `{}`", v.driver),
        ));
    }
    check_local_options(&v.options)
        .map_err(|m| Denial::new("container.volume.options", format!("volume `{name}`: {m}")))
}
