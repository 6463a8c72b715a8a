//! `ExtraHosts`: every container can reach the host's published (loopback-bound) services
//! through `host.docker.internal`, unless the user named that host already.
//!
//! `host-gateway` is resolved by the daemon (20.10 and later) to the default bridge's gateway.

use super::Changes;
use crate::api::json::{Json, Object};
use crate::policy::Denial;

const HOST: &str = "host.docker.internal";
const ENTRY: &str = "host.docker.internal:host-gateway";

/// The host name of an `ExtraHosts` entry (`name:ip`; newer CLIs also accept `name=ip`).
fn host_of(entry: &str) -> &str {
    entry.split([':', '=']).next().unwrap_or("").trim()
}

pub(super) fn apply(hc: &mut Object, ch: &mut Changes) -> Result<(), Denial> {
    // A container in another's network namespace shares its /etc/hosts; the daemon refuses
    // ExtraHosts there ("conflicting options").
    if hc
        .str("NetworkMode")?
        .is_some_and(|m| m.starts_with("container:"))
    {
        return Ok(());
    }
    let mut list = hc.str_list("ExtraHosts")?.unwrap_or_default();
    if list.iter().any(|e| host_of(e).eq_ignore_ascii_case(HOST)) {
        return Ok(());
    }
    list.push(ENTRY.to_owned());
    hc.set(
        "ExtraHosts",
        Json::Array(list.into_iter().map(Json::String).collect()),
    );
    ch.rewrite("container.extra_hosts", format!("added `{ENTRY}`"));
    Ok(())
}
