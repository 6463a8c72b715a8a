//! The one exhaustive route table: every Engine API endpoint dockerd serves, classified the way
//! its gorilla/mux router does it.
//!
//! dockerd registers each route twice (`/v{version:[0-9.]+}<path>` and the bare `<path>`), in a
//! fixed router order, and the **first registered match wins**. `{name:.*}` swallows slashes, so
//! `DELETE /containers/{name:.*}` also matches `/containers/x/checkpoints/y`; only the order makes
//! that a checkpoint route. We reproduce the templates as anchored regexes in the same order and
//! pick the lowest matching index, so the proxy and the daemon agree on what a path means.

use std::sync::LazyLock;

use super::path::CanonicalPath;
use super::version::ApiVersion;

/// Every endpoint the daemon serves. The proxy's policy matches on this enum without a
/// wildcard arm, so a new variant does not compile until someone classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    // checkpoint router (experimental)
    CheckpointList(String),
    CheckpointCreate(String),
    CheckpointDelete(String, String),
    // container router
    ContainerArchiveHead(String),
    ContainerList,
    ContainerExport(String),
    ContainerChanges(String),
    ContainerInspect(String),
    ContainerTop(String),
    ContainerLogs(String),
    ContainerStats(String),
    ContainerAttachWs(String),
    ExecInspect(String),
    ContainerArchiveGet(String),
    ContainerCreate,
    ContainerKill(String),
    ContainerPause(String),
    ContainerUnpause(String),
    ContainerRestart(String),
    ContainerStart(String),
    ContainerStop(String),
    ContainerWait(String),
    ContainerResize(String),
    ContainerAttach(String),
    ContainerCopy(String),
    ExecCreate(String),
    ExecStart(String),
    ExecResize(String),
    ContainerRename(String),
    ContainerUpdate(String),
    ContainerPrune,
    Commit,
    ContainerArchivePut(String),
    ContainerDelete(String),
    // image router
    ImageList,
    ImageSearch,
    ImageGetAll,
    ImageGet(String),
    ImageHistory(String),
    ImageInspect(String),
    ImageAttestations(String),
    ImageLoad,
    ImageCreate,
    ImagePush(String),
    ImageTag(String),
    ImagePrune,
    ImageDelete(String),
    // system router
    Options,
    Ping,
    PingHead,
    Events,
    Info,
    Version,
    SystemDf,
    Auth,
    // volume router
    VolumeList,
    VolumeInspect(String),
    VolumeCreate,
    VolumePrune,
    VolumeUpdate(String),
    VolumeDelete(String),
    // build, session, grpc
    Build,
    BuildPrune,
    BuildCancel,
    Session,
    Grpc,
    // swarm router: services, nodes, tasks, secrets, configs and the swarm itself
    /// `POST /swarm/leave`.
    SwarmLeave,
    /// Read-only inspects: `GET /swarm`, and `GET` of the lists, objects and logs of services,
    /// nodes, tasks, secrets and configs.
    SwarmRead,
    /// Everything else of the swarm router (init, join, update, unlock, unlock key, create,
    /// update and delete of swarm objects).
    Swarm,
    // plugin router
    PluginList,
    PluginInspect(String),
    PluginPrivileges,
    PluginMutate,
    // distribution router
    Distribution(String),
    // network router
    NetworkList,
    NetworkInspect(String),
    NetworkCreate,
    NetworkConnect(String),
    NetworkDisconnect(String),
    NetworkPrune,
    NetworkDelete(String),
    // debug handlers (pprof, expvar)
    Debug,
    /// Anything dockerd would answer with 404 (or a path no route matches).
    Unknown,
}

/// A classified request: the endpoint, and the API version from the path prefix (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub endpoint: Endpoint,
    pub version: Option<ApiVersion>,
}

impl Endpoint {
    /// Endpoints that take over the connection when the daemon switches protocols.
    pub fn hijacks(&self) -> bool {
        matches!(
            self,
            Endpoint::ContainerAttach(_)
                | Endpoint::ContainerAttachWs(_)
                | Endpoint::ExecStart(_)
                | Endpoint::Session
                | Endpoint::Grpc
        )
    }

    /// A short stable name for logs and the audit trail: the variant's name, from one
    /// exhaustive match (was the `Debug` output cut at the first `(`, a formatter run per
    /// request).
    pub fn name(&self) -> &'static str {
        use Endpoint as E;
        match self {
            E::CheckpointList(..) => "CheckpointList",
            E::CheckpointCreate(..) => "CheckpointCreate",
            E::CheckpointDelete(..) => "CheckpointDelete",
            E::ContainerArchiveHead(..) => "ContainerArchiveHead",
            E::ContainerList => "ContainerList",
            E::ContainerExport(..) => "ContainerExport",
            E::ContainerChanges(..) => "ContainerChanges",
            E::ContainerInspect(..) => "ContainerInspect",
            E::ContainerTop(..) => "ContainerTop",
            E::ContainerLogs(..) => "ContainerLogs",
            E::ContainerStats(..) => "ContainerStats",
            E::ContainerAttachWs(..) => "ContainerAttachWs",
            E::ExecInspect(..) => "ExecInspect",
            E::ContainerArchiveGet(..) => "ContainerArchiveGet",
            E::ContainerCreate => "ContainerCreate",
            E::ContainerKill(..) => "ContainerKill",
            E::ContainerPause(..) => "ContainerPause",
            E::ContainerUnpause(..) => "ContainerUnpause",
            E::ContainerRestart(..) => "ContainerRestart",
            E::ContainerStart(..) => "ContainerStart",
            E::ContainerStop(..) => "ContainerStop",
            E::ContainerWait(..) => "ContainerWait",
            E::ContainerResize(..) => "ContainerResize",
            E::ContainerAttach(..) => "ContainerAttach",
            E::ContainerCopy(..) => "ContainerCopy",
            E::ExecCreate(..) => "ExecCreate",
            E::ExecStart(..) => "ExecStart",
            E::ExecResize(..) => "ExecResize",
            E::ContainerRename(..) => "ContainerRename",
            E::ContainerUpdate(..) => "ContainerUpdate",
            E::ContainerPrune => "ContainerPrune",
            E::Commit => "Commit",
            E::ContainerArchivePut(..) => "ContainerArchivePut",
            E::ContainerDelete(..) => "ContainerDelete",
            E::ImageList => "ImageList",
            E::ImageSearch => "ImageSearch",
            E::ImageGetAll => "ImageGetAll",
            E::ImageGet(..) => "ImageGet",
            E::ImageHistory(..) => "ImageHistory",
            E::ImageInspect(..) => "ImageInspect",
            E::ImageAttestations(..) => "ImageAttestations",
            E::ImageLoad => "ImageLoad",
            E::ImageCreate => "ImageCreate",
            E::ImagePush(..) => "ImagePush",
            E::ImageTag(..) => "ImageTag",
            E::ImagePrune => "ImagePrune",
            E::ImageDelete(..) => "ImageDelete",
            E::Options => "Options",
            E::Ping => "Ping",
            E::PingHead => "PingHead",
            E::Events => "Events",
            E::Info => "Info",
            E::Version => "Version",
            E::SystemDf => "SystemDf",
            E::Auth => "Auth",
            E::VolumeList => "VolumeList",
            E::VolumeInspect(..) => "VolumeInspect",
            E::VolumeCreate => "VolumeCreate",
            E::VolumePrune => "VolumePrune",
            E::VolumeUpdate(..) => "VolumeUpdate",
            E::VolumeDelete(..) => "VolumeDelete",
            E::Build => "Build",
            E::BuildPrune => "BuildPrune",
            E::BuildCancel => "BuildCancel",
            E::Session => "Session",
            E::Grpc => "Grpc",
            E::SwarmLeave => "SwarmLeave",
            E::SwarmRead => "SwarmRead",
            E::Swarm => "Swarm",
            E::PluginList => "PluginList",
            E::PluginInspect(..) => "PluginInspect",
            E::PluginPrivileges => "PluginPrivileges",
            E::PluginMutate => "PluginMutate",
            E::Distribution(..) => "Distribution",
            E::NetworkList => "NetworkList",
            E::NetworkInspect(..) => "NetworkInspect",
            E::NetworkCreate => "NetworkCreate",
            E::NetworkConnect(..) => "NetworkConnect",
            E::NetworkDisconnect(..) => "NetworkDisconnect",
            E::NetworkPrune => "NetworkPrune",
            E::NetworkDelete(..) => "NetworkDelete",
            E::Debug => "Debug",
            E::Unknown => "Unknown",
        }
    }
}

type Build = fn(&[&str]) -> Endpoint;

fn one(v: &[&str]) -> String {
    v.first().map(|s| (*s).to_owned()).unwrap_or_default()
}

// INVARIANT: this order is dockerd's registration order (checkpoint, container, image, system,
// volume, build, session, swarm, plugin, distribution, network, debug, grpc), and within a
// router the order of its `initRoutes`. Reordering it changes what a path means.
const TABLE: &[(&str, &str, Build)] = &[
    ("GET", "/containers/(.*)/checkpoints", |v| {
        Endpoint::CheckpointList(one(v))
    }),
    ("POST", "/containers/(.*)/checkpoints", |v| {
        Endpoint::CheckpointCreate(one(v))
    }),
    ("DELETE", "/containers/([^/]+)/checkpoints/([^/]+)", |v| {
        Endpoint::CheckpointDelete(
            one(v),
            v.get(1).map(|s| (*s).to_owned()).unwrap_or_default(),
        )
    }),
    ("HEAD", "/containers/(.*)/archive", |v| {
        Endpoint::ContainerArchiveHead(one(v))
    }),
    ("GET", "/containers/json", |_| Endpoint::ContainerList),
    ("GET", "/containers/(.*)/export", |v| {
        Endpoint::ContainerExport(one(v))
    }),
    ("GET", "/containers/(.*)/changes", |v| {
        Endpoint::ContainerChanges(one(v))
    }),
    ("GET", "/containers/(.*)/json", |v| {
        Endpoint::ContainerInspect(one(v))
    }),
    ("GET", "/containers/(.*)/top", |v| {
        Endpoint::ContainerTop(one(v))
    }),
    ("GET", "/containers/(.*)/logs", |v| {
        Endpoint::ContainerLogs(one(v))
    }),
    ("GET", "/containers/(.*)/stats", |v| {
        Endpoint::ContainerStats(one(v))
    }),
    ("GET", "/containers/(.*)/attach/ws", |v| {
        Endpoint::ContainerAttachWs(one(v))
    }),
    ("GET", "/exec/(.*)/json", |v| Endpoint::ExecInspect(one(v))),
    ("GET", "/containers/(.*)/archive", |v| {
        Endpoint::ContainerArchiveGet(one(v))
    }),
    ("POST", "/containers/create", |_| Endpoint::ContainerCreate),
    ("POST", "/containers/(.*)/kill", |v| {
        Endpoint::ContainerKill(one(v))
    }),
    ("POST", "/containers/(.*)/pause", |v| {
        Endpoint::ContainerPause(one(v))
    }),
    ("POST", "/containers/(.*)/unpause", |v| {
        Endpoint::ContainerUnpause(one(v))
    }),
    ("POST", "/containers/(.*)/restart", |v| {
        Endpoint::ContainerRestart(one(v))
    }),
    ("POST", "/containers/(.*)/start", |v| {
        Endpoint::ContainerStart(one(v))
    }),
    ("POST", "/containers/(.*)/stop", |v| {
        Endpoint::ContainerStop(one(v))
    }),
    ("POST", "/containers/(.*)/wait", |v| {
        Endpoint::ContainerWait(one(v))
    }),
    ("POST", "/containers/(.*)/resize", |v| {
        Endpoint::ContainerResize(one(v))
    }),
    ("POST", "/containers/(.*)/attach", |v| {
        Endpoint::ContainerAttach(one(v))
    }),
    ("POST", "/containers/(.*)/copy", |v| {
        Endpoint::ContainerCopy(one(v))
    }),
    ("POST", "/containers/(.*)/exec", |v| {
        Endpoint::ExecCreate(one(v))
    }),
    ("POST", "/exec/(.*)/start", |v| Endpoint::ExecStart(one(v))),
    ("POST", "/exec/(.*)/resize", |v| {
        Endpoint::ExecResize(one(v))
    }),
    ("POST", "/containers/(.*)/rename", |v| {
        Endpoint::ContainerRename(one(v))
    }),
    ("POST", "/containers/(.*)/update", |v| {
        Endpoint::ContainerUpdate(one(v))
    }),
    ("POST", "/containers/prune", |_| Endpoint::ContainerPrune),
    ("POST", "/commit", |_| Endpoint::Commit),
    ("PUT", "/containers/(.*)/archive", |v| {
        Endpoint::ContainerArchivePut(one(v))
    }),
    ("DELETE", "/containers/(.*)", |v| {
        Endpoint::ContainerDelete(one(v))
    }),
    ("GET", "/images/json", |_| Endpoint::ImageList),
    ("GET", "/images/search", |_| Endpoint::ImageSearch),
    ("GET", "/images/get", |_| Endpoint::ImageGetAll),
    ("GET", "/images/(.*)/get", |v| Endpoint::ImageGet(one(v))),
    ("GET", "/images/(.*)/history", |v| {
        Endpoint::ImageHistory(one(v))
    }),
    ("GET", "/images/(.*)/json", |v| {
        Endpoint::ImageInspect(one(v))
    }),
    ("GET", "/images/(.*)/attestations", |v| {
        Endpoint::ImageAttestations(one(v))
    }),
    ("POST", "/images/load", |_| Endpoint::ImageLoad),
    ("POST", "/images/create", |_| Endpoint::ImageCreate),
    ("POST", "/images/(.*)/push", |v| Endpoint::ImagePush(one(v))),
    ("POST", "/images/(.*)/tag", |v| Endpoint::ImageTag(one(v))),
    ("POST", "/images/prune", |_| Endpoint::ImagePrune),
    ("DELETE", "/images/(.*)", |v| Endpoint::ImageDelete(one(v))),
    ("OPTIONS", "/(.*)", |_| Endpoint::Options),
    ("GET", "/_ping", |_| Endpoint::Ping),
    ("HEAD", "/_ping", |_| Endpoint::PingHead),
    ("GET", "/events", |_| Endpoint::Events),
    ("GET", "/info", |_| Endpoint::Info),
    ("GET", "/version", |_| Endpoint::Version),
    ("GET", "/system/df", |_| Endpoint::SystemDf),
    ("POST", "/auth", |_| Endpoint::Auth),
    ("GET", "/volumes", |_| Endpoint::VolumeList),
    ("GET", "/volumes/(.*)", |v| Endpoint::VolumeInspect(one(v))),
    ("POST", "/volumes/create", |_| Endpoint::VolumeCreate),
    ("POST", "/volumes/prune", |_| Endpoint::VolumePrune),
    ("PUT", "/volumes/(.*)", |v| Endpoint::VolumeUpdate(one(v))),
    ("DELETE", "/volumes/(.*)", |v| {
        Endpoint::VolumeDelete(one(v))
    }),
    ("POST", "/build", |_| Endpoint::Build),
    ("POST", "/build/prune", |_| Endpoint::BuildPrune),
    ("POST", "/build/cancel", |_| Endpoint::BuildCancel),
    ("POST", "/session", |_| Endpoint::Session),
    ("POST", "/swarm/leave", |_| Endpoint::SwarmLeave),
    ("GET", "/swarm", |_| Endpoint::SwarmRead),
    (
        "GET",
        "/(?:services|nodes|tasks|secrets|configs)(?:/[^/]+)?",
        |_| Endpoint::SwarmRead,
    ),
    ("GET", "/(?:services|tasks)/[^/]+/logs", |_| {
        Endpoint::SwarmRead
    }),
    ("*", "/swarm(?:/.*)?", |_| Endpoint::Swarm),
    (
        "*",
        "/(?:services|nodes|tasks|secrets|configs)(?:/.*)?",
        |_| Endpoint::Swarm,
    ),
    ("GET", "/plugins", |_| Endpoint::PluginList),
    ("GET", "/plugins/privileges", |_| Endpoint::PluginPrivileges),
    ("GET", "/plugins/(.*)/json", |v| {
        Endpoint::PluginInspect(one(v))
    }),
    ("*", "/plugins/.*", |_| Endpoint::PluginMutate),
    ("GET", "/distribution/(.*)/json", |v| {
        Endpoint::Distribution(one(v))
    }),
    ("GET", "/networks", |_| Endpoint::NetworkList),
    ("GET", "/networks/", |_| Endpoint::NetworkList),
    ("GET", "/networks/(.+)", |v| {
        Endpoint::NetworkInspect(one(v))
    }),
    ("POST", "/networks/create", |_| Endpoint::NetworkCreate),
    ("POST", "/networks/(.*)/connect", |v| {
        Endpoint::NetworkConnect(one(v))
    }),
    ("POST", "/networks/(.*)/disconnect", |v| {
        Endpoint::NetworkDisconnect(one(v))
    }),
    ("POST", "/networks/prune", |_| Endpoint::NetworkPrune),
    ("DELETE", "/networks/(.*)", |v| {
        Endpoint::NetworkDelete(one(v))
    }),
    ("*", "/debug(?:/.*)?", |_| Endpoint::Debug),
    ("POST", "/grpc", |_| Endpoint::Grpc),
];

struct Compiled {
    shapes: Vec<shape::Shape>,
    /// For each method the table knows, the indices of its entries and of the `*` ones, in
    /// table order; any other method gets only the `*` entries.
    by_method: Vec<(&'static str, Vec<usize>)>,
    any_method: Vec<usize>,
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    #[expect(
        clippy::expect_used,
        reason = "the table is a compile-time constant covered by tests"
    )]
    let shapes = TABLE
        .iter()
        .map(|(_, p, _)| shape::Shape::of(p).expect("route regex compiles"))
        .collect();
    let mut methods: Vec<&'static str> = TABLE
        .iter()
        .map(|(m, _, _)| *m)
        .filter(|m| *m != "*")
        .collect();
    methods.sort_unstable();
    methods.dedup();
    let of = |m: Option<&str>| -> Vec<usize> {
        TABLE
            .iter()
            .enumerate()
            .filter(|(_, (tm, _, _))| *tm == "*" || Some(*tm) == m)
            .map(|(i, _)| i)
            .collect()
    };
    let by_method = methods.iter().map(|m| (*m, of(Some(m)))).collect();
    Compiled {
        shapes,
        by_method,
        any_method: of(None),
    }
});

/// Classifies a canonical (decoded, clean) path and method exactly like dockerd's router.
///
/// A version prefix that is present but out of the proxy's window is *not* judged here; the
/// policy does that, so that the denial names its rule.
pub fn classify(method: &str, path: &CanonicalPath) -> Route {
    let path = path.as_str();
    let c = &*COMPILED;
    let candidates = c
        .by_method
        .iter()
        .find(|(m, _)| *m == method)
        .map_or(&c.any_method, |(_, v)| v);
    let versioned = shape::split_version(path);
    // Each template is tried as the regex `^(?:/v([0-9.]+))?<template>$` would match it: with
    // the version when the rest matches, else on the whole path; the first entry wins.
    for &idx in candidates {
        let s = &c.shapes[idx];
        let found =
            match versioned.and_then(|(v, rest)| s.matches(rest).map(|caps| (Some(v), caps))) {
                Some(x) => Some(x),
                None => s.matches(path).map(|caps| (None, caps)),
            };
        let Some((v, caps)) = found else { continue };
        let version = match v {
            Some(v) => match ApiVersion::parse(v) {
                Some(v) => Some(v),
                None => {
                    return Route {
                        endpoint: Endpoint::Unknown,
                        version: None,
                    };
                }
            },
            None => None,
        };
        return Route {
            endpoint: (TABLE[idx].2)(caps.as_slice()),
            version,
        };
    }
    Route {
        endpoint: Endpoint::Unknown,
        version: None,
    }
}

/// The regex form of the table, as it was matched before `shape`: the reference the tests
/// compare `classify` with.
#[cfg(test)]
fn classify_by_regex(method: &str, path: &CanonicalPath) -> Route {
    use regex::{Regex, RegexSet};
    static RE: LazyLock<(RegexSet, Vec<Regex>)> = LazyLock::new(|| {
        let pats: Vec<String> = TABLE
            .iter()
            .map(|(_, p, _)| format!(r"^(?:/v([0-9.]+))?{p}$"))
            .collect();
        #[expect(clippy::expect_used, reason = "test-only reference")]
        let set = RegexSet::new(&pats).expect("route table regexes compile");
        #[expect(clippy::expect_used, reason = "test-only reference")]
        let each = pats
            .iter()
            .map(|p| Regex::new(p).expect("route regex compiles"))
            .collect();
        (set, each)
    });
    let path = path.as_str();
    for idx in RE.0.matches(path).iter() {
        let (m, _, build) = TABLE[idx];
        if m != "*" && m != method {
            continue;
        }
        let Some(caps) = RE.1[idx].captures(path) else {
            continue;
        };
        let version = match caps.get(1) {
            Some(v) => match ApiVersion::parse(v.as_str()) {
                Some(v) => Some(v),
                None => {
                    return Route {
                        endpoint: Endpoint::Unknown,
                        version: None,
                    };
                }
            },
            None => None,
        };
        let vars: Vec<&str> = caps.iter().skip(2).flatten().map(|m| m.as_str()).collect();
        return Route {
            endpoint: build(&vars),
            version,
        };
    }
    Route {
        endpoint: Endpoint::Unknown,
        version: None,
    }
}

mod shape;

#[cfg(test)]
mod tests;
