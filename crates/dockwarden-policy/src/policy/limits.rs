//! Limits: the container cap and the shared cgroup budget, applied to every allowed request.
//!
//! - Container create is refused once the daemon holds `limits.max_containers` containers (the
//!   proxy adds the creates it admitted and the daemon has not answered to the count, so
//!   concurrent creates cannot overshoot: `proxy::admission`).
//! - With the budget on, every container (and every classic-builder RUN container) is placed
//!   under the proxy's parent cgroup through `CgroupParent`, whose memory and pids limits all
//!   containers share. A user's own `Memory`/`PidsLimit` stay when they fit the budget; larger
//!   ones are refused rather than silently clamped, so `docker inspect` never shows a limit that
//!   cannot hold.

use super::catalogue::Rule;
use super::facts::Environment;
use super::{Denial, Facts, Permitted, Policy, Request};
use crate::api::json::{Json, Object};
use crate::api::route::Endpoint;

pub const RULES: &[Rule] = &[
    Rule {
        id: "limits.containers",
        rationale: "the daemon holds at most `limits.max_containers` containers (all of them, stopped ones included)",
        hint: "remove a container you no longer need: list them with `docker container ls -a`, then `docker rm <name>`",
    },
    Rule {
        id: "limits.cgroup_parent",
        rationale: "every container runs under the proxy's parent cgroup, which holds the shared memory and pids budget",
        hint: "leave `--cgroup-parent` unset; the proxy sets it",
    },
    Rule {
        id: "limits.build_budget",
        rationale: "every build step is a container and counts in the shared budget; a step the proxy cannot place under the budget's parent cgroup (BuildKit puts it under the daemon's own `cgroup-parent`) is refused",
        hint: "set `\"cgroup-parent\"` in the daemon's daemon.json to the budget's parent (`/dockwarden`, or `dockwarden.slice` on the systemd cgroup driver; see packaging/daemon.json) and restart dockerd, or build with the classic builder (`DOCKER_BUILDKIT=0`); the operator may start the proxy with `--allow-unbudgeted-builds`",
    },
    Rule {
        id: "limits.memory",
        rationale: "a container's memory limit must fit within the memory all containers share",
        hint: "lower `--memory` (compose `mem_limit`) or leave it unset",
    },
    Rule {
        id: "limits.pids",
        rationale: "a container's pids limit must fit within the process budget all containers share",
        hint: "lower `--pids-limit` or leave it unset",
    },
];

/// Applies limit checks and rewrites to a request the other rules allowed.
pub fn apply(
    req: &Request,
    facts: &Facts,
    policy: &Policy,
    p: Permitted,
) -> Result<Permitted, Denial> {
    match &req.route.endpoint {
        Endpoint::ContainerCreate => apply_create(req, facts, policy, p),
        Endpoint::ContainerUpdate(_) => {
            let body = current_body(req, &p)?;
            check_resources(&body, &facts.env)?;
            check_cgroup_parent(&body, &facts.env)?;
            Ok(p)
        }
        Endpoint::Build => apply_build(req, &facts.env, p),
        // INVARIANT: every other endpoint creates no container and changes no resource limit.
        _ => Ok(p),
    }
}

/// The body as it will be forwarded: the rules' rewrite if any, else the client's.
fn current_body(req: &Request, p: &Permitted) -> Result<Object, Denial> {
    match p.body().or(req.body.as_ref()) {
        None | Some(Json::Null) => Ok(Object::new()),
        Some(Json::Object(o)) => Ok(o.clone()),
        Some(_) => Err(Denial::new(
            "request.body.invalid",
            "the body must be a JSON object",
        )),
    }
}

fn apply_create(
    req: &Request,
    facts: &Facts,
    policy: &Policy,
    mut p: Permitted,
) -> Result<Permitted, Denial> {
    check_count(facts.container_count, policy.limits.max_containers)?;
    {
        let empty = Object::new();
        let body = p.body().or(req.body.as_ref());
        let hc = match body {
            Some(Json::Object(o)) => o.object("HostConfig")?.unwrap_or(&empty),
            None | Some(Json::Null) => &empty,
            Some(_) => {
                return Err(Denial::new(
                    "request.body.invalid",
                    "the body must be a JSON object",
                ));
            }
        };
        check_resources(hc, &facts.env)?;
        check_cgroup_parent(hc, &facts.env)?;
    }
    let Some(parent) = &facts.env.cgroup_parent else {
        return Ok(p);
    };
    p.edit_body(req, |body| {
        match body.get_mut("HostConfig") {
            Some(Json::Object(hc)) => hc.set("CgroupParent", Json::String(parent.clone())),
            _ => {
                let mut hc = Object::new();
                hc.set("CgroupParent", Json::String(parent.clone()));
                body.set("HostConfig", Json::Object(hc));
            }
        }
        Ok(())
    })?;
    Ok(p.rewrite(
        "limits.cgroup_parent",
        format!("CgroupParent set to `{parent}`"),
    ))
}

/// The rule of the container cap (the proxy recounts before a refusal by it stands,
/// `proxy::admission`).
pub const CONTAINERS_RULE: &str = "limits.containers";

fn check_count(count: Option<u64>, max: u64) -> Result<(), Denial> {
    let rule = CONTAINERS_RULE;
    match count {
        None => Err(Denial::new(
            rule,
            "the daemon's containers could not be counted",
        )),
        Some(n) if n >= max => Err(Denial::new(
            rule,
            format!(
                "the daemon already has {n} containers and the limit is {max}; remove one to create another"
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// A user's `CgroupParent` is never honoured: only the proxy's own may appear.
fn check_cgroup_parent(o: &Object, env: &Environment) -> Result<(), Denial> {
    match o.str("CgroupParent")? {
        None | Some("") => Ok(()),
        Some(c) if env.cgroup_parent.as_deref() == Some(c) => Ok(()),
        Some(c) => Err(Denial::new(
            "limits.cgroup_parent",
            format!("cgroup parent `{c}` is not allowed"),
        )),
    }
}

/// `Memory` and `PidsLimit` (in `HostConfig`, or at the top of an update body) must fit.
fn check_resources(o: &Object, env: &Environment) -> Result<(), Denial> {
    if let (Some(m), Some(budget)) = (o.int("Memory")?, env.memory_budget)
        && m > 0
        && m.unsigned_abs() > budget
    {
        return Err(Denial::new(
            "limits.memory",
            format!(
                "memory limit `{m}` bytes is larger than the {budget} bytes all containers share"
            ),
        ));
    }
    if let (Some(n), Some(budget)) = (o.int("PidsLimit")?, env.pids_budget)
        && n > 0
        && n.unsigned_abs() > budget
    {
        return Err(Denial::new(
            "limits.pids",
            format!("pids limit `{n}` is larger than the {budget} processes all containers share"),
        ));
    }
    Ok(())
}

/// Classic-builder RUN containers go under the parent cgroup too: the proxy sets the build's
/// `cgroupparent`. BuildKit (`version=2`) ignores that parameter and puts every step under the
/// daemon's own `cgroup-parent`, so there the build runs only when that is the budget's
/// (`docs/limits.md`). dockerd reads the first `version` value (`FormValue`), as here.
fn apply_build(req: &Request, env: &Environment, p: Permitted) -> Result<Permitted, Denial> {
    let Some(parent) = &env.cgroup_parent else {
        return Ok(p);
    };
    let mut q = p.query().cloned().unwrap_or_else(|| req.query.clone());
    let buildkit = q.get("version") == Some("2");
    q.set("cgroupparent", parent);
    let p = p.with_query(q).rewrite(
        "limits.cgroup_parent",
        format!("build cgroupparent set to `{parent}`"),
    );
    if buildkit && !env.builds.daemon_inside {
        return Ok(
            match unplaced_build(
                env,
                "a BuildKit build over `/build?version=2` would run its steps under the daemon's own cgroup parent, which is not the budget's",
            )? {
                Some(r) => p.rewrite(r.rule, r.what),
                None => p,
            },
        );
    }
    Ok(p)
}

/// A build whose steps the proxy cannot place under the budget's parent (`what` says why):
/// refused with `limits.build_budget`, or with the operator's `--allow-unbudgeted-builds`
/// forwarded with a rewrite note the proxy logs as a warning.
pub(in crate::policy) fn unplaced_build(
    env: &Environment,
    what: &str,
) -> Result<Option<super::Rewrite>, Denial> {
    let Some(parent) = &env.cgroup_parent else {
        return Ok(None);
    };
    let why = format!("{what} (the shared budget is `{parent}`)");
    if env.builds.allow_unbudgeted {
        return Ok(Some(super::Rewrite {
            rule: UNBUDGETED,
            what: format!("{why}: forwarded anyway (--allow-unbudgeted-builds)"),
        }));
    }
    Err(Denial::new(UNBUDGETED, why))
}

/// The rule of a build outside the budget; as a rewrite, the proxy logs it as a warning.
pub const UNBUDGETED: &str = "limits.build_budget";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::path::CanonicalPath;
    use crate::api::query::Query;
    use crate::api::route;
    use crate::policy::{Verdict, decide};

    fn req(path: &str, body: &str) -> Request {
        let (p, q) = path.split_once('?').unwrap_or((path, ""));
        let body =
            (!body.is_empty()).then(|| crate::api::json::parse(body.as_bytes()).expect("json"));
        Request {
            method: "POST".into(),
            route: route::classify("POST", &CanonicalPath::parse(p).expect("path")),
            query: Query::parse(Some(q)).expect("query"),
            has_body: body.is_some(),
            body,
        }
    }

    fn budget_facts(count: u64) -> Facts {
        let env = Environment {
            cgroup_parent: Some("/dwbudget".into()),
            memory_budget: Some(64 << 20),
            pids_budget: Some(100),
            ..Environment::default()
        };
        Facts {
            env: env.into(),
            container_count: Some(count),
            ..Facts::default()
        }
    }

    fn run(path: &str, body: &str, f: &Facts) -> Verdict {
        decide(&req(path, body), f, &Policy::default_policy())
    }

    #[test]
    fn the_65th_container_is_refused_with_a_way_out() {
        let Verdict::Deny(d) = run("/containers/create", r#"{"Image":"x"}"#, &budget_facts(64))
        else {
            panic!("allowed")
        };
        assert_eq!(d.rule, "limits.containers");
        assert!(
            d.client_message().contains("docker rm"),
            "{}",
            d.client_message()
        );
        assert!(matches!(
            run("/containers/create", r#"{"Image":"x"}"#, &budget_facts(63)),
            Verdict::Allow(_)
        ));
        let uncounted = Facts {
            container_count: None,
            ..budget_facts(0)
        };
        assert!(matches!(
            run("/containers/create", r#"{"Image":"x"}"#, &uncounted),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn create_is_placed_under_the_parent_cgroup() {
        let Verdict::Allow(p) = run(
            "/containers/create",
            r#"{"Image":"x","HostConfig":{"Memory":1048576}}"#,
            &budget_facts(0),
        ) else {
            panic!("denied")
        };
        let body = p.body().and_then(Json::as_object).expect("rewritten body");
        let hc = body
            .object("HostConfig")
            .expect("object")
            .expect("HostConfig");
        assert_eq!(hc.str("CgroupParent").expect("string"), Some("/dwbudget"));
        assert_eq!(hc.int("Memory").expect("int"), Some(1048576));
        assert!(
            p.rewrites()
                .iter()
                .any(|r| r.rule == "limits.cgroup_parent")
        );
    }

    #[test]
    fn rejects_limits_larger_than_the_budget() {
        let f = budget_facts(0);
        let deny = |body: &str| match run("/containers/create", body, &f) {
            Verdict::Deny(d) => Some(d.rule),
            Verdict::Allow(_) => None,
        };
        assert_eq!(
            deny(r#"{"HostConfig":{"Memory":134217728}}"#),
            Some("limits.memory")
        );
        assert_eq!(
            deny(r#"{"HostConfig":{"PidsLimit":1000}}"#),
            Some("limits.pids")
        );
        assert_eq!(deny(r#"{"HostConfig":{"PidsLimit":-1}}"#), None);
        // The container rules refuse a client's CgroupParent first; this module is the backstop.
        assert!(
            deny(r#"{"HostConfig":{"CgroupParent":"/"}}"#)
                .is_some_and(|r| r.ends_with("cgroup_parent"))
        );
        let env = Environment {
            cgroup_parent: Some("/dwbudget".into()),
            ..Environment::default()
        };
        let hc = crate::api::json::parse(br#"{"CgroupParent":"/"}"#).expect("json");
        let err = check_cgroup_parent(hc.as_object().expect("object"), &env).expect_err("refused");
        assert_eq!(err.rule, "limits.cgroup_parent");
        // Update reaches into a container: it must be one this proxy made (`container::foreign`).
        let mut f = f;
        let own = crate::policy::facts::ContainerFact {
            id: "abc".into(),
            host_config: crate::api::json::parse(br#"{"CgroupnsMode":"private"}"#).expect("json"),
            labels: Vec::new(),
            created_here: true,
            volumes: Vec::new(),
        };
        f.containers.insert("abc".into(), Some(own));
        let upd = |body: &str| match run("/containers/abc/update", body, &f) {
            Verdict::Deny(d) => Some(d.rule),
            Verdict::Allow(_) => None,
        };
        assert_eq!(upd(r#"{"Memory":134217728}"#), Some("limits.memory"));
        assert_eq!(upd(r#"{"Memory":1048576}"#), None);
    }

    #[test]
    fn builds_run_under_the_parent_cgroup() {
        let Verdict::Allow(p) = run("/build?t=x", "", &budget_facts(0)) else {
            panic!("denied")
        };
        assert_eq!(
            p.query().and_then(|q| q.get("cgroupparent")),
            Some("/dwbudget")
        );
        assert_eq!(p.query().and_then(|q| q.get("t")), Some("x"));
    }

    #[test]
    fn classic_builds_are_placed_and_buildkit_builds_only_on_a_daemon_inside_the_budget() {
        let facts = |inside: bool, allow: bool| {
            let mut f = budget_facts(0);
            let mut env = (*f.env).clone();
            env.builds.daemon_inside = inside;
            env.builds.allow_unbudgeted = allow;
            f.env = env.into();
            f
        };
        let placed = |v: Verdict| match v {
            Verdict::Allow(p) => {
                let q = p.query().expect("query rewritten");
                assert_eq!(q.all("cgroupparent"), ["/dwbudget"]);
                p.rules()
            }
            Verdict::Deny(d) => panic!("denied: {}", d.client_message()),
        };
        // The classic builder takes the proxy's cgroupparent, whatever the daemon's.
        for q in ["", "version=1", "version=1&version=2"] {
            for inside in [false, true] {
                let r = placed(run(&format!("/build?{q}"), "", &facts(inside, false)));
                assert_eq!(r, ["limits.cgroup_parent"], "{q}");
            }
        }
        // BuildKit ignores it: only a daemon whose own cgroup parent is the budget's places it.
        let Verdict::Deny(d) = run("/build?version=2", "", &facts(false, false)) else {
            panic!("allowed")
        };
        assert_eq!(d.rule, "limits.build_budget");
        assert!(
            d.client_message().contains("daemon.json"),
            "{}",
            d.client_message()
        );
        assert_eq!(
            placed(run("/build?version=2", "", &facts(true, false))),
            ["limits.cgroup_parent"]
        );
        assert_eq!(
            placed(run("/build?version=2", "", &facts(false, true))),
            ["limits.cgroup_parent", "limits.build_budget"]
        );
    }
}
