//! Bind sources go to the daemon as pins. Each absolute bind source beneath the workspace is
//! replaced by the root-only pin the proxy mounted for it while gathering facts (see
//! `dockwarden::hostfs::pins`), so the daemon mounts the inode that was checked, whatever the
//! workspace path points at later. Pure: the pins arrive in [`Facts::pins`].
//!
//! INVARIANT: an allowed create never carries a bind source beneath the workspace that is
//! not a pin; if one cannot be pinned, the request is refused.

use std::collections::BTreeSet;

use super::catalogue::Rule;
use super::{Denial, Effect, FactQuery, Facts, Permitted, Request};
use crate::api::json::{Json, Object};
use crate::path_clean::clean;

pub const RULES: &[Rule] = &[
    Rule {
        id: "container.bind.pin",
        rationale: "a bind source is replaced by a root-only pin of the checked directory or file, so swapping the workspace path for a symlink later changes nothing",
        hint: "nothing to do: the container sees the workspace path it asked for",
    },
    Rule {
        id: "container.bind.pin_limit",
        rationale: "every bind source is a host mount; a create may name at most `limits.max_pins` distinct sources, and the workspace's proxy holds at most that many pins at once, so no request can flood the host's mount table",
        hint: "bind a common parent directory instead of many paths, or remove containers that are no longer needed",
    },
    Rule {
        id: "container.bind.pin_failed",
        rationale: "a bind source beneath the workspace that cannot be pinned (missing, through a symlink, not a file or directory, or the mount failed) is refused rather than passed on unpinned",
        hint: "bind an existing directory or file of the workspace, reached without symlinks",
    },
];

/// Every location a create body can carry binds in: `HostConfig`, and the top level (daemons
/// up to 26.x read HostConfig fields there when `HostConfig` is absent or null).
const SCOPES: [Option<&str>; 2] = [Some("HostConfig"), None];

/// The host-path facts (and so the pins) a create needs: every absolute bind source.
pub fn needs(req: &Request) -> Vec<FactQuery> {
    let mut out = BTreeSet::new();
    if let Some(Json::Object(body)) = &req.body {
        // Only the bind-carrying fields are copied: the visitor works on a mutable object.
        visit(&mut bind_fields(body), &mut |src| {
            out.insert(clean(src));
            None
        });
    }
    out.into_iter().map(FactQuery::HostPath).collect()
}

/// Refuses a create that names more distinct bind sources than one workspace may pin, before
/// any fact is gathered (so before any pin is mounted).
pub fn check_count(sources: usize, policy: &super::Policy) -> Result<(), Denial> {
    let max = policy.limits.max_pins;
    if sources as u64 > max {
        return Err(Denial::new(
            "container.bind.pin_limit",
            format!("the create names {sources} bind sources; at most {max} are allowed"),
        ));
    }
    Ok(())
}

/// Replaces every bind source beneath the workspace (and every source the container rules
/// asked to pin) with its pin, and records one `PinBindSource` effect per pinned source so
/// the proxy knows which pins the forwarded request uses. Must be the last body rewrite.
pub fn apply(
    req: &Request,
    facts: &Facts,
    policy: &super::Policy,
    mut p: Permitted,
) -> Result<Permitted, Denial> {
    if !matches!(p.body().or(req.body.as_ref()), Some(Json::Object(_))) {
        return Ok(p);
    }
    let asked: BTreeSet<String> = p
        .effects()
        .iter()
        .map(|e| match e {
            Effect::PinBindSource { host_path } => clean(host_path),
        })
        .collect();
    let ws = facts.env.workspace.trim_end_matches('/');
    let env = &facts.env;
    // The proxy's own socket (which Docker-socket binds are rewritten to) is never pinned.
    let socket =
        |k: &str| k == env.proxy_socket || env.daemon_sockets.iter().any(|s| clean(s) == k);
    let beneath = |k: &str| {
        !socket(k)
            && !ws.is_empty()
            && (k == ws || k.strip_prefix(ws).is_some_and(|r| r.starts_with('/')))
    };
    let mut pinned: Vec<(String, String)> = Vec::new();
    let mut failed: Option<String> = None;
    // INVARIANT: on a denial `p` is dropped; without a pin the visit leaves every value as it was.
    p.edit_body(req, |body| {
        visit(body, &mut |src| {
            let key = clean(src);
            if !(asked.contains(&key) || beneath(&key)) {
                return None;
            }
            match facts.pins.get(&key) {
                Some(pin) => {
                    pinned.push((key, pin.clone()));
                    Some(pin.clone())
                }
                None => {
                    failed.get_or_insert_with(|| src.to_owned());
                    None
                }
            }
        });
        Ok(())
    })?;
    // The workspace's pins together: those held before this request plus its own.
    let mut new: Vec<&str> = pinned.iter().map(|(k, _)| k.as_str()).collect();
    new.sort_unstable();
    new.dedup();
    if let Some(held) = facts.pins_in_use {
        let max = policy.limits.max_pins;
        if held + new.len() as u64 > max {
            return Err(Denial::new(
                "container.bind.pin_limit",
                format!(
                    "the workspace holds {held} bind pins and this create needs {} more; at most {max} are allowed",
                    new.len()
                ),
            ));
        }
    }
    if let Some(src) = failed {
        return Err(Denial::new(
            "container.bind.pin_failed",
            format!("bind source `{src}` could not be pinned"),
        ));
    }
    if pinned.is_empty() {
        return Ok(p);
    }
    pinned.sort();
    pinned.dedup();
    for (src, pin) in pinned {
        if !asked.contains(&src) {
            p = p.effect(Effect::PinBindSource {
                host_path: src.clone(),
            });
        }
        p = p.rewrite("container.bind.pin", format!("`{src}` → `{pin}`"));
    }
    Ok(p)
}

/// A copy of just the fields [`visit`] reads: `Binds` and `Mounts`, top-level and in `HostConfig`.
fn bind_fields(body: &Object) -> Object {
    let pick = |from: &Object| {
        let mut o = Object::new();
        for k in ["Binds", "Mounts"] {
            if let Some(v) = from.get(k) {
                o.push_unique(k, v.clone());
            }
        }
        o
    };
    let mut out = pick(body);
    if let Some(Json::Object(hc)) = body.get("HostConfig") {
        out.push_unique("HostConfig", Json::Object(pick(hc)));
    }
    out
}

/// Calls `f` on each absolute bind source; when it returns a replacement, substitutes it.
fn visit(body: &mut Object, f: &mut dyn FnMut(&str) -> Option<String>) {
    for scope in SCOPES {
        let obj = match scope {
            Some(k) => match body.get_mut(k) {
                Some(Json::Object(o)) => o,
                _ => continue,
            },
            None => &mut *body,
        };
        visit_scope(obj, f);
    }
}

fn visit_scope(hc: &mut Object, f: &mut dyn FnMut(&str) -> Option<String>) {
    if let Some(Json::Array(binds)) = hc.get("Binds") {
        let new: Vec<Json> = binds.iter().map(|b| rewrite_bind(b, f)).collect();
        hc.set("Binds", Json::Array(new));
    }
    if let Some(Json::Array(mounts)) = hc.get("Mounts") {
        let new: Vec<Json> = mounts.iter().map(|m| rewrite_mount(m, f)).collect();
        hc.set("Mounts", Json::Array(new));
    }
}

/// `src:dst[:mode]`, split like the daemon (`strings.SplitN(spec, ":", 4)`); an absolute
/// `src` is a host bind.
fn rewrite_bind(b: &Json, f: &mut dyn FnMut(&str) -> Option<String>) -> Json {
    let Json::String(spec) = b else {
        return b.clone();
    };
    let parts: Vec<&str> = spec.splitn(4, ':').collect();
    if !(2..=3).contains(&parts.len()) || !parts[0].starts_with('/') {
        return b.clone();
    }
    match f(parts[0]) {
        Some(pin) => Json::String(
            std::iter::once(pin.as_str())
                .chain(parts[1..].iter().copied())
                .collect::<Vec<_>>()
                .join(":"),
        ),
        None => b.clone(),
    }
}

fn rewrite_mount(m: &Json, f: &mut dyn FnMut(&str) -> Option<String>) -> Json {
    let Json::Object(o) = m else { return m.clone() };
    let is_bind = matches!(o.get("Type"), Some(Json::String(t)) if t == "bind");
    let src = match o.get("Source") {
        Some(Json::String(s)) if is_bind && s.starts_with('/') => s.clone(),
        _ => return m.clone(),
    };
    match f(&src) {
        Some(pin) => {
            let mut o = o.clone();
            o.set("Source", Json::String(pin));
            Json::Object(o)
        }
        None => m.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::query::Query;
    use crate::api::route::{Endpoint, Route};

    fn req(body: &str) -> Request {
        Request {
            method: "POST".into(),
            route: Route {
                endpoint: Endpoint::ContainerCreate,
                version: None,
            },
            query: Query::parse(None).expect("query"),
            body: Some(crate::api::json::parse(body.as_bytes()).expect("json")),
            has_body: true,
        }
    }

    fn facts(pins: &[(&str, &str)]) -> Facts {
        let mut f = Facts::default();
        std::sync::Arc::make_mut(&mut f.env).workspace = "/ws".into();
        f.pins = pins
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        f
    }

    fn pol() -> crate::policy::Policy {
        crate::policy::Policy::default_policy()
    }

    #[test]
    fn a_create_naming_more_bind_sources_than_the_pin_cap_is_refused_before_any_fact() {
        let binds: Vec<String> = (0..513).map(|i| format!("\"/ws/d{i}:/m{i}\"")).collect();
        let r = req(&format!(
            r#"{{"HostConfig":{{"Binds":[{}]}}}}"#,
            binds.join(",")
        ));
        let d = crate::policy::needs(&r, &pol()).expect_err("refused at needs");
        assert_eq!(d.rule, "container.bind.pin_limit");
        let at_cap: Vec<String> = (0..512).map(|i| format!("\"/ws/d{i}:/m{i}\"")).collect();
        let r = req(&format!(
            r#"{{"HostConfig":{{"Binds":[{}]}}}}"#,
            at_cap.join(",")
        ));
        assert!(
            crate::policy::needs(&r, &pol()).is_ok(),
            "512 distinct sources are allowed"
        );
        // The same source named 600 times is one pin.
        let same: Vec<String> = (0..600).map(|i| format!("\"/ws/d:/m{i}\"")).collect();
        let r = req(&format!(
            r#"{{"HostConfig":{{"Binds":[{}]}}}}"#,
            same.join(",")
        ));
        assert!(crate::policy::needs(&r, &pol()).is_ok());
    }

    #[test]
    fn pins_held_by_the_workspace_count_against_the_cap() {
        let r = req(r#"{"HostConfig":{"Binds":["/ws/a:/x","/ws/b:/y"]}}"#);
        let mut f = facts(&[("/ws/a", "/pins/1"), ("/ws/b", "/pins/2")]);
        f.pins_in_use = Some(510);
        assert!(
            apply(&r, &f, &pol(), Permitted::allow(&r)).is_ok(),
            "510 + 2 = the cap"
        );
        f.pins_in_use = Some(511);
        let d = apply(&r, &f, &pol(), Permitted::allow(&r)).expect_err("511 + 2 is past the cap");
        assert_eq!(d.rule, "container.bind.pin_limit");
    }

    fn forwarded(p: &Permitted) -> String {
        String::from_utf8(p.body().expect("rewritten body").to_bytes()).expect("utf8")
    }

    #[test]
    fn binds_and_mounts_in_every_scope_are_replaced_by_their_pins() {
        let r = req(
            r#"{"Binds":["/ws/a:/x"],"HostConfig":{"Binds":["/ws/./a:/d:ro,z","vol:/v","/outside:/o"],"Mounts":[{"Type":"bind","Source":"/ws/f","Target":"/f"},{"Type":"volume","Source":"/ws/f","Target":"/g"}]}}"#,
        );
        let f = facts(&[("/ws/a", "/pins/1"), ("/ws/f", "/pins/2")]);
        assert_eq!(
            needs(&r),
            vec![
                FactQuery::HostPath("/outside".into()),
                FactQuery::HostPath("/ws/a".into()),
                FactQuery::HostPath("/ws/f".into())
            ]
        );
        let p = apply(&r, &f, &pol(), Permitted::allow(&r)).expect("allowed");
        let out = forwarded(&p);
        assert!(out.contains(r#""Binds":["/pins/1:/x"]"#), "{out}");
        assert!(
            out.contains(r#""Binds":["/pins/1:/d:ro,z","vol:/v","/outside:/o"]"#),
            "{out}"
        );
        assert!(
            out.contains(r#"{"Type":"bind","Source":"/pins/2","Target":"/f"}"#),
            "{out}"
        );
        assert!(
            out.contains(r#"{"Type":"volume","Source":"/ws/f","Target":"/g"}"#),
            "{out}"
        );
        assert_eq!(p.effects().len(), 2);
        assert!(p.rewrites().iter().all(|w| w.rule == "container.bind.pin"));
    }

    #[test]
    fn a_workspace_bind_without_a_pin_is_refused() {
        let r = req(r#"{"HostConfig":{"Binds":["/ws/link/etc:/d"]}}"#);
        let d = apply(&r, &facts(&[]), &pol(), Permitted::allow(&r)).expect_err("refused");
        assert_eq!(d.rule, "container.bind.pin_failed");
        let r = req(r#"{"HostConfig":{"Mounts":[{"Type":"bind","Source":"/ws","Target":"/w"}]}}"#);
        assert!(apply(&r, &facts(&[]), &pol(), Permitted::allow(&r)).is_err());
    }

    #[test]
    fn a_source_the_container_rules_asked_to_pin_must_have_a_pin() {
        let r = req(r#"{"HostConfig":{"Binds":["/elsewhere:/d"]}}"#);
        let p = Permitted::allow(&r).effect(Effect::PinBindSource {
            host_path: "/elsewhere".into(),
        });
        assert_eq!(
            apply(&r, &facts(&[]), &pol(), p).expect_err("refused").rule,
            "container.bind.pin_failed"
        );
    }

    #[test]
    fn the_proxy_socket_is_not_pinned_even_inside_the_workspace() {
        let r = req(r#"{"HostConfig":{"Binds":["/ws/docker.sock:/var/run/docker.sock"]}}"#);
        let mut f = facts(&[]);
        std::sync::Arc::make_mut(&mut f.env).proxy_socket = "/ws/docker.sock".into();
        let p = apply(&r, &f, &pol(), Permitted::allow(&r)).expect("allowed");
        assert!(
            p.body().is_none_or(|b| Some(b) == r.body.as_ref()),
            "body unchanged"
        );
        assert!(p.rewrites().is_empty());
    }

    #[test]
    fn bodies_without_workspace_binds_are_left_alone() {
        let r = req(r#"{"Image":"x","HostConfig":{"Binds":["/outside:/o","named:/n"]}}"#);
        let p = apply(&r, &facts(&[]), &pol(), Permitted::allow(&r)).expect("allowed");
        assert!(p.body().is_none_or(|b| Some(b) == r.body.as_ref()) && p.effects().is_empty());
        assert!(p.rewrites().is_empty());
    }
}
