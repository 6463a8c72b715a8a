//! Privilege rules: `Privileged`, capabilities, devices, runtime, cgroup parent, OOM score,
//! annotations, sysctls, log driver and tmpfs options.

use super::{Changes, Ctx, Mode};
use crate::api::json::{Json, Object};
use crate::policy::Denial;

/// Log drivers that write locally and open nothing on the daemon's behalf.
const LOG_DRIVERS: &[&str] = &["", "json-file", "local", "none"];

/// tmpfs flags that keep the mount an ordinary scratch area.
const TMPFS_FLAGS: &[&str] = &[
    "rw",
    "ro",
    "exec",
    "noexec",
    "nosuid",
    "nodev",
    "noatime",
    "nodiratime",
    "relatime",
    "strictatime",
    "tmpcopyup",
];
/// tmpfs `key=value` options that only size or own the mount.
const TMPFS_KEYS: &[&str] = &["size", "mode", "uid", "gid", "nr_inodes", "nr_blocks"];

fn deny(rule: &'static str, msg: impl Into<String>) -> Denial {
    Denial::new(rule, msg)
}

/// Runs every privilege rule on a host config.
pub(super) fn check(hc: &Object, ctx: &Ctx<'_>) -> Result<(), Denial> {
    if hc.bool("Privileged")? == Some(true) {
        return Err(deny(
            "container.privileged",
            "privileged containers are not allowed",
        ));
    }
    capabilities(hc)?;
    devices(hc)?;
    match hc.str("Runtime")?.unwrap_or("") {
        "" | "runc" => {}
        other => {
            return Err(deny(
                "container.runtime",
                format!("runtime `{other}` is not allowed"),
            ));
        }
    }
    cgroup_parent(hc, ctx)?;
    if hc.int("OomScoreAdj")?.is_some_and(|n| n < 0) {
        return Err(deny(
            "container.oom_score",
            "a negative OOM score adjustment is not allowed",
        ));
    }
    if hc.str_map("Annotations")?.is_some_and(|a| !a.is_empty()) {
        return Err(deny("container.annotations", "annotations are not allowed"));
    }
    super::sysctls::check(hc, ctx)?;
    if let Some(log) = hc.object("LogConfig")? {
        let t = log.str("Type")?.unwrap_or("");
        if !LOG_DRIVERS.contains(&t) {
            return Err(deny(
                "container.log_driver",
                format!("log driver `{t}` is not allowed"),
            ));
        }
    }
    for (path, opts) in hc.str_map("Tmpfs")?.unwrap_or_default() {
        tmpfs_options(&path, &opts)?;
    }
    Ok(())
}

fn capabilities(hc: &Object) -> Result<(), Denial> {
    // INVARIANT: any CapAdd entry is refused, whatever its spelling (the daemon upper-cases
    // with Unicode rules and adds `CAP_`), so no normalisation is needed to judge it. Re-adding
    // a default capability after `--cap-drop ALL` is refused too: the issue says "in any
    // spelling", and dropping fewer capabilities gives the same container.
    if let Some(cap) = hc.str_list("CapAdd")?.unwrap_or_default().first() {
        return Err(deny(
            "container.capabilities",
            format!("adding capability `{cap}` is not allowed"),
        ));
    }
    // HostConfig.Capabilities (API 1.40 only) replaced the whole set on 19.03.
    if hc.str_list("Capabilities")?.is_some_and(|c| !c.is_empty()) {
        return Err(deny(
            "container.capabilities",
            "the legacy `Capabilities` list is not allowed",
        ));
    }
    Ok(())
}

/// Whether a `CapDrop` entry names `MKNOD` (or `ALL`) the way the daemon reads it: ASCII
/// case folded, with or without the `CAP_` prefix. An entry the daemon would read as MKNOD
/// through Unicode case mapping but this does not is harmless: the proxy then adds its own.
fn drops_mknod(entry: &str) -> bool {
    let e = entry.to_ascii_uppercase();
    let e = e.strip_prefix("CAP_").unwrap_or(&e);
    e == "MKNOD" || e == "ALL"
}

/// Every created container loses `CAP_MKNOD`: no device node made in a bind can become a
/// door to a host device, whatever the daemon's user namespace and device cgroup do
/// (defence in depth, issue 23). Stored containers are not judged by it: joining another
/// container's namespaces gives no device-making power.
pub(super) fn drop_mknod(hc: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<(), Denial> {
    if ctx.mode != Mode::Create {
        return Ok(());
    }
    let mut list = hc.str_list("CapDrop")?.unwrap_or_default();
    if list.iter().any(|c| drops_mknod(c)) {
        return Ok(());
    }
    list.push("MKNOD".to_owned());
    hc.set(
        "CapDrop",
        Json::Array(list.into_iter().map(Json::String).collect()),
    );
    ch.rewrite("container.mknod", "added `MKNOD` to `CapDrop`");
    Ok(())
}

fn devices(hc: &Object) -> Result<(), Denial> {
    if hc.object_list("Devices")?.is_some_and(|d| !d.is_empty()) {
        return Err(deny("container.devices", "host devices are not allowed"));
    }
    if hc
        .object_list("DeviceRequests")?
        .is_some_and(|d| !d.is_empty())
    {
        return Err(deny(
            "container.devices",
            "device requests (GPUs, CDI) are not allowed",
        ));
    }
    if hc
        .str_list("DeviceCgroupRules")?
        .is_some_and(|d| !d.is_empty())
    {
        return Err(deny(
            "container.devices",
            "device cgroup rules are not allowed",
        ));
    }
    Ok(())
}

fn cgroup_parent(hc: &Object, ctx: &Ctx<'_>) -> Result<(), Denial> {
    let parent = hc.str("CgroupParent")?.unwrap_or("");
    if parent.is_empty() {
        return Ok(());
    }
    // A stored container created through the proxy carries the proxy's own parent.
    if ctx.mode == Mode::Stored && ctx.facts.env.cgroup_parent.as_deref() == Some(parent) {
        return Ok(());
    }
    Err(deny(
        "container.cgroup_parent",
        format!("cgroup parent `{parent}` is not allowed"),
    ))
}

/// Checks a `Tmpfs` option string (`HostConfig.Tmpfs` values, comma-separated).
pub(super) fn tmpfs_options(path: &str, opts: &str) -> Result<(), Denial> {
    for opt in opts.split(',').filter(|o| !o.is_empty()) {
        if !tmpfs_option_ok(opt) {
            return Err(deny(
                "container.tmpfs",
                format!("tmpfs option `{opt}` on `{path}` is not allowed"),
            ));
        }
    }
    Ok(())
}

/// Whether one tmpfs mount option is on the safe list (also used for tmpfs-backed volumes).
pub(crate) fn tmpfs_option_ok(opt: &str) -> bool {
    match opt.split_once('=') {
        Some((k, _)) => TMPFS_KEYS.contains(&k),
        None => TMPFS_FLAGS.contains(&opt),
    }
}
