//! Foreign containers: the verbs that reach into an existing container (exec, attach,
//! archives, export, commit, update, rename) are allowed only on a container this proxy
//! created whose stored HostConfig still passes this policy.
//!
//! A container made straight on the daemon (another tenant's, the operator's, a privileged
//! sidecar) is reachable by name through the proxy; without this check `exec` runs inside its
//! namespaces with its capabilities, and archives read and write its host binds. The stored
//! configuration is judged by the same rules as a join target (`namespaces::check_target`,
//! [`Mode::Stored`]). Its own joins (`container:` modes, `VolumesFrom`, `Links`) were judged,
//! and pinned to full IDs, when the proxy created it, so they are not judged again.
//!
//! A judged request names the container by the full id that was judged, never by the client's
//! name or ID prefix (`Judged`): a name can move to another container between the look-up (or a
//! cached fact) and the forward, an id cannot.
//!
//! A reference the daemon does not know is let through: the daemon answers 404 itself.

use super::{Changes, Ctx, Mode, check_host_config, fact_missing};
use crate::api::json::{Json, Object};
use crate::api::route::Endpoint as E;
use crate::policy::catalogue::Rule;
use crate::policy::{Denial, FactQuery, Facts, Permitted, Policy, Request};

pub const RULES: &[Rule] = &[Rule {
    id: "container.foreign",
    rationale: "exec, attach, archives, export, commit, update and rename reach into a container; only containers created through this proxy whose stored configuration passes the policy may be reached",
    hint: "use a container you created through the workspace proxy; containers made directly on the daemon are not reachable",
}];

/// Mode fields that may name `container:<ref>`, and the list fields that join.
const JOIN_FIELDS: &[&str] = &["NetworkMode", "PidMode", "IpcMode"];

/// What a request reaches into, as the daemon will resolve it.
enum Target {
    Container(String),
    /// An exec instance, whose container is looked up in a second round.
    Exec(String),
}

fn target(req: &Request) -> Option<Target> {
    let c = |id: &String| Some(Target::Container(id.clone()));
    match &req.route.endpoint {
        E::ExecCreate(id)
        | E::ContainerAttach(id)
        | E::ContainerAttachWs(id)
        | E::ContainerArchiveGet(id)
        | E::ContainerArchiveHead(id)
        | E::ContainerArchivePut(id)
        | E::ContainerExport(id)
        | E::ContainerUpdate(id)
        | E::ContainerRename(id) => c(id),
        E::ExecStart(id) => Some(Target::Exec(id.clone())),
        E::Commit => req
            .query
            .get("container")
            .filter(|r| !r.is_empty())
            .map(|r| Target::Container(r.to_owned())),
        _ => None,
    }
}

/// The first round of facts: the container, or the exec instance.
pub fn needs(req: &Request) -> Vec<FactQuery> {
    match target(req) {
        Some(Target::Container(r)) => vec![FactQuery::Container(r)],
        Some(Target::Exec(id)) => vec![FactQuery::Exec(id)],
        None => Vec::new(),
    }
}

/// The second round: the container an exec instance belongs to.
pub fn needs_more(req: &Request, facts: &Facts) -> Vec<FactQuery> {
    match target(req) {
        Some(Target::Exec(id)) => match facts.execs.get(&id) {
            Some(Some(cid)) => vec![FactQuery::Container(cid.clone())],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// What [`check`] found the request reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// Nothing to judge: no container target, or one the daemon does not know.
    Nothing,
    /// The container named by the request (path or `container=` query), by its full id.
    Named(String),
    /// An exec instance's container (exec ids are matched exactly by the daemon).
    Exec,
}

impl Judged {
    /// The permission with the judged container pinned where the request names it.
    pub fn pin(self, req: &Request, p: Permitted) -> Permitted {
        let Judged::Named(id) = self else { return p };
        if req.route.endpoint == E::Commit {
            let mut q = req.query.clone();
            q.set("container", &id);
            p.with_query(q)
        } else {
            p.on_container(&id)
        }
    }
}

/// Refuses the request when it reaches into a foreign container; otherwise says which
/// container was judged, so the request can be forwarded to exactly that one.
pub fn check(req: &Request, facts: &Facts, policy: &Policy) -> Result<Judged, Denial> {
    let (reference, named) = match target(req) {
        None => return Ok(Judged::Nothing),
        Some(Target::Container(r)) => (r, true),
        Some(Target::Exec(id)) => match facts.execs.get(&id) {
            None => return Err(fact_missing(&format!("exec instance `{id}`"))),
            Some(None) => return Ok(Judged::Nothing),
            Some(Some(cid)) => (cid.clone(), false),
        },
    };
    let fact = match facts.containers.get(&reference) {
        None => return Err(fact_missing(&format!("container `{reference}`"))),
        Some(None) => return Ok(Judged::Nothing),
        Some(Some(c)) => c,
    };
    let refuse = |why: String| {
        Denial::new(
            "container.foreign",
            format!("container `{reference}` {why}"),
        )
    };
    if !fact.created_here {
        return Err(refuse("was not created through this proxy".into()));
    }
    let Json::Object(stored) = &fact.host_config else {
        return Err(refuse("has an unreadable host config".into()));
    };
    let mut stored = without_joins(stored);
    let ctx = Ctx {
        facts,
        policy,
        mode: Mode::Stored,
    };
    check_host_config(&mut stored, &ctx, &mut Changes::default()).map_err(|d| {
        // One rule per refusal (`container.foreign`): the stored setting is named by its message.
        refuse(format!("does not pass the policy: {}", d.message))
    })?;
    Ok(if named {
        Judged::Named(fact.id.clone())
    } else {
        Judged::Exec
    })
}

/// The stored HostConfig without the joins the proxy judged at create.
fn without_joins(stored: &Object) -> Object {
    let mut o = stored.clone();
    for f in JOIN_FIELDS {
        if o.str(f)
            .ok()
            .flatten()
            .is_some_and(|m| m.starts_with("container:"))
        {
            o.remove(f);
        }
    }
    o.remove("VolumesFrom");
    o.remove("Links");
    o
}
