//! The effective create configuration: what dockerd will treat as the container's HostConfig.
//!
//! Engines up to 26.x decode the create body into a wrapper that embeds `*Config`, `*HostConfig`
//! (flattened, including `Resources`) and an inner `HostConfig`. When the inner one is absent or
//! `null`, **the top-level HostConfig-named keys are the host config**; when it is present, it
//! wins, but a few top-level fields (`Memory`, `VolumeDriver`, ...) are still copied in. 27.0
//! dropped all of this. So that every supported engine sees what the policy judged:
//! - no inner `HostConfig`: the top-level HostConfig keys are *moved* into a new inner
//!   `HostConfig` (recorded as a rewrite), and judged there;
//! - inner `HostConfig` present: any non-null top-level HostConfig key is refused.

use crate::api::json::{Json, Object, fold_eq};
use crate::policy::{Denial, Request};

/// Every field name of `HostConfig` and its embedded `Resources` from 20.10 to 29.x, plus the
/// wrapper's legacy `Cpuset`.
pub(super) const HOST_CONFIG_FIELDS: &[&str] = &[
    "Binds",
    "ContainerIDFile",
    "LogConfig",
    "NetworkMode",
    "PortBindings",
    "RestartPolicy",
    "AutoRemove",
    "VolumeDriver",
    "VolumesFrom",
    "ConsoleSize",
    "Annotations",
    "CapAdd",
    "CapDrop",
    "Capabilities",
    "CgroupnsMode",
    "Dns",
    "DnsOptions",
    "DnsSearch",
    "ExtraHosts",
    "GroupAdd",
    "IpcMode",
    "Cgroup",
    "Links",
    "OomScoreAdj",
    "PidMode",
    "Privileged",
    "PublishAllPorts",
    "ReadonlyRootfs",
    "SecurityOpt",
    "StorageOpt",
    "Tmpfs",
    "UTSMode",
    "UsernsMode",
    "ShmSize",
    "Sysctls",
    "Runtime",
    "Isolation",
    "Mounts",
    "MaskedPaths",
    "ReadonlyPaths",
    "Init",
    // Resources (embedded in HostConfig)
    "CpuShares",
    "Memory",
    "NanoCpus",
    "CgroupParent",
    "BlkioWeight",
    "BlkioWeightDevice",
    "BlkioDeviceReadBps",
    "BlkioDeviceWriteBps",
    "BlkioDeviceReadIOps",
    "BlkioDeviceWriteIOps",
    "CpuPeriod",
    "CpuQuota",
    "CpuRealtimePeriod",
    "CpuRealtimeRuntime",
    "CpusetCpus",
    "CpusetMems",
    "Devices",
    "DeviceCgroupRules",
    "DeviceRequests",
    "KernelMemory",
    "KernelMemoryTCP",
    "MemoryReservation",
    "MemorySwap",
    "MemorySwappiness",
    "OomKillDisable",
    "PidsLimit",
    "Ulimits",
    "CpuCount",
    "CpuPercent",
    "IOMaximumIOps",
    "IOMaximumBandwidth",
];

/// The wrapper's legacy `Cpuset` string (fills `CpusetCpus` on ≤ 26.x). Refused: no client sends it.
const LEGACY_CPUSET: &str = "Cpuset";

/// A create body split into the container config and the effective host config.
#[derive(Debug, Clone)]
pub(super) struct CreateBody {
    /// The top-level object without the `HostConfig` key.
    pub body: Object,
    /// The effective host config.
    pub hc: Object,
    /// Top-level keys that were moved into `HostConfig` (legacy clients).
    pub moved: Vec<String>,
}

fn is_host_config_field(key: &str) -> bool {
    HOST_CONFIG_FIELDS.iter().any(|f| fold_eq(f, key))
}

/// Splits a create body the way the daemon will read it; refuses ambiguous mixes.
pub(super) fn effective(req: &Request) -> Result<CreateBody, Denial> {
    let empty = Object::new();
    let top = match &req.body {
        None | Some(Json::Null) => &empty,
        Some(Json::Object(o)) => o,
        Some(_) => {
            return Err(Denial::new(
                "request.body.invalid",
                "the body must be a JSON object",
            ));
        }
    };
    if top.field(LEGACY_CPUSET).is_some() {
        return Err(Denial::new(
            "container.legacy_hostconfig",
            "the legacy top-level `Cpuset` field is not accepted",
        ));
    }
    let inner = top.object("HostConfig")?.cloned();
    let mut body = Object::new();
    let mut hc = Object::new();
    let mut moved = Vec::new();
    for (k, v) in top.entries() {
        if fold_eq(k, "HostConfig") {
            continue;
        }
        if !is_host_config_field(k) {
            body.push_unique(k, v.clone());
            continue;
        }
        match (&inner, v) {
            (Some(_), Json::Null) => {}
            (Some(_), _) => {
                return Err(Denial::new(
                    "container.legacy_hostconfig",
                    format!(
                        "top-level host setting `{k}` next to `HostConfig` is ambiguous across engine versions"
                    ),
                ));
            }
            (None, _) => {
                hc.push_unique(k, v.clone());
                moved.push(k.to_owned());
            }
        }
    }
    Ok(CreateBody {
        body,
        hc: inner.unwrap_or(hc),
        moved,
    })
}

/// The common modern shape, read without copying: `(top-level body, inner HostConfig)` when the
/// body has an inner `HostConfig` object and no other top-level host setting. `None` means
/// "use [`effective`]", which handles (or refuses) every other shape.
pub(super) fn borrowed(req: &Request) -> Option<(&Object, &Object)> {
    let Some(Json::Object(top)) = &req.body else {
        return None;
    };
    let Some(Json::Object(hc)) = top.get("HostConfig") else {
        return None;
    };
    let legacy = top.entries().any(|(k, v)| {
        !v.is_null()
            && (fold_eq(k, LEGACY_CPUSET) || (!fold_eq(k, "HostConfig") && is_host_config_field(k)))
    });
    (!legacy).then_some((top, hc))
}

impl CreateBody {
    /// The body to forward: the container config plus the (rewritten) `HostConfig`.
    pub(super) fn into_json(self) -> Json {
        let mut body = self.body;
        body.set("HostConfig", Json::Object(self.hc));
        Json::Object(body)
    }
}
