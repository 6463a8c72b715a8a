//! Runs every data-driven case in `tests/policy_cases/*.json` through the pure policy core.
//!
//! For networks, builds and limits `facts` may also hold `networks` (reference → inspect JSON
//! or null), `host_routes` (`["192.0.2.0/24 eth0"]`), `container_count` (null: not gathered),
//! `memory_budget` and `pids_budget`; `forwarded_query` checks query rewrites and
//! `forwarded_path` the path forwarded (a judged container named by its full id).
//!
//! Containers may say `created_here` (default true) and list the `volumes` they mount;
//! `execs` maps exec IDs to container IDs (null: 404).
//!
//! Each case is `{description, method, path, body | body_raw, fs?, facts?, expect, rules,
//! forwarded?, pins?}`. `$WS` in the body, facts and `forwarded` is a fresh workspace directory
//! (with a sibling `$WS-evil`), `$PROXY` the proxy's socket. `fs` lays out the workspace
//! (`dirs`, `files`, `symlinks`); host paths the policy asks about are resolved for real with
//! `hostfs::resolve` unless the case gives them. Containers, images and volumes come only from
//! `facts`, so leaving one out (or `no_gather` for host paths) shows that a missing fact refuses.

use std::collections::BTreeMap;
use std::path::Path;

use dockwarden::api::{json, path::CanonicalPath, query::Query, route};
use dockwarden::policy::facts::{
    BuildPlacement, ContainerFact, Environment, HostPathFact, HostRoute, ImageFact, NetworkFact,
    VolumeFact,
};
use dockwarden::policy::{self, Effect, FactQuery, Facts, Policy, Request, Verdict};
use serde_json::Value;

const PROXY: &str = "/run/dockwarden/docker.sock";

struct Ws {
    _dir: tempfile::TempDir,
    ws: String,
}

fn layout(fs: Option<&Value>) -> Ws {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(root.join("ws-evil/data")).expect("ws-evil");
    let list = |k: &str| {
        fs.and_then(|f| f.get(k))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for d in list("dirs") {
        std::fs::create_dir_all(ws.join(d.as_str().expect("dir"))).expect("mkdir");
    }
    for f in list("files") {
        std::fs::write(ws.join(f.as_str().expect("file")), b"x").expect("write");
    }
    if let Some(links) = fs
        .and_then(|f| f.get("symlinks"))
        .and_then(Value::as_object)
    {
        for (name, target) in links {
            std::os::unix::fs::symlink(target.as_str().expect("target"), ws.join(name))
                .expect("symlink");
        }
    }
    Ws {
        ws: ws.to_str().expect("utf8").to_owned(),
        _dir: dir,
    }
}

fn subst(s: &str, ws: &Ws) -> String {
    s.replace("$WS", &ws.ws).replace("$PROXY", PROXY)
}

fn subst_value(v: &Value, ws: &Ws) -> Value {
    serde_json::from_str(&subst(&v.to_string(), ws)).expect("substituted json")
}

fn host_path_fact(s: &str) -> HostPathFact {
    match s {
        "inside" => HostPathFact::Inside { is_dir: true },
        "inside_file" => HostPathFact::Inside { is_dir: false },
        "missing" => HostPathFact::Missing,
        "outside" => HostPathFact::Outside,
        "symlink" => HostPathFact::ThroughSymlink,
        "docker_socket" => HostPathFact::DockerSocket,
        other => HostPathFact::Unusable(other.to_owned()),
    }
}

/// `"192.0.2.0/24 eth0"`.
fn host_route(v: &Value) -> HostRoute {
    let s = v.as_str().expect("route string");
    let (cidr, iface) = s.split_once(' ').expect("`<cidr> <iface>`");
    let (net, prefix) = cidr.split_once('/').expect("cidr");
    HostRoute {
        network: net.parse().expect("ipv4"),
        prefix: prefix.parse().expect("prefix"),
        iface: iface.to_owned(),
    }
}

fn to_json(v: &Value) -> json::Json {
    json::parse(v.to_string().as_bytes()).expect("fact json")
}

fn str_pairs(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn case_facts(f: &Value, ws: &Ws) -> Facts {
    let env = Environment {
        workspace: ws.ws.clone(),
        proxy_socket: PROXY.into(),
        daemon_sockets: vec!["/var/run/docker.sock".into(), "/run/docker.sock".into()],
        cgroup_parent: f
            .get("cgroup_parent")
            .and_then(Value::as_str)
            .map(str::to_owned),
        memory_budget: f.get("memory_budget").and_then(Value::as_u64),
        pids_budget: f.get("pids_budget").and_then(Value::as_u64),
        // `"builds": {"daemon_inside": true, ...}`; absent: the strictest reading.
        builds: BuildPlacement {
            daemon_inside: f["builds"]["daemon_inside"].as_bool().unwrap_or(false),
            llb_cgroup: f["builds"]["llb_cgroup"].as_bool().unwrap_or(false),
            allow_unbudgeted: f["builds"]["allow_unbudgeted"].as_bool().unwrap_or(false),
        },
        pin_dir: "/pins".into(),
    };
    let count = match f.get("container_count") {
        Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().expect("container_count")),
        None => Some(1),
    };
    let mut facts = Facts {
        env: env.into(),
        container_count: count,
        ..Facts::default()
    };
    facts.swarm_state = f
        .get("swarm_state")
        .and_then(Value::as_str)
        .map(str::to_owned);
    facts.host_routes = f
        .get("host_routes")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(host_route).collect());
    for (r, v) in f
        .get("networks")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
    {
        let n = (!v.is_null()).then(|| NetworkFact {
            id: v["Id"].as_str().unwrap_or("").to_owned(),
            name: v["Name"].as_str().unwrap_or("").to_owned(),
            driver: v["Driver"].as_str().unwrap_or("").to_owned(),
            options: str_pairs(v.get("Options")),
            raw: to_json(&v),
        });
        facts.networks.insert(r, n);
    }
    let obj = |k: &str| {
        f.get(k)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    for (p, v) in obj("host_paths") {
        facts
            .host_paths
            .insert(p, host_path_fact(v.as_str().expect("host path fact")));
    }
    for (r, v) in obj("containers") {
        let c = (!v.is_null()).then(|| ContainerFact {
            id: v["id"].as_str().unwrap_or("").to_owned(),
            host_config: to_json(&v["host_config"]),
            labels: Vec::new(),
            created_here: v
                .get("created_here")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            volumes: v["volumes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
        });
        facts.containers.insert(r, c);
    }
    for (r, v) in obj("execs") {
        facts.execs.insert(r, v.as_str().map(str::to_owned));
    }
    for (r, v) in obj("images") {
        let img = v.as_array().map(|a| ImageFact {
            exposed_ports: a
                .iter()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect(),
        });
        facts.images.insert(r, img);
    }
    for (r, v) in obj("volumes") {
        let vol = (!v.is_null()).then(|| VolumeFact {
            name: r.clone(),
            driver: v["driver"].as_str().unwrap_or("local").to_owned(),
            options: str_pairs(v.get("options")),
        });
        facts.volumes.insert(r, vol);
    }
    facts
}

/// Every key of `want` is in `got` with a matching value; arrays match element-wise.
fn contains(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| g.get(k).is_some_and(|gv| contains(gv, wv))),
        (Value::Array(g), Value::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| contains(a, b))
        }
        _ => got == want,
    }
}

fn build_request(case: &Value, ws: &Ws) -> Result<Request, policy::Denial> {
    let method = case["method"].as_str().unwrap_or("POST");
    let full = case["path"].as_str().expect("path");
    let (path, q) = full
        .split_once('?')
        .map_or((full, None), |(p, q)| (p, Some(q)));
    let route = route::classify(method, &CanonicalPath::parse(path).expect("canonical path"));
    let raw = match (case.get("body_raw"), case.get("body")) {
        (Some(Value::String(s)), _) => subst(s, ws),
        (_, Some(b)) => subst(&b.to_string(), ws),
        _ => String::new(),
    };
    let body = if raw.trim().is_empty() {
        None
    } else {
        Some(json::parse(raw.as_bytes())?)
    };
    let query = Query::parse(q).expect("query");
    Ok(Request {
        method: method.into(),
        route,
        query,
        body,
        has_body: !raw.is_empty(),
    })
}

fn run_case(case: &Value, pol: &Policy) -> Result<(), String> {
    let ws = layout(case.get("fs"));
    let empty = Value::Object(Default::default());
    let facts_spec = subst_value(case.get("facts").unwrap_or(&empty), &ws);
    let mut facts = case_facts(&facts_spec, &ws);
    let verdict = match build_request(case, &ws) {
        Err(d) => Verdict::Deny(d),
        Ok(req) => match policy::needs(&req, pol) {
            Err(d) => Verdict::Deny(d),
            Ok(qs) => {
                // `no_gather`: leave host paths unresolved, to show that a missing fact refuses.
                if case.get("no_gather") != Some(&Value::Bool(true)) {
                    gather_host_paths(&qs, &ws, &mut facts);
                }
                let mut qs = qs;
                qs.extend(policy::needs_more(&req, &facts));
                check_facts_requested(&qs, &facts)?;
                policy::decide(&req, &facts, pol)
            }
        },
    };
    judge(case, &verdict, &ws)
}

fn gather_host_paths(qs: &[FactQuery], ws: &Ws, facts: &mut Facts) {
    let sockets = [facts.env.daemon_sockets.clone(), vec![PROXY.to_owned()]].concat();
    for q in qs {
        if let FactQuery::HostPath(p) = q {
            let fact = facts
                .host_paths
                .entry(p.clone())
                .or_insert_with(|| dockwarden::hostfs::resolve(Path::new(&ws.ws), p, &sockets));
            // The proxy pins every source it resolves inside (`hostfs::pins`); `/pins<path>`
            // stands in for the pin here.
            if matches!(fact, HostPathFact::Inside { .. }) {
                facts.pins.insert(p.clone(), format!("/pins{p}"));
            }
        }
    }
}

/// Facts the case supplies must be ones the policy asks for; otherwise production would never
/// gather them and the case would prove nothing.
fn check_facts_requested(qs: &[FactQuery], f: &Facts) -> Result<(), String> {
    let asked = |q: FactQuery| qs.contains(&q);
    let stray: Vec<String> = f
        .containers
        .keys()
        .filter(|k| !asked(FactQuery::Container((*k).clone())))
        .chain(
            f.images
                .keys()
                .filter(|k| !asked(FactQuery::Image((*k).clone()))),
        )
        .chain(
            f.volumes
                .keys()
                .filter(|k| !asked(FactQuery::Volume((*k).clone()))),
        )
        .chain(
            f.host_paths
                .keys()
                .filter(|k| !asked(FactQuery::HostPath((*k).clone()))),
        )
        .chain(
            f.networks
                .keys()
                .filter(|k| !asked(FactQuery::Network((*k).clone()))),
        )
        .chain(
            f.execs
                .keys()
                .filter(|k| !asked(FactQuery::Exec((*k).clone()))),
        )
        .cloned()
        .collect();
    if f.swarm_state.is_some() && !asked(FactQuery::SwarmState) {
        return Err(format!(
            "swarm state supplied but never requested (needs: {qs:?})"
        ));
    }
    if f.host_routes.is_some() && !asked(FactQuery::HostRoutes) {
        return Err(format!(
            "host routes supplied but never requested (needs: {qs:?})"
        ));
    }
    if stray.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "facts supplied but never requested: {stray:?} (needs: {qs:?})"
        ))
    }
}

fn judge(case: &Value, verdict: &Verdict, ws: &Ws) -> Result<(), String> {
    let expect = case["expect"].as_str().expect("expect");
    let rules: Vec<&str> = case["rules"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match (expect, verdict) {
        ("deny", Verdict::Deny(d)) => {
            if rules != [d.rule] {
                return Err(format!(
                    "denied by `{}` ({}), expected {rules:?}",
                    d.rule, d.message
                ));
            }
            let msg = d.client_message();
            if !msg.contains(&format!("(rule {})", d.rule))
                || sentence_case(&d.message)
                || d.message.ends_with('.')
            {
                return Err(format!("badly formed message: {msg}"));
            }
            // A refusal names one rule: no second rule id inside the message.
            if dockwarden::policy::catalogue::all().iter().any(|r| {
                d.message.contains(&format!("`{}`", r.id))
                    || d.message.contains(&format!("({})", r.id))
            }) {
                return Err(format!("message names a second rule: {msg}"));
            }
            Ok(())
        }
        ("allow" | "rewrite", Verdict::Allow(p)) => {
            let ids = verdict.rule_ids();
            let rewrites: Vec<&str> = p.rewrites().iter().map(|r| r.rule).collect();
            for r in &rules {
                let present = if expect == "rewrite" {
                    rewrites.contains(r)
                } else {
                    ids.contains(r)
                };
                if !present {
                    return Err(format!("rule `{r}` missing from {ids:?}"));
                }
            }
            check_forwarded(case, p, ws)
        }
        (_, Verdict::Deny(d)) => Err(format!(
            "expected {expect}, denied by `{}`: {}",
            d.rule, d.message
        )),
        (_, Verdict::Allow(p)) => Err(format!(
            "expected {expect}, allowed with rewrites {:?}",
            p.rewrites()
        )),
    }
}

/// `Privileged ...` (not `API ...`): messages are lowercase.
fn sentence_case(m: &str) -> bool {
    let mut c = m.chars();
    matches!((c.next(), c.next()), (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase())
}

fn check_forwarded(case: &Value, p: &policy::Permitted, ws: &Ws) -> Result<(), String> {
    if let Some(want) = case.get("forwarded") {
        let want = subst_value(want, ws);
        let got: Value = p
            .body()
            .map(|b| serde_json::from_slice(&b.to_bytes()).expect("json"))
            .unwrap_or(Value::Null);
        if !contains(&got, &want) {
            return Err(format!(
                "forwarded body\n  {got}\ndoes not contain\n  {want}"
            ));
        }
        if case.get("no_extra_hosts") == Some(&Value::Bool(true))
            && !got["HostConfig"]["ExtraHosts"].is_null()
        {
            return Err(format!("forwarded body has ExtraHosts: {got}"));
        }
    }
    if let Some(want) = case.get("forwarded_path").and_then(Value::as_str) {
        let full = case["path"].as_str().expect("path");
        let path = full.split_once('?').map_or(full, |(p, _)| p);
        let canonical = CanonicalPath::parse(path).expect("canonical path");
        let got = p.pinned_path(&canonical).unwrap_or_else(|| path.to_owned());
        if got != want {
            return Err(format!("forwarded path is `{got}`, expected `{want}`"));
        }
    }
    if let Some(want) = case.get("forwarded_query").and_then(Value::as_object) {
        for (k, v) in want {
            let got = p.query().and_then(|q| q.get(k));
            if got != v.as_str() {
                return Err(format!("forwarded query `{k}` is {got:?}, expected {v}"));
            }
        }
    }
    if let Some(pins) = case.get("pins").and_then(Value::as_array) {
        let want: Vec<String> = pins
            .iter()
            .filter_map(Value::as_str)
            .map(|s| subst(s, ws))
            .collect();
        let got: Vec<String> = p
            .effects()
            .iter()
            .map(|Effect::PinBindSource { host_path }| host_path.clone())
            .collect();
        if got != want {
            return Err(format!("pinned {got:?}, expected {want:?}"));
        }
    }
    Ok(())
}

#[test]
fn policy_cases() {
    let pol = Policy::default_policy();
    // `"profile": "private-daemon"` runs a case under that profile.
    let private_text = policy::config::DEFAULT_POLICY
        .replace("profile = \"default\"", "profile = \"private-daemon\"");
    let private = Policy::from_toml(&private_text).expect("private-daemon policy");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policy_cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("cases dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let (mut n, mut failures) = (0, BTreeMap::new());
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
    {
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(f).expect("read"))
            .expect("case file parses");
        for case in &cases {
            n += 1;
            let name = format!(
                "{}: {}",
                f.file_name().and_then(|s| s.to_str()).unwrap_or("?"),
                case["description"].as_str().unwrap_or("?")
            );
            let p = if case["profile"] == "private-daemon" {
                &private
            } else {
                &pol
            };
            if let Err(e) = run_case(case, p) {
                failures.insert(name, e);
            }
        }
    }
    for (name, e) in &failures {
        eprintln!("FAIL {name}\n     {e}");
    }
    assert!(
        failures.is_empty(),
        "{} of {n} policy cases failed",
        failures.len()
    );
    assert!(n > 50, "only {n} cases found");
}

/// The same create with its `HostConfig` settings at the top level, as engines before 27 read
/// them: with no `HostConfig` (`with_null: false`) or with `"HostConfig": null`. `None` when
/// the case has no `HostConfig` object to move, or a top-level key would collide.
fn top_level_variant(case: &Value, with_null: bool) -> Option<Value> {
    if !case["path"].as_str()?.ends_with("/containers/create") || case.get("body_raw").is_some() {
        return None;
    }
    // Cases about the top-level form itself (a top-level setting next to `HostConfig`).
    if case["rules"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r == "container.legacy_hostconfig"))
    {
        return None;
    }
    let body = case.get("body")?.as_object()?;
    let hc = body
        .get("HostConfig")?
        .as_object()
        .filter(|hc| !hc.is_empty())?;
    let mut top: serde_json::Map<String, Value> = body
        .iter()
        .filter(|(k, _)| *k != "HostConfig")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in hc {
        if top.keys().any(|t| t.eq_ignore_ascii_case(k)) {
            return None;
        }
        top.insert(k.clone(), v.clone());
    }
    if with_null {
        top.insert("HostConfig".into(), Value::Null);
    }
    let mut out = case.clone();
    out["body"] = Value::Object(top);
    Some(out)
}

/// Issue 12, item 1: every rule family judges the one effective configuration. Each container
/// create case is run again with its `HostConfig` settings moved to the top level (no
/// `HostConfig`, then `"HostConfig": null`), and must get the same verdict from the same rule
/// and ask for the same facts (a family that read only `HostConfig` would ask for none).
#[test]
fn top_level_host_settings_are_judged_like_host_config() {
    let pol = Policy::default_policy();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policy_cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("cases dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let (mut n, mut failures) = (0, BTreeMap::new());
    let mut families = std::collections::BTreeSet::new();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
    {
        let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(f).expect("read"))
            .expect("case file parses");
        let file = f
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_owned();
        for case in &cases {
            for with_null in [false, true] {
                let Some(moved) = top_level_variant(case, with_null) else {
                    continue;
                };
                n += 1;
                families.insert(file.clone());
                let how = if with_null {
                    "top level, HostConfig null"
                } else {
                    "top level, no HostConfig"
                };
                let name = format!(
                    "{file}: {} ({how})",
                    case["description"].as_str().unwrap_or("?")
                );
                if let Err(e) = run_case(&moved, &pol) {
                    failures.insert(name, e);
                }
            }
        }
    }
    for (name, e) in &failures {
        eprintln!("FAIL {name}\n     {e}");
    }
    eprintln!("{n} top-level variants over the rule families {families:?}");
    assert!(
        failures.is_empty(),
        "{} of {n} top-level variants judged differently",
        failures.len()
    );
    for family in [
        "hosts.json",
        "limits.json",
        "mounts.json",
        "namespaces.json",
        "network.json",
        "ports.json",
        "privilege.json",
        "security.json",
    ] {
        assert!(
            families.contains(family),
            "no create case in {family} has a HostConfig to move"
        );
    }
}
