//! `Binds` (the `-v` syntax) and the bind-source judgement shared with `Mounts`.
//!
//! Grammar as dockerd's Linux parser reads it: `SplitN(spec, ":", 4)`; one part is an anonymous
//! volume, two or three are `source:target[:mode]`, four or more are invalid. An absolute source
//! is a host bind (stored as `path.Clean(source)`), anything else names a volume.

use super::{Changes, Ctx, Mode, fact_missing, mounts};
use crate::api::json::{Json, Object};
use crate::path_clean::clean;
use crate::policy::facts::HostPathFact;
use crate::policy::{Denial, Effect, FactQuery};

/// Propagation modes that let mounts cross between host and container.
const SHARED_PROPAGATION: &[&str] = &["shared", "rshared", "slave", "rslave"];

/// One `Binds` entry, split.
#[derive(Debug)]
enum Spec {
    /// `target` only: an anonymous volume.
    Anonymous,
    /// A host path; `rest` is `target[:mode]`.
    Host { source: String, rest: String },
    /// A named volume.
    Named { name: String },
}

fn parse(spec: &str) -> Result<Spec, Denial> {
    let parts: Vec<&str> = spec.splitn(4, ':').collect();
    let invalid = || {
        Denial::new(
            "container.mount.invalid",
            format!("bind specification `{spec}` is invalid"),
        )
    };
    let (source, rest) = match parts.as_slice() {
        [_] => return Ok(Spec::Anonymous),
        [s, t] => (*s, (*t).to_owned()),
        [s, t, mode] => {
            check_propagation(mode.split(','), spec)?;
            (*s, format!("{t}:{mode}"))
        }
        _ => return Err(invalid()),
    };
    if source.is_empty() {
        return Err(invalid());
    }
    if source.starts_with('/') {
        Ok(Spec::Host {
            source: source.to_owned(),
            rest,
        })
    } else {
        Ok(Spec::Named {
            name: source.to_owned(),
        })
    }
}

/// Refuses `shared`/`slave` propagation in a list of mode words.
pub(super) fn check_propagation<'a>(
    words: impl Iterator<Item = &'a str>,
    what: &str,
) -> Result<(), Denial> {
    for w in words {
        if SHARED_PROPAGATION.contains(&w) {
            return Err(Denial::new(
                "container.bind.propagation",
                format!("`{w}` propagation on `{what}` is not allowed"),
            ));
        }
    }
    Ok(())
}

/// The host paths and volumes that `Binds` name.
pub(super) fn needs(hc: &Object) -> Result<Vec<FactQuery>, Denial> {
    let mut q = Vec::new();
    for spec in hc.str_list("Binds")?.unwrap_or_default() {
        match parse(&spec)? {
            Spec::Anonymous => {}
            Spec::Host { source, .. } => q.push(FactQuery::HostPath(clean(&source))),
            Spec::Named { name } => q.push(FactQuery::Volume(name)),
        }
    }
    Ok(q)
}

/// What a bind source turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Beneath the workspace: forward as is (cleaned path, to be pinned).
    Workspace(String),
    /// The Docker socket: forward the proxy's socket instead.
    DockerSocket,
}

/// Judges a host bind source. In [`Mode::Create`] from the gathered host-path fact; in
/// [`Mode::Stored`] lexically (the target exists already and no second look-up is possible).
pub(super) fn judge_source(raw: &str, ctx: &Ctx<'_>) -> Result<Source, Denial> {
    let path = clean(raw);
    let shown = || format!("`{raw}`");
    if ctx.mode == Mode::Stored {
        let ws = &ctx.facts.env.workspace;
        let inside = !ws.is_empty()
            && (path == *ws || path.starts_with(&format!("{}/", ws.trim_end_matches('/'))));
        // A container made through the proxy stores its binds as pins (docs/binds.md).
        let pins = &ctx.facts.env.pin_dir;
        let pinned =
            !pins.is_empty() && path.starts_with(&format!("{}/", pins.trim_end_matches('/')));
        return match (path == ctx.facts.env.proxy_socket, inside || pinned) {
            (true, _) => Ok(Source::DockerSocket),
            (false, true) => Ok(Source::Workspace(path)),
            _ => Err(Denial::new(
                "container.bind.outside",
                format!("it binds {} from outside the workspace", shown()),
            )),
        };
    }
    match ctx.facts.host_paths.get(&path) {
        None => Err(fact_missing(&format!("host path {}", shown()))),
        Some(HostPathFact::Inside { .. }) => Ok(Source::Workspace(path)),
        Some(HostPathFact::DockerSocket) => Ok(Source::DockerSocket),
        Some(HostPathFact::Outside) => Err(Denial::new(
            "container.bind.outside",
            format!("bind source {} is outside the workspace", shown()),
        )),
        Some(HostPathFact::ThroughSymlink) => Err(Denial::new(
            "container.bind.symlink",
            format!("bind source {} goes through a symlink", shown()),
        )),
        Some(HostPathFact::Missing) => Err(Denial::new(
            "container.bind.missing",
            format!("bind source {} does not exist", shown()),
        )),
        Some(HostPathFact::Unusable(why)) => Err(Denial::new(
            "container.bind.unusable",
            format!("bind source {} cannot be used: {why}", shown()),
        )),
    }
}

/// Checks every `Binds` entry; rewrites Docker-socket binds to the proxy's socket.
pub(super) fn check(hc: &mut Object, ctx: &Ctx<'_>, ch: &mut Changes) -> Result<(), Denial> {
    let Some(list) = hc.str_list("Binds")? else {
        return Ok(());
    };
    let mut out = Vec::with_capacity(list.len());
    let mut changed = false;
    for spec in list {
        match parse(&spec)? {
            Spec::Anonymous => out.push(spec),
            Spec::Named { name } => {
                mounts::check_existing_volume(&name, ctx)?;
                out.push(spec);
            }
            Spec::Host { source, rest } => match judge_source(&source, ctx)? {
                Source::Workspace(path) => {
                    // Forward the cleaned path the policy judged, never a `..` the kernel would
                    // resolve through a symlink.
                    if path != source {
                        out.push(format!("{path}:{rest}"));
                        changed = true;
                    } else {
                        out.push(spec);
                    }
                    ch.effect(Effect::PinBindSource { host_path: path });
                }
                Source::DockerSocket => {
                    let sock = &ctx.facts.env.proxy_socket;
                    if source != *sock {
                        ch.rewrite(
                            "container.bind.docker_socket",
                            format!("bind of `{source}` now uses the proxy socket"),
                        );
                        changed = true;
                    }
                    out.push(format!("{sock}:{rest}"));
                }
            },
        }
    }
    if changed {
        hc.set(
            "Binds",
            Json::Array(out.into_iter().map(Json::String).collect()),
        );
    }
    Ok(())
}
