//! The exhaustive per-endpoint decision: every [`Endpoint`] variant appears in each `match`
//! below with no wildcard arm, so a new endpoint does not compile until it is classified.

use super::{BodyNeed, Denial, FactQuery, Facts, Permitted, Policy, Request};
use super::{build, container, effective, kind, limits, network, pins, profile, volume};
use crate::api::route::Endpoint as E;
use crate::api::version::ApiVersion;

/// Endpoints whose JSON body the policy reads whole.
pub fn body_need(e: &E) -> BodyNeed {
    match e {
        E::ContainerCreate
        | E::ContainerUpdate(_)
        | E::ContainerStart(_)
        | E::ExecCreate(_)
        | E::ExecStart(_)
        | E::NetworkCreate
        | E::NetworkConnect(_)
        | E::VolumeCreate => BodyNeed::Json,
        _ => BodyNeed::Stream,
    }
}

/// The facts each endpoint needs.
pub fn needs(req: &Request, policy: &Policy) -> Result<Vec<FactQuery>, Denial> {
    match &req.route.endpoint {
        // Surface issue: the networks a create joins are looked up too (network::needs_endpoints).
        // Every family reads the one effective configuration (`effective`).
        E::ContainerCreate => {
            let eff = effective::create(req)?;
            let req = &*eff.req;
            let mut qs = container::needs_create(req, policy)?;
            qs.extend(network::needs_endpoints(req)?);
            let binds = pins::needs(req);
            pins::check_count(binds.len(), policy)?;
            qs.extend(binds);
            qs.sort();
            qs.dedup();
            Ok(qs)
        }
        E::NetworkCreate => network::needs_create(req),
        E::NetworkConnect(id) => network::needs_connect(req, id),
        E::VolumeCreate => volume::needs_create(req),
        E::Build => Ok(profile::needs_build(req, policy)),
        E::SwarmLeave | E::SwarmRead => Ok(vec![FactQuery::SwarmState]),
        // Verbs that reach into a container look it up (`container::check_foreign`).
        _ => Ok(container::needs_foreign(req)),
    }
}

/// Follow-up facts (see `policy::needs_more`).
pub fn needs_more(req: &Request, facts: &Facts) -> Vec<FactQuery> {
    match &req.route.endpoint {
        // A body the first round could read; a refusal comes from `decide` with its rule.
        E::ContainerCreate => effective::create(req)
            .and_then(|eff| container::needs_more_create(&eff.req, facts))
            .unwrap_or_default(),
        _ => container::needs_more_foreign(req, facts),
    }
}

fn deny(rule: &'static str, msg: &str) -> Result<Permitted, Denial> {
    Err(Denial::new(rule, msg))
}

fn check_version(req: &Request, policy: &Policy) -> Result<(), Denial> {
    // A path without a version prefix has nothing to compare (and the floor is not parsed).
    let Some(v) = &req.route.version else {
        return Ok(());
    };
    let floor =
        ApiVersion::parse(&policy.min_api_version).unwrap_or_else(|| ApiVersion::new(1, 24));
    if v.less_than(&floor) {
        return Err(Denial::new(
            "api.version",
            format!("API version `{v}` is older than the supported minimum `{floor}`"),
        ));
    }
    Ok(())
}

/// Decides one request. Every variant is listed; unknown endpoints are refused.
pub fn decide(req: &Request, facts: &Facts, policy: &Policy) -> Result<Permitted, Denial> {
    if req.route.endpoint != E::Unknown {
        check_version(req, policy)?;
    }
    let allow = || Ok(Permitted::allow(req));
    match &req.route.endpoint {
        // Read-only and stream endpoints on objects: no host privilege is reachable through them.
        E::ContainerList
        | E::ContainerChanges(_)
        | E::ContainerInspect(_)
        | E::ContainerTop(_)
        | E::ContainerLogs(_)
        | E::ContainerStats(_)
        | E::ExecInspect(_)
        | E::ContainerKill(_)
        | E::ContainerPause(_)
        | E::ContainerUnpause(_)
        | E::ContainerStop(_)
        | E::ContainerWait(_)
        | E::ContainerResize(_)
        | E::ExecResize(_)
        | E::ContainerDelete(_) => allow(),
        // Verbs that reach into a container: only into one this proxy made and that passes.
        E::ContainerArchiveHead(_)
        | E::ContainerExport(_)
        | E::ContainerAttachWs(_)
        | E::ContainerArchiveGet(_)
        | E::ContainerAttach(_)
        | E::ExecStart(_)
        | E::ContainerRename(_)
        | E::ContainerArchivePut(_)
        | E::Commit => container::check_foreign(req, facts, policy)
            .map(|judged| judged.pin(req, Permitted::allow(req))),
        E::ContainerRestart(_) => allow(),
        E::ContainerStart(_) => container::decide_start(req),
        // Surface issue: then the networks it joins (network::check_endpoints).
        // Every family judges the one effective configuration (`effective`); the limits and
        // pin rewrites below edit the body `decide_create` set, which is that configuration.
        E::ContainerCreate => effective::create(req).and_then(|eff| {
            let req = &*eff.req;
            container::decide_create(req, facts, policy)
                .map_err(|d| kind::annotate(req, d))
                .and_then(|p| network::check_endpoints(req, facts, policy).map(|()| eff.note(p)))
        }),
        E::ContainerUpdate(_) => container::check_foreign(req, facts, policy).and_then(|judged| {
            container::decide_update(req, facts, policy).map(|p| judged.pin(req, p))
        }),
        E::ExecCreate(_) => container::check_foreign(req, facts, policy)
            .and_then(|judged| container::decide_exec(req).map(|p| judged.pin(req, p))),
        E::ContainerCopy(_) => deny(
            "container.copy_legacy",
            "the legacy copy endpoint is not available",
        ),
        E::ImageList
        | E::ImageSearch
        | E::ImageGetAll
        | E::ImageGet(_)
        | E::ImageHistory(_)
        | E::ImageInspect(_)
        | E::ImageAttestations(_)
        | E::ImageLoad
        | E::ImagePush(_)
        | E::ImageTag(_)
        | E::ImageDelete(_) => allow(),
        E::ImageCreate => match req.query.get("fromSrc") {
            Some(src) if src != "-" => deny(
                "image.import_url",
                "importing an image from a URL is not allowed",
            ),
            _ => allow(),
        },
        E::ContainerPrune | E::ImagePrune | E::VolumePrune | E::NetworkPrune | E::BuildPrune => {
            profile::prune_decision(policy).and_then(|()| allow())
        }
        E::Ping | E::PingHead | E::Events | E::Info | E::Version | E::SystemDf | E::Auth => allow(),
        E::Options => deny("route.unknown", "OPTIONS requests are not served"),
        E::VolumeList | E::VolumeInspect(_) | E::VolumeDelete(_) => allow(),
        E::VolumeCreate => volume::decide_create(req, facts, policy),
        E::VolumeUpdate(_) => deny("system.swarm", "cluster volumes belong to swarm mode"),
        E::Build | E::BuildCancel => build::decide_build(req, policy)
            .and_then(|p| profile::check_build_network(req, facts, policy).map(|()| p)),
        E::Session | E::Grpc => build::decide_buildkit(req),
        E::Swarm => deny("system.swarm", "swarm mode is not available"),
        // Leaving a swarm the daemon is not in, and reading an inactive swarm, grant nothing:
        // the daemon gives its own answer (503). On a daemon in a swarm they stay refused.
        E::SwarmLeave | E::SwarmRead => match facts.swarm_state.as_deref() {
            Some("inactive") => allow(),
            Some(_) => deny(
                "system.swarm",
                "the daemon is part of a swarm, and swarm mode is not available",
            ),
            None => deny("system.swarm", "the daemon's swarm state was not looked up"),
        },
        E::PluginList | E::PluginInspect(_) | E::PluginPrivileges => allow(),
        E::PluginMutate => deny(
            "system.plugin",
            "installing or changing plugins is not allowed",
        ),
        E::Distribution(_) => deny(
            "system.distribution",
            "distribution inspection is not available",
        ),
        E::CheckpointList(_) | E::CheckpointCreate(_) | E::CheckpointDelete(_, _) => {
            deny("system.checkpoint", "checkpoints are not available")
        }
        E::NetworkList | E::NetworkInspect(_) | E::NetworkDisconnect(_) | E::NetworkDelete(_) => {
            allow()
        }
        E::NetworkCreate => network::decide_create(req, facts, policy),
        E::NetworkConnect(_) => network::decide_connect(req, facts, policy),
        E::Debug => deny(
            "system.debug",
            "the daemon's debug endpoints are not available",
        ),
        E::Unknown => deny("route.unknown", "this endpoint is not available"),
    }
    .and_then(|p| limits::apply(req, facts, policy, p))
    // INVARIANT: the pin rewrite is the last change to a create body, so no later rewrite can
    // put an unpinned workspace path back.
    .and_then(|p| {
        if req.route.endpoint == E::ContainerCreate {
            pins::apply(req, facts, policy, p)
        } else {
            Ok(p)
        }
    })
}
