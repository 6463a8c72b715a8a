//! Namespaced sysctls: `net.*` only in a network namespace that is not the host's, IPC sysctls
//! only in an IPC namespace that is not the host's, each from the policy file's lists.
//!
//! With `container:<id>` the sysctl is written into the joined container's namespace, so that
//! container's stored mode is judged. Names are checked lexically first: runc turns `.` into
//! `/` under `/proc/sys`, so a name with `/` or an empty component could reach another file.

use super::{Ctx, Mode, fact_missing};
use crate::api::json::{Json, Object};
use crate::policy::Denial;
use crate::policy::config::Sysctls;

fn deny(msg: String) -> Denial {
    Denial::new("container.sysctl", msg)
}

/// Which namespace a sysctl lives in, by the policy's lists.
enum Ns {
    Net,
    Ipc,
}

pub(super) fn check(hc: &Object, ctx: &Ctx<'_>) -> Result<(), Denial> {
    let lists = &ctx.policy.sysctls;
    for (key, _) in hc.str_map("Sysctls")?.unwrap_or_default() {
        let plain = !key.is_empty()
            && key.split('.').all(|c| {
                !c.is_empty()
                    && c.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
        if !plain {
            return Err(deny(format!("sysctl `{key}` is not a plain dotted name")));
        }
        let ns = if lists.net.iter().any(|p| Sysctls::matches(p, &key)) {
            Ns::Net
        } else if lists.ipc.iter().any(|p| Sysctls::matches(p, &key)) {
            Ns::Ipc
        } else {
            return Err(deny(format!("sysctl `{key}` is not in the allow-list")));
        };
        let (field, flag) = match ns {
            Ns::Net => ("NetworkMode", "network"),
            Ns::Ipc => ("IpcMode", "IPC"),
        };
        own_namespace(hc, field, ctx)?.map_or(Ok(()), |why| {
            Err(deny(format!(
                "sysctl `{key}` needs the container's own {flag} namespace: {why}"
            )))
        })?;
    }
    Ok(())
}

/// `None` when the namespace `field` names is not the host's, else why it is (or may be).
fn own_namespace(hc: &Object, field: &str, ctx: &Ctx<'_>) -> Result<Option<String>, Denial> {
    let mode = hc.str(field)?.unwrap_or("");
    if mode == "host" {
        return Ok(Some(format!("`{field}` is `host`")));
    }
    let Some(target) = mode.strip_prefix("container:") else {
        return Ok(None);
    };
    if ctx.mode == Mode::Stored {
        return Ok(Some(format!("it joins container `{target}` in turn")));
    }
    let fact = match ctx.facts.containers.get(target) {
        None => return Err(fact_missing(&format!("container `{target}`"))),
        Some(None) => return Ok(Some(format!("container `{target}` does not exist"))),
        Some(Some(c)) => c,
    };
    let joined = match &fact.host_config {
        Json::Object(o) => o.str(field)?.unwrap_or("").to_owned(),
        _ => {
            return Ok(Some(format!(
                "the host config of container `{target}` is unreadable"
            )));
        }
    };
    if joined == "host" || joined.starts_with("container:") {
        return Ok(Some(format!(
            "container `{target}` has `{field}` `{joined}`"
        )));
    }
    Ok(None)
}
