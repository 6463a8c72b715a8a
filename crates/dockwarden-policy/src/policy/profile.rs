//! The policy profile's decisions: daemon-wide prune, and builds on user networks. Both are the
//! workspace's own business only on a private daemon (`profile = "private-daemon"`).

use super::config::Profile;
use super::{Denial, FactQuery, Facts, Policy, Request};

/// Build network modes that are not a user network: the default bridge's spellings, `none`,
/// and the modes no profile allows.
fn user_network(mode: &str) -> bool {
    !matches!(mode, "" | "default" | "bridge" | "none" | "host") && !mode.starts_with("container:")
}

/// Whether the daemon-wide prune endpoints (`/containers/prune`, `/images/prune`,
/// `/networks/prune`, `/volumes/prune`, `/build/prune`, and BuildKit's gRPC `Prune`) are allowed.
pub fn prune_decision(policy: &Policy) -> Result<(), Denial> {
    match policy.profile {
        Profile::PrivateDaemon => Ok(()),
        Profile::Default => Err(Denial::new(
            "system.prune",
            "prune acts on every object of the daemon and is not allowed",
        )),
    }
}

/// Whether `/build?networkmode=<mode>` may name a user network (judged by [`check_build_network`]).
pub fn build_user_network_allowed(mode: &str, policy: &Policy) -> bool {
    policy.profile == Profile::PrivateDaemon && user_network(mode)
}

/// The facts a build needs: on a private daemon, the user networks it names.
pub fn needs_build(req: &Request, policy: &Policy) -> Vec<FactQuery> {
    let mut qs: Vec<FactQuery> = req
        .query
        .all("networkmode")
        .into_iter()
        .filter(|m| build_user_network_allowed(m, policy))
        .map(|m| FactQuery::Network(m.to_owned()))
        .collect();
    if !qs.is_empty() {
        qs.push(FactQuery::HostRoutes);
    }
    qs.sort();
    qs.dedup();
    qs
}

/// On a private daemon, a user network a build names must pass the rules a container joining
/// it would (`network::check_joinable`), refused as `build.network`.
pub fn check_build_network(req: &Request, facts: &Facts, policy: &Policy) -> Result<(), Denial> {
    for m in req
        .query
        .all("networkmode")
        .into_iter()
        .filter(|m| build_user_network_allowed(m, policy))
    {
        super::network::check_joinable(m, facts, policy).map_err(|d| {
            Denial::new(
                "build.network",
                format!("build network `{m}`: {}", d.message),
            )
        })?;
    }
    Ok(())
}
