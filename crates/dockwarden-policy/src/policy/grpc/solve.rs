//! `Control/Solve`, `LLBBridge/Solve` and `LLBBridge/ResolveSourceMeta`: what a build asks the
//! daemon's BuildKit to do, judged before it is forwarded.
//!
//! The Dockerfile frontend runs inside the daemon: the LLB it makes from a Dockerfile never
//! crosses the wire. What does cross it, and is judged here, is the frontend's attributes, the
//! entitlements the build is granted (BuildKit checks each step against them: no entitlement,
//! no `RUN --network=host` and no `RUN --security=insecure`), the cache and exporter settings,
//! and any LLB the client sends itself (plain LLB without a frontend, frontend inputs).

use std::collections::HashMap;

use prost::Message;

use super::messages::{
    CONTROL_FRONTEND_ATTRS, CacheOptions, CacheOptionsEntry, ControlSolveRequest, Definition,
    Exporter, GATEWAY_FRONTEND_OPT, GatewaySolveRequest, NET_HOST, NET_NONE, NET_SANDBOX, Op,
    ResolveSourceMetaRequest, SECURITY_SANDBOX, SourceOp, StringEntry,
};
use super::{Allowed, Refusal};
use crate::policy::facts::Environment;
use crate::policy::limits::unplaced_build;
use crate::policy::{Denial, Rewrite};

/// The frontends the proxy judges: none (plain LLB), the built-in Dockerfile frontend and
/// gateway frontends (images; `# syntax=` makes the Dockerfile frontend hand over to one).
const FRONTENDS: &[&str] = &["", "dockerfile.v0", "gateway.v0"];

/// The frontend attribute that places every RUN step under a cgroup parent.
const CGROUP_PARENT: &str = "cgroup-parent";

/// Frontend attributes that are passed on as they are. Every one was read in BuildKit's
/// `frontend/dockerui` (v0.13) and buildx 0.13; none reaches the host (`docs/networks-build.md`).
const PLAIN_ATTRS: &[&str] = &[
    "filename",
    "target",
    "platform",
    "multi-platform",
    "no-cache",
    "image-resolve-mode",
    "add-hosts",
    "hostname",
    "shm-size",
    "ulimit",
    "cache-from",
    "contextsubdir",
    "dockerfilekey",
    "source",
    "cmdline",
    "requestid",
    "frontend.caps",
    "call",
    "override-copy-image",
    "exporter-image-config",
    "image-config",
];
/// Prefixes of frontend attributes passed on as they are.
const PLAIN_PREFIXES: &[&str] = &[
    "build-arg:",
    "label:",
    "attest:",
    "input-metadata:",
    "frontend.",
    "vcs:",
];

/// Schemes of named contexts (`context:<name>`) the daemon resolves without fetching a URL:
/// images (as `docker pull` would), OCI layouts and local directories over the client's
/// session, and frontend inputs.
const CONTEXT_SCHEMES: &[&str] = &["docker-image", "oci-layout", "local", "input", "target"];

/// Exporter types: images in the daemon's store, or files sent to the client over its session.
const EXPORTERS: &[&str] = &[
    "",
    "image",
    "moby",
    "docker",
    "oci",
    "tar",
    "local",
    "cacheonly",
];

/// Cache types that stay within a registry, the client's session or the image.
const CACHE_TYPES: &[&str] = &["registry", "local", "inline"];

/// `/moby.buildkit.v1.Control/Solve`.
pub fn control_solve(message: &[u8], env: &Environment) -> Result<Allowed, Refusal> {
    let req = ControlSolveRequest::decode(message)
        .map_err(|e| Refusal::Invalid(format!("cannot read the Solve request: {e}")))?;
    check_entitlements(&req.entitlements)?;
    if req.source_policy.is_some() {
        return Err(source_policy_denial().into());
    }
    check_frontend(&req.frontend)?;
    check_attrs(&req.frontend_attrs, env)?;
    if let Some(c) = &req.cache {
        check_cache_options(c)?;
    }
    check_exporter(&req.exporter_deprecated)?;
    req.exporters
        .iter()
        .try_for_each(|e: &Exporter| check_exporter(&e.r#type))?;
    let steps = check_definitions(req.definition.as_ref(), &req.frontend_inputs, env)?;
    let unplaced = steps.or(check_frontend_placement(&req.frontend, env)?);
    Ok(budget_rewrite(
        message,
        &req.frontend,
        &req.frontend_attrs,
        CONTROL_FRONTEND_ATTRS,
        env,
    )
    .noting(unplaced))
}

/// `/moby.buildkit.v1.frontend.LLBBridge/Solve` (buildx runs its builds through the gateway).
pub fn gateway_solve(message: &[u8], env: &Environment) -> Result<Allowed, Refusal> {
    let req = GatewaySolveRequest::decode(message)
        .map_err(|e| Refusal::Invalid(format!("cannot read the gateway Solve request: {e}")))?;
    if !req.source_policies.is_empty() {
        return Err(source_policy_denial().into());
    }
    check_frontend(&req.frontend)?;
    check_attrs(&req.frontend_opt, env)?;
    req.cache_imports.iter().try_for_each(check_cache_entry)?;
    let steps = check_definitions(req.definition.as_ref(), &req.frontend_inputs, env)?;
    let unplaced = steps.or(check_frontend_placement(&req.frontend, env)?);
    Ok(budget_rewrite(
        message,
        &req.frontend,
        &req.frontend_opt,
        GATEWAY_FRONTEND_OPT,
        env,
    )
    .noting(unplaced))
}

/// With the budget on, where a frontend's RUN steps land (`Environment::builds`):
/// - the Dockerfile frontend on an engine that honours an LLB step's cgroup parent: where the
///   proxy's `cgroup-parent` attribute puts them ([`budget_rewrite`]);
/// - an image frontend (`gateway.v0`) there: anywhere it likes, since its LLB never crosses the
///   wire and may name its own cgroup parent; refused whatever the daemon's settings;
/// - otherwise (Engine 20.10 ignores the attribute): under the daemon's own cgroup parent.
fn check_frontend_placement(frontend: &str, env: &Environment) -> Result<Option<Rewrite>, Denial> {
    if env.cgroup_parent.is_none() || frontend.is_empty() {
        return Ok(None);
    }
    let b = env.builds;
    match frontend {
        "dockerfile.v0" if b.llb_cgroup => Ok(None),
        "gateway.v0" if b.llb_cgroup => unplaced_build(
            env,
            "an image frontend (`gateway.v0`) builds LLB the proxy never sees, whose steps can name their own cgroup parent on this engine",
        ),
        _ if b.daemon_inside => Ok(None),
        f => unplaced_build(
            env,
            &format!(
                "the frontend `{}` on this engine would run its steps under the daemon's own cgroup parent, which is not the budget's",
                bounded(f)
            ),
        ),
    }
}

/// `/moby.buildkit.v1.frontend.LLBBridge/ResolveSourceMeta`: resolving a git or HTTP source
/// makes the daemon contact it.
pub fn resolve_source_meta(message: &[u8]) -> Result<Allowed, Refusal> {
    let req = ResolveSourceMetaRequest::decode(message)
        .map_err(|e| Refusal::Invalid(format!("cannot read the request: {e}")))?;
    if !req.source_policies.is_empty() {
        return Err(source_policy_denial().into());
    }
    match &req.source {
        Some(s) => check_source(s)?,
        None => return Err(Refusal::Invalid("the request names no source".into())),
    }
    Ok(Allowed::unchanged())
}

fn source_policy_denial() -> Denial {
    Denial::new(
        "build.remote",
        "BuildKit source policies are not accepted: they can turn a source into a URL or git repository the daemon would fetch",
    )
}

fn check_entitlements(ents: &[String]) -> Result<(), Denial> {
    match ents.first() {
        None => Ok(()),
        Some(e) => Err(Denial::new(
            "build.entitlement",
            format!("the BuildKit entitlement `{}` is not allowed", bounded(e)),
        )),
    }
}

fn check_frontend(f: &str) -> Result<(), Denial> {
    if FRONTENDS.contains(&f) {
        Ok(())
    } else {
        Err(Denial::new(
            "build.frontend",
            format!("the BuildKit frontend `{}` is not allowed", bounded(f)),
        ))
    }
}

/// Frontend attributes (`FrontendAttrs`, `FrontendOpt`), as BuildKit's Dockerfile frontend
/// reads them (exact, case-sensitive keys).
fn check_attrs(attrs: &HashMap<String, String>, env: &Environment) -> Result<(), Denial> {
    let mut keys: Vec<&String> = attrs.keys().collect();
    keys.sort();
    for k in keys {
        let v = attrs[k].as_str();
        match k.as_str() {
            "force-network-mode" => {
                if !matches!(v, "" | "sandbox" | "none") {
                    return Err(Denial::new(
                        "build.network",
                        format!("build network mode `{}` is not allowed", bounded(v)),
                    ));
                }
            }
            CGROUP_PARENT => check_cgroup_parent(v, env)?,
            // The build context the frontend reads: a URL or git reference here is fetched by
            // the daemon. A context from the client comes over the session and leaves it unset.
            "context" => {
                if !v.is_empty() {
                    return Err(Denial::new(
                        "build.remote",
                        format!(
                            "building from remote context `{}` is not allowed",
                            bounded(v)
                        ),
                    ));
                }
            }
            // Renames the attribute read as the context, which would hide a remote one.
            "contextkey" => {
                return Err(Denial::new(
                    "build.remote",
                    "the frontend attribute `contextkey` is not allowed",
                ));
            }
            "cache-imports" => check_cache_imports_json(v)?,
            key if key.starts_with("context:") => check_named_context(key, v)?,
            key if PLAIN_ATTRS.contains(&key)
                || PLAIN_PREFIXES.iter().any(|p| key.starts_with(p)) => {}
            key => {
                return Err(Denial::new(
                    "build.option",
                    format!("the frontend attribute `{}` is not allowed", bounded(key)),
                ));
            }
        }
    }
    Ok(())
}

fn check_cgroup_parent(v: &str, env: &Environment) -> Result<(), Denial> {
    if v.is_empty() || env.cgroup_parent.as_deref() == Some(v) {
        Ok(())
    } else {
        Err(Denial::new(
            "build.cgroup_parent",
            format!("build cgroup parent `{}` is not allowed", bounded(v)),
        ))
    }
}

/// `context:<name>=<scheme>:<ref>`; BuildKit reads `git@host:repo` as git.
fn check_named_context(key: &str, v: &str) -> Result<(), Denial> {
    let scheme = v.split_once(':').map(|(s, _)| s).unwrap_or("");
    if !scheme.starts_with("git@") && CONTEXT_SCHEMES.contains(&scheme) {
        return Ok(());
    }
    Err(Denial::new(
        "build.remote",
        format!(
            "build context `{}` from `{}` is not allowed: the daemon would fetch it",
            bounded(key),
            bounded(v)
        ),
    ))
}

/// The `cache-imports` attribute: a JSON list of `{"Type": ..., "Attrs": {...}}`.
fn check_cache_imports_json(v: &str) -> Result<(), Denial> {
    if v.is_empty() {
        return Ok(());
    }
    let bad = || {
        Denial::new(
            "build.option",
            "the frontend attribute `cache-imports` is not a list of cache entries",
        )
    };
    let list: serde_json::Value = serde_json::from_str(v).map_err(|_| bad())?;
    let items = list.as_array().ok_or_else(bad)?;
    for item in items {
        let o = item.as_object().ok_or_else(bad)?;
        // Go matches the struct's field names case-insensitively.
        let ty = o
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("type"))
            .and_then(|(_, t)| t.as_str())
            .unwrap_or("");
        check_cache_type(ty)?;
    }
    Ok(())
}

fn check_cache_options(c: &CacheOptions) -> Result<(), Denial> {
    c.exports
        .iter()
        .chain(&c.imports)
        .try_for_each(check_cache_entry)
}

fn check_cache_entry(e: &CacheOptionsEntry) -> Result<(), Denial> {
    check_cache_type(&e.r#type)
}

fn check_cache_type(t: &str) -> Result<(), Denial> {
    if CACHE_TYPES.contains(&t) {
        return Ok(());
    }
    Err(Denial::new(
        "build.remote",
        format!(
            "build cache type `{}` is not allowed: the daemon would contact its service itself",
            bounded(t)
        ),
    ))
}

fn check_exporter(t: &str) -> Result<(), Denial> {
    if EXPORTERS.contains(&t) {
        return Ok(());
    }
    Err(Denial::new(
        "build.option",
        format!("build exporter `{}` is not allowed", bounded(t)),
    ))
}

/// Every definition the client sent; `Some` note: a step outside the budget, let by with
/// `--allow-unbudgeted-builds`.
fn check_definitions(
    def: Option<&Definition>,
    inputs: &HashMap<String, Definition>,
    env: &Environment,
) -> Result<Option<Rewrite>, Refusal> {
    let mut names: Vec<&String> = inputs.keys().collect();
    names.sort();
    let mut unplaced = None;
    for d in def.into_iter().chain(names.into_iter().map(|n| &inputs[n])) {
        if let Some(note) = check_definition(d, env)? {
            unplaced.get_or_insert(note);
        }
    }
    Ok(unplaced)
}

/// Every op of an LLB definition the client sent.
pub fn check_definition(def: &Definition, env: &Environment) -> Result<Option<Rewrite>, Refusal> {
    let mut unplaced = None;
    for raw in &def.def {
        let op = Op::decode(raw.as_slice())
            .map_err(|e| Refusal::Invalid(format!("cannot read an LLB op: {e}")))?;
        if let Some(x) = &op.exec {
            match x.network {
                NET_SANDBOX | NET_NONE => {}
                NET_HOST => {
                    return Err(Denial::new(
                        "build.network",
                        "an LLB step with the host network is not allowed",
                    )
                    .into());
                }
                n => {
                    return Err(Denial::new(
                        "build.llb",
                        format!("LLB network mode {n} is not known"),
                    )
                    .into());
                }
            }
            if x.security != SECURITY_SANDBOX {
                return Err(Denial::new(
                    "build.entitlement",
                    "an insecure (privileged) LLB step is not allowed",
                )
                .into());
            }
            let cg = x
                .meta
                .as_ref()
                .map(|m| m.cgroup_parent.as_str())
                .unwrap_or("");
            check_cgroup_parent(cg, env)?;
            // Engine 23 and later honour the step's own cgroup parent; 20.10 ignores it, and a
            // step without one runs under the daemon's.
            let placed = if env.builds.llb_cgroup {
                !cg.is_empty() || env.builds.daemon_inside
            } else {
                env.builds.daemon_inside
            };
            if env.cgroup_parent.is_some() && !placed {
                // Forwarded only with --allow-unbudgeted-builds; the note is logged then.
                if let Some(note) = unplaced_build(
                    env,
                    "an LLB exec step would run under the daemon's own cgroup parent, which is not the budget's",
                )? {
                    unplaced.get_or_insert(note);
                }
            }
        }
        if let Some(s) = &op.source {
            check_source(s)?;
        }
        if op.build.is_some() {
            return Err(Denial::new("build.llb", "nested LLB builds are not allowed").into());
        }
    }
    Ok(unplaced)
}

/// An LLB source: images, local directories and OCI layouts (over the session); git and
/// HTTP sources are fetched by the daemon.
fn check_source(s: &SourceOp) -> Result<(), Denial> {
    let scheme = s.identifier.split_once("://").map(|(a, _)| a).unwrap_or("");
    match scheme {
        "docker-image" | "local" | "oci-layout" => Ok(()),
        "git" | "http" | "https" => Err(Denial::new(
            "build.remote",
            format!(
                "the LLB source `{}` would be fetched by the daemon",
                bounded(&s.identifier)
            ),
        )),
        _ => Err(Denial::new(
            "build.llb",
            format!("the LLB source `{}` is not known", bounded(&s.identifier)),
        )),
    }
}

/// With the budget on and an engine that honours an LLB step's cgroup parent, a Dockerfile
/// build gets the proxy's cgroup parent as its `cgroup-parent` attribute, so every RUN step runs
/// beneath the parent cgroup, and a `cmdline` attribute, which turns off the frontend's hand-over
/// to an image named by `# syntax=` or `BUILDKIT_SYNTAX` (BuildKit's `dockerfile/builder`
/// forwards only when `cmdline` is absent): an image frontend's LLB would never be judged here.
/// The entries are appended to the client's bytes: a protobuf map's last entry for a key wins,
/// and fields the proxy does not declare reach the daemon unchanged.
fn budget_rewrite(
    message: &[u8],
    frontend: &str,
    attrs: &HashMap<String, String>,
    field: u32,
    env: &Environment,
) -> Allowed {
    let Some(parent) = &env.cgroup_parent else {
        return Allowed::unchanged();
    };
    if frontend != "dockerfile.v0" || !env.builds.llb_cgroup {
        return Allowed::unchanged();
    }
    let mut out = message.to_vec();
    let mut rewrites = Vec::new();
    let mut append = |key: &str, value: &str| {
        prost::encoding::message::encode(
            field,
            &StringEntry {
                key: key.into(),
                value: value.into(),
            },
            &mut out,
        );
    };
    if attrs.get(CGROUP_PARENT) != Some(parent) {
        append(CGROUP_PARENT, parent);
        rewrites.push(Rewrite {
            rule: "limits.cgroup_parent",
            what: format!("frontend attribute `cgroup-parent` set to `{parent}`"),
        });
    }
    if !attrs.contains_key(CMDLINE) {
        append(CMDLINE, "");
        rewrites.push(Rewrite {
            rule: "limits.cgroup_parent",
            what: "frontend attribute `cmdline` set: a `# syntax=` image frontend is not handed the build".into(),
        });
    }
    if rewrites.is_empty() {
        return Allowed::unchanged();
    }
    Allowed::edited(out, rewrites)
}

/// The Dockerfile frontend's attribute that marks a build already handed over (`cmdline`).
const CMDLINE: &str = "cmdline";

fn bounded(s: &str) -> String {
    s.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::facts::BuildPlacement;
    use crate::policy::grpc::messages::{ExecOp, Meta};

    fn env(parent: Option<&str>) -> Environment {
        Environment {
            cgroup_parent: parent.map(str::to_owned),
            ..Environment::default()
        }
    }

    /// Engine 26.1 (an LLB step's cgroup parent is honoured) on a daemon outside the budget.
    fn env26(parent: Option<&str>) -> Environment {
        Environment {
            builds: BuildPlacement {
                llb_cgroup: true,
                ..BuildPlacement::default()
            },
            ..env(parent)
        }
    }

    fn solve(f: impl FnOnce(&mut ControlSolveRequest)) -> Vec<u8> {
        let mut r = ControlSolveRequest {
            frontend: "dockerfile.v0".into(),
            ..Default::default()
        };
        f(&mut r);
        r.encode_to_vec()
    }

    fn rule(r: Result<Allowed, Refusal>) -> Option<&'static str> {
        match r {
            Ok(_) => None,
            Err(Refusal::Denied(d)) => Some(d.rule),
            Err(Refusal::Invalid(_)) => Some("invalid"),
        }
    }

    fn attr(k: &str, v: &str) -> Option<&'static str> {
        rule(control_solve(
            &solve(|r| drop(r.frontend_attrs.insert(k.into(), v.into()))),
            &env(None),
        ))
    }

    #[test]
    fn entitlements_are_refused() {
        for e in ["network.host", "security.insecure", "device", "x"] {
            assert_eq!(
                rule(control_solve(
                    &solve(|r| r.entitlements.push(e.into())),
                    &env(None)
                )),
                Some("build.entitlement"),
                "{e}"
            );
        }
    }

    #[test]
    fn host_network_and_remote_contexts_in_attributes_are_refused() {
        assert_eq!(attr("force-network-mode", "host"), Some("build.network"));
        assert_eq!(attr("force-network-mode", "Host"), Some("build.network"));
        assert_eq!(attr("force-network-mode", "none"), None);
        assert_eq!(attr("force-network-mode", "sandbox"), None);
        for v in [
            "https://127.0.0.1:8000/ctx.tar",
            "git://10.0.0.1/r.git",
            "github.com/a/b",
            "git@host:r.git",
            "anything",
        ] {
            assert_eq!(attr("context", v), Some("build.remote"), "{v}");
        }
        assert_eq!(attr("contextkey", "x"), Some("build.remote"));
        for v in [
            "git://h/r",
            "https://h/x.tar",
            "git@h:r",
            "http://h/",
            "weird:x",
            "nocolon",
        ] {
            assert_eq!(attr("context:base", v), Some("build.remote"), "{v}");
        }
        for v in [
            "docker-image://dockwarden-test",
            "local:base",
            "input:base",
            "oci-layout://store@sha256:00",
        ] {
            assert_eq!(attr("context:base", v), None, "{v}");
        }
        assert_eq!(attr("cgroup-parent", "/"), Some("build.cgroup_parent"));
        assert_eq!(
            attr(
                "cache-imports",
                r#"[{"Type":"gha","Attrs":{"url":"http://127.0.0.1/"}}]"#
            ),
            Some("build.remote")
        );
        assert_eq!(
            attr("cache-imports", r#"[{"Type":"local","Attrs":{"src":"x"}}]"#),
            None
        );
        assert_eq!(attr("unknown-attr", "1"), Some("build.option"));
        assert_eq!(attr("build-arg:X", "http://example.com"), None);
    }

    #[test]
    fn unknown_frontends_exporters_caches_and_source_policies_are_refused() {
        assert_eq!(
            rule(control_solve(
                &solve(|r| r.frontend = "other.v0".into()),
                &env(None)
            )),
            Some("build.frontend")
        );
        let e = Exporter {
            r#type: "weird".into(),
            ..Default::default()
        };
        assert_eq!(
            rule(control_solve(&solve(|r| r.exporters.push(e)), &env(None))),
            Some("build.option")
        );
        let c = CacheOptions {
            imports: vec![CacheOptionsEntry {
                r#type: "s3".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            rule(control_solve(&solve(|r| r.cache = Some(c)), &env(None))),
            Some("build.remote")
        );
        assert_eq!(
            rule(control_solve(
                &solve(|r| r.source_policy = Some(vec![])),
                &env(None)
            )),
            Some("build.remote")
        );
    }

    fn def_with(op: Op) -> Definition {
        Definition {
            def: vec![op.encode_to_vec()],
        }
    }

    fn exec(network: i32, security: i32, cg: &str) -> Op {
        Op {
            exec: Some(ExecOp {
                meta: Some(Meta {
                    args: vec!["sh".into()],
                    cgroup_parent: cg.into(),
                }),
                network,
                security,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn raw_llb_host_network_insecure_and_remote_sources_are_refused() {
        let raw = |op: Op, e: &Environment| {
            rule(control_solve(
                &solve(|r| {
                    r.frontend = String::new();
                    r.definition = Some(def_with(op));
                }),
                e,
            ))
        };
        assert_eq!(
            raw(exec(NET_HOST, 0, ""), &env(None)),
            Some("build.network")
        );
        assert_eq!(raw(exec(0, 1, ""), &env(None)), Some("build.entitlement"));
        assert_eq!(raw(exec(7, 0, ""), &env(None)), Some("build.llb"));
        assert_eq!(raw(exec(NET_NONE, 0, ""), &env(None)), None);
        assert_eq!(
            raw(exec(0, 0, ""), &env(Some("/dw"))),
            Some("limits.build_budget")
        );
        assert_eq!(raw(exec(0, 0, "/dw"), &env26(Some("/dw"))), None);
        assert_eq!(
            raw(exec(0, 0, "/other"), &env(Some("/dw"))),
            Some("build.cgroup_parent")
        );
        let src = |id: &str| Op {
            source: Some(SourceOp {
                identifier: id.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            raw(src("git://127.0.0.1/x"), &env(None)),
            Some("build.remote")
        );
        assert_eq!(
            raw(src("https://127.0.0.1/x"), &env(None)),
            Some("build.remote")
        );
        assert_eq!(
            raw(
                src("docker-image://docker.io/library/dockwarden-test:latest"),
                &env(None)
            ),
            None
        );
        assert_eq!(raw(src("local://context"), &env(None)), None);
        assert_eq!(raw(src("nfs://x"), &env(None)), Some("build.llb"));
        assert_eq!(
            raw(
                Op {
                    build: Some(vec![]),
                    ..Default::default()
                },
                &env(None)
            ),
            Some("build.llb")
        );
        // Frontend inputs are judged like the definition.
        let r = solve(|r| {
            drop(
                r.frontend_inputs
                    .insert("context".into(), def_with(exec(NET_HOST, 0, ""))),
            )
        });
        assert_eq!(rule(control_solve(&r, &env(None))), Some("build.network"));
    }

    #[test]
    fn unparseable_messages_are_invalid() {
        assert_eq!(
            rule(control_solve(&[0xff, 0xff, 0xff], &env(None))),
            Some("invalid")
        );
        let bad_op = solve(|r| {
            r.definition = Some(Definition {
                def: vec![vec![0x12, 0x50]],
            })
        });
        assert_eq!(rule(control_solve(&bad_op, &env(None))), Some("invalid"));
    }

    #[test]
    fn the_budget_rewrite_appends_the_cgroup_parent_and_keeps_everything_else() {
        let msg = solve(|r| {
            r.frontend_attrs
                .insert("filename".into(), "Dockerfile".into());
            r.r#ref = "abc".into();
        });
        let a = control_solve(&msg, &env26(Some("/dockwarden"))).expect("allowed");
        let out = a.message().expect("rewritten");
        assert!(out.starts_with(&msg));
        let back = ControlSolveRequest::decode(out).expect("decodes");
        assert_eq!(
            back.frontend_attrs.get("cgroup-parent").map(String::as_str),
            Some("/dockwarden")
        );
        assert_eq!(
            back.frontend_attrs.get("filename").map(String::as_str),
            Some("Dockerfile")
        );
        // The hand-over to a `# syntax=` image frontend is off.
        assert_eq!(
            back.frontend_attrs.get("cmdline").map(String::as_str),
            Some("")
        );
        assert_eq!(back.r#ref, "abc");
        assert_eq!(a.rules(), ["limits.cgroup_parent", "limits.cgroup_parent"]);
        assert!(
            control_solve(&msg, &env(None))
                .expect("allowed")
                .message()
                .is_none()
        );
        // Plain LLB without a frontend is not rewritten (its exec steps are judged instead).
        let raw = solve(|r| r.frontend = String::new());
        assert!(
            control_solve(&raw, &env26(Some("/dockwarden")))
                .expect("allowed")
                .message()
                .is_none()
        );
        let g = GatewaySolveRequest {
            frontend: "dockerfile.v0".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let a = gateway_solve(&g, &env26(Some("/dw"))).expect("allowed");
        let back = GatewaySolveRequest::decode(a.message().expect("rewritten")).expect("decodes");
        assert_eq!(
            back.frontend_opt.get("cgroup-parent").map(String::as_str),
            Some("/dw")
        );
    }

    /// Every BuildKit path with the budget on: placed by the proxy, placed by the daemon, or
    /// refused (`limits.build_budget`); with `--allow-unbudgeted-builds` forwarded with a note.
    #[test]
    fn build_steps_are_placed_in_the_budget_or_refused() {
        let dockerfile = solve(|_| {});
        let gateway = solve(|r| r.frontend = "gateway.v0".into());
        let plain = |cg: &str| {
            solve(|r| {
                r.frontend = String::new();
                r.definition = Some(def_with(exec(0, 0, cg)));
            })
        };
        let bridge_gateway = GatewaySolveRequest {
            frontend: "gateway.v0".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let ok = None;
        let no = Some("limits.build_budget");
        // (engine honours LLB cgroup parents, daemon inside the budget) → dockerfile.v0,
        // gateway.v0 (Control and LLBBridge), plain LLB with no cgroup parent, with the budget's.
        let table = [
            ((false, false), [no, no, no, no, no]),
            ((false, true), [ok, ok, ok, ok, ok]),
            ((true, false), [ok, no, no, no, ok]),
            ((true, true), [ok, no, no, ok, ok]),
        ];
        for ((llb_cgroup, daemon_inside), want) in table {
            for allow_unbudgeted in [false, true] {
                let e = Environment {
                    builds: BuildPlacement {
                        llb_cgroup,
                        daemon_inside,
                        allow_unbudgeted,
                    },
                    ..env(Some("/dw"))
                };
                let got = [
                    control_solve(&dockerfile, &e),
                    control_solve(&gateway, &e),
                    gateway_solve(&bridge_gateway, &e),
                    control_solve(&plain(""), &e),
                    control_solve(&plain("/dw"), &e),
                ];
                for (i, (g, w)) in got.into_iter().zip(want).enumerate() {
                    let case = format!(
                        "llb_cgroup={llb_cgroup} inside={daemon_inside} allow={allow_unbudgeted} #{i}"
                    );
                    match (allow_unbudgeted, w) {
                        (false, w) => assert_eq!(rule(g), w, "{case}"),
                        // Let by, with the note the proxy logs as a warning.
                        (true, w) => {
                            let a = g.expect(&case);
                            assert_eq!(
                                a.rules().contains(&"limits.build_budget"),
                                w.is_some(),
                                "{case}"
                            );
                        }
                    }
                }
            }
        }
        // Without the budget nothing is placed and nothing refused for it.
        assert_eq!(rule(control_solve(&gateway, &env(None))), None);
    }
}
