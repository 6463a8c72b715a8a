//! Security-profile rules: `SecurityOpt` and the masked / read-only `/proc` and `/sys` paths.
//!
//! dockerd splits each option on the first `=`, else on the first `:` (the deprecated form), and
//! also takes the bare word `disable` (= `label=disable`). Only `no-new-privileges` in its bare,
//! `=true` and `:true` spellings is accepted; every other option, in any spelling, is refused.

use super::{Ctx, Mode};
use crate::api::json::Object;
use crate::policy::Denial;

const SECURITY_OPT_OK: &[&str] = &[
    "no-new-privileges",
    "no-new-privileges=true",
    "no-new-privileges:true",
];

/// The masked paths every engine from 20.10 on applies by default.
const DEFAULT_MASKED: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];
/// The read-only paths every engine from 20.10 on applies by default.
const DEFAULT_READONLY: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

pub(super) fn check(hc: &Object, ctx: &Ctx<'_>) -> Result<(), Denial> {
    for opt in hc.str_list("SecurityOpt")?.unwrap_or_default() {
        if !SECURITY_OPT_OK.contains(&opt.as_str()) {
            let shown: String = opt.chars().take(80).collect();
            return Err(Denial::new(
                "container.security_opt",
                format!("security option `{shown}` is not allowed"),
            ));
        }
    }
    paths(hc, ctx, "MaskedPaths", DEFAULT_MASKED)?;
    paths(hc, ctx, "ReadonlyPaths", DEFAULT_READONLY)
}

/// In a request any non-null list is an override (`[]` unmasks everything) and is refused. A
/// stored HostConfig always holds the daemon's list, which must still contain the defaults.
fn paths(hc: &Object, ctx: &Ctx<'_>, field: &str, defaults: &[&str]) -> Result<(), Denial> {
    let Some(list) = hc.str_list(field)? else {
        return Ok(());
    };
    let ok = match ctx.mode {
        Mode::Create => false,
        Mode::Stored => defaults.iter().all(|d| list.iter().any(|p| p == d)),
    };
    if ok {
        return Ok(());
    }
    Err(Denial::new(
        "container.masked_paths",
        format!("overriding `{field}` is not allowed"),
    ))
}
