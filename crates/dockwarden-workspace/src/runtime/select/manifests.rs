//! Reading the manifests that carry Docker evidence: compose files, package manifests,
//! devcontainer JSONC and Makefiles. Each reader takes a file's text and answers narrowly.

use regex::Regex;
use serde_json::Value;

/// Whether a compose file defines at least one service (or includes other compose files).
///
/// YAML is read line by line, not parsed: a top-level `services:` key (column 0) whose value is
/// a non-empty flow mapping, or whose next meaningful line is an indented mapping key. JSON
/// compose files are parsed. Anchors/aliases as the whole value, tags and multi-line flow
/// mappings are not understood, and count as no services.
pub fn compose_services(text: &str) -> Option<&'static str> {
    if text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .starts_with('{')
    {
        let v: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
        let non_empty = |k: &str| {
            v.get(k)
                .is_some_and(|s| s.as_object().is_some_and(|m| !m.is_empty()))
        };
        return non_empty("services").then_some("defines services");
    }
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        for (key, reason, item) in [
            ("services", "defines services", false),
            ("include", "includes compose files", true),
        ] {
            let Some(rest) = top_level_value(line, key) else {
                continue;
            };
            // `services: &anchor` then a block: the anchor is a name, not the value.
            let rest = match rest.strip_prefix('&') {
                Some(r) => r.split_once(' ').map(|(_, v)| v).unwrap_or("").trim(),
                None => rest,
            };
            if rest.starts_with('{') || rest.starts_with('[') {
                let inner = rest.trim_matches(|c| matches!(c, '{' | '}' | '[' | ']' | ' '));
                if !inner.is_empty() {
                    return Some(reason);
                }
                continue;
            }
            if !rest.is_empty() {
                continue;
            }
            if next_is_child(&lines[i + 1..], item) {
                return Some(reason);
            }
        }
    }
    None
}

/// The value after `key:` on a column-0 line, comment removed.
fn top_level_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let rest = [key.to_string(), format!("\"{key}\""), format!("'{key}'")]
        .iter()
        .find_map(|k| line.strip_prefix(k.as_str()).map(|r| r.trim_start()))?
        .strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    Some(rest.split(" #").next().unwrap_or("").trim())
}

/// Whether the next non-blank, non-comment line is indented and a mapping key (or, for
/// `include`, a sequence item).
fn next_is_child(lines: &[&str], item: bool) -> bool {
    let Some(next) = lines.iter().find(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#')
    }) else {
        return false;
    };
    let t = next.trim();
    if item && t.starts_with('-') && next.starts_with('-') {
        return true;
    }
    if !next.starts_with(' ') {
        return false;
    }
    if item {
        return t.starts_with('-');
    }
    !t.starts_with('-') && t.contains(':')
}

/// A package.json: Testcontainers dependencies, and its scripts.
#[derive(Debug, Default)]
pub struct PackageJson {
    pub testcontainers: Vec<String>,
    pub scripts: Vec<(String, String)>,
}

pub fn package_json(text: &str) -> Option<PackageJson> {
    let v: Value = serde_json::from_str(text).ok()?;
    let mut out = PackageJson::default();
    for section in [
        "dependencies",
        "devDependencies",
        "optionalDependencies",
        "peerDependencies",
    ] {
        for name in v
            .get(section)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys())
        {
            if name == "testcontainers" || name.starts_with("@testcontainers/") {
                out.testcontainers.push(name.clone());
            }
        }
    }
    for (name, cmd) in v
        .get("scripts")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(cmd) = cmd.as_str() {
            out.scripts.push((name.clone(), cmd.to_string()));
        }
    }
    Some(out)
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// `org.testcontainers` as a Maven groupId, outside XML comments.
pub fn pom_testcontainers(text: &str) -> bool {
    let Some(comments) = re(r"(?s)<!--.*?-->") else {
        return false;
    };
    let text = comments.replace_all(text, "");
    re(r"<groupId>\s*org\.testcontainers\s*</groupId>").is_some_and(|r| r.is_match(&text))
}

/// An `org.testcontainers` coordinate in a Gradle build script or version catalog, outside
/// `//` and `/* */` comments.
pub fn gradle_testcontainers(text: &str) -> bool {
    let Some(block) = re(r"(?s)/\*.*?\*/") else {
        return false;
    };
    let text = block.replace_all(text, "");
    let Some(dep) = re(
        r#"org\.testcontainers:|group\s*[:=]\s*["']org\.testcontainers["']|module\s*=\s*["']org\.testcontainers:"#,
    ) else {
        return false;
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|l| dep.is_match(l))
}

/// A `require` of `github.com/testcontainers/testcontainers-go` (or one of its modules).
pub fn gomod_testcontainers(text: &str) -> bool {
    let mut in_require = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        let target = if in_require {
            if line.starts_with(')') {
                in_require = false;
                continue;
            }
            line
        } else if let Some(rest) = line.strip_prefix("require") {
            let rest = rest.trim();
            if rest.starts_with('(') {
                in_require = true;
                continue;
            }
            rest
        } else {
            continue;
        };
        if target.starts_with("github.com/testcontainers/testcontainers-go") {
            return true;
        }
    }
    false
}

/// A Python distribution name normalised as PEP 503 does.
pub fn normalise(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The distribution name at the start of a PEP 508 requirement string.
pub fn requirement_name(req: &str) -> Option<String> {
    let req = req.trim();
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    (end > 0).then(|| normalise(&req[..end]))
}

/// Names required by a requirements file (options such as `-r` and `-e` are not followed).
pub fn requirements(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('-'))
        .filter_map(requirement_name)
        .collect()
}

/// Names of every dependency a pyproject.toml declares (PEP 621, PEP 735, Poetry, PDM, uv).
pub fn pyproject(text: &str) -> Option<Vec<String>> {
    let v: toml::Table = toml::from_str(text).ok()?;
    let v = toml::Value::Table(v);
    let mut out = Vec::new();
    let strings = |x: Option<&toml::Value>, out: &mut Vec<String>| {
        for s in x
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
        {
            out.extend(requirement_name(s));
        }
    };
    let lists = |x: Option<&toml::Value>, out: &mut Vec<String>| {
        for (_, l) in x.and_then(toml::Value::as_table).into_iter().flatten() {
            strings(Some(l), out);
        }
    };
    let keys = |x: Option<&toml::Value>, out: &mut Vec<String>| {
        out.extend(
            x.and_then(toml::Value::as_table)
                .into_iter()
                .flat_map(|t| t.keys())
                .map(|k| normalise(k)),
        );
    };
    let get = |path: &[&str]| path.iter().try_fold(&v, |cur, k| cur.get(k));
    strings(get(&["project", "dependencies"]), &mut out);
    lists(get(&["project", "optional-dependencies"]), &mut out);
    lists(get(&["dependency-groups"]), &mut out);
    lists(get(&["tool", "pdm", "dev-dependencies"]), &mut out);
    strings(get(&["tool", "uv", "dev-dependencies"]), &mut out);
    keys(get(&["tool", "poetry", "dependencies"]), &mut out);
    keys(get(&["tool", "poetry", "dev-dependencies"]), &mut out);
    for (_, g) in get(&["tool", "poetry", "group"])
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
    {
        keys(g.get("dependencies"), &mut out);
    }
    Some(out)
}

pub fn is_testcontainers_py(name: &str) -> bool {
    name == "testcontainers" || name.starts_with("testcontainers-")
}

/// `laravel/sail` in `require` or `require-dev`.
pub fn composer_sail(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    ["require", "require-dev"]
        .iter()
        .any(|s| v.get(s).and_then(|m| m.get("laravel/sail")).is_some())
}

/// A devcontainer.json (JSONC: comments and trailing commas) with a non-empty `dockerComposeFile`.
pub fn devcontainer_compose(text: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(&strip_jsonc(text)) else {
        return false;
    };
    match v.get("dockerComposeFile") {
        Some(Value::String(s)) => !s.trim().is_empty(),
        Some(Value::Array(a)) => a
            .iter()
            .any(|x| x.as_str().is_some_and(|s| !s.trim().is_empty())),
        _ => false,
    }
}

/// JSONC to JSON: drops `//` and `/* */` comments and trailing commas, outside strings.
pub fn strip_jsonc(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        match (c[i], c.get(i + 1)) {
            ('"', _) => {
                let start = i;
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i = (i + 1).min(c.len());
                out.extend(&c[start..i]);
                continue;
            }
            ('/', Some('/')) => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            ('/', Some('*')) => {
                i += 2;
                while i < c.len() && !(c[i] == '*' && c.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
                continue;
            }
            (',', _) => {
                let rest = c[i + 1..].iter().collect::<String>();
                let next = strip_jsonc_lead(&rest);
                if !(next.starts_with('}') || next.starts_with(']')) {
                    out.push(',');
                }
            }
            (ch, _) => out.push(ch),
        }
        i += 1;
    }
    out
}

/// What follows, once whitespace and comments are skipped (to see whether a comma trails).
fn strip_jsonc_lead(rest: &str) -> &str {
    let mut r = rest.trim_start();
    loop {
        if let Some(x) = r.strip_prefix("//") {
            r = x
                .split_once('\n')
                .map(|(_, t)| t)
                .unwrap_or("")
                .trim_start();
        } else if let Some(x) = r.strip_prefix("/*") {
            r = x
                .split_once("*/")
                .map(|(_, t)| t)
                .unwrap_or("")
                .trim_start();
        } else {
            return r;
        }
    }
}

/// A Makefile's recipe lines as shell text, other lines blank so line numbers stay, with simple
/// variables (`NAME = value`, `:=`, `?=`) expanded and `$$` unescaped.
pub fn makefile_recipes(text: &str) -> String {
    let Some(assign) =
        re(r"^(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(?::::?=|\?=|\+=|=)\s*(.*)$")
    else {
        return String::new();
    };
    let vars: Vec<(String, String)> = text
        .lines()
        .filter(|l| !l.starts_with('\t'))
        .filter_map(|l| assign.captures(l))
        .map(|c| {
            (
                c[1].to_string(),
                c[2].split(" #").next().unwrap_or("").trim().to_string(),
            )
        })
        .collect();
    let expand = |mut s: String| {
        for _ in 0..3 {
            for (k, v) in &vars {
                s = s
                    .replace(&format!("$({k})"), v)
                    .replace(&format!("${{{k}}}"), v);
            }
        }
        s.replace("$$", "$")
    };
    let mut out = Vec::new();
    for line in text.lines() {
        match line.strip_prefix('\t') {
            Some(recipe) => out.push(expand(
                recipe.trim_start_matches(['@', '-', '+']).to_string(),
            )),
            None => out.push(String::new()),
        }
    }
    out.join("\n")
}
