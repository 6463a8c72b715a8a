//! The bounded walk over a repository: which files are read, in which order, under which caps,
//! and the evidence each one gives.

use dockwarden_policy::path_clean::clean_within;
use std::collections::BTreeSet;

use serde_json::Value;

use super::manifests as m;
use super::shell::{self, Class};
use super::view::SKIP_DIRS;
use super::{Evidence, Limits, RepoView, RuntimeKind, SETTINGS_PATH};

/// At most this many evidence items are kept; one is enough to decide.
const MAX_EVIDENCE: usize = 32;

const COMPOSE_FILES: &[&str] = &[
    "compose.yaml",
    "compose.yml",
    "docker-compose.yaml",
    "docker-compose.yml",
];

/// What the walk found.
pub struct Found {
    pub evidence: Vec<Evidence>,
    /// `runtime` from `.dockwarden/settings.json`.
    pub setting: Option<RuntimeKind>,
    pub truncated: bool,
}

/// Which commands of a script count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// Lifecycle scripts: any use of the local daemon except builds.
    LocalDocker,
    /// package.json scripts and Makefile recipes: commands that run local containers.
    Containers,
}

impl Accept {
    fn takes(self, c: Class) -> bool {
        matches!(
            (self, c),
            (_, Class::Containers) | (Accept::LocalDocker, Class::Docker)
        )
    }
}

pub struct Inspector<'a> {
    view: &'a dyn RepoView,
    limits: &'a Limits,
    files: BTreeSet<String>,
    files_read: usize,
    bytes_read: usize,
    truncated: bool,
    evidence: Vec<Evidence>,
    followed: BTreeSet<String>,
}

/// Directory levels above a file (`a/b/package.json` is 2).
fn depth(path: &str) -> usize {
    path.matches('/').count()
}

impl<'a> Inspector<'a> {
    pub fn new(view: &'a dyn RepoView, limits: &'a Limits) -> Self {
        Inspector {
            view,
            limits,
            files: BTreeSet::new(),
            files_read: 0,
            bytes_read: 0,
            truncated: false,
            evidence: Vec::new(),
            followed: BTreeSet::new(),
        }
    }

    pub fn run(mut self, extra_script: Option<(&str, &[u8])>) -> Found {
        // Nested searches look `max_depth` directories down, at `supabase/config.toml` there.
        match self
            .view
            .list(self.limits.max_depth + 2, self.limits.max_entries)
        {
            Ok(l) => {
                self.truncated |= l.truncated;
                let hidden =
                    |p: &String| p.split('/').rev().skip(1).any(|d| SKIP_DIRS.contains(&d));
                self.files = l.files.into_iter().filter(|p| !hidden(p)).collect();
            }
            Err(_) => self.truncated = true,
        }
        let setting = self.settings();
        if let Some((path, data)) = extra_script {
            let cap = self.limits.max_file_bytes.min(data.len());
            self.truncated |= cap < data.len();
            self.followed.insert(clean_within(path).unwrap_or_default());
            let text = String::from_utf8_lossy(&data[..cap]).into_owned();
            self.script(path, None, &text, Accept::LocalDocker, 0);
        }
        self.compose_files();
        self.markers();
        self.manifests();
        Found {
            evidence: self.evidence,
            setting,
            truncated: self.truncated,
        }
    }

    fn add(&mut self, file: &str, reason: String) {
        let e = Evidence {
            file: file.to_string(),
            reason,
        };
        if self.evidence.len() < MAX_EVIDENCE && !self.evidence.contains(&e) {
            self.evidence.push(e);
        }
    }

    /// Reads a listed file within the caps; a cut file loses its last, partial line.
    fn read(&mut self, path: &str) -> Option<String> {
        if !self.files.contains(path) {
            return None;
        }
        let left = self.limits.max_total_bytes.saturating_sub(self.bytes_read);
        if self.files_read >= self.limits.max_files || left == 0 {
            self.truncated = true;
            return None;
        }
        match self.view.read(path, self.limits.max_file_bytes.min(left)) {
            Ok(Some(blob)) => {
                self.files_read += 1;
                self.bytes_read += blob.data.len();
                let mut data = blob.data;
                if blob.truncated {
                    self.truncated = true;
                    data.truncate(data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1));
                }
                Some(String::from_utf8_lossy(&data).into_owned())
            }
            Ok(None) => None,
            Err(_) => {
                self.truncated = true;
                None
            }
        }
    }

    /// `.dockwarden/settings.json`: its `runtime`, and its setup, run and archive scripts.
    fn settings(&mut self) -> Option<RuntimeKind> {
        let text = self.read(SETTINGS_PATH)?;
        // Read leniently: validating the file is the settings module's job, at create.
        let v: Value = serde_json::from_str(&text).ok()?;
        for key in ["setup", "run", "archive"] {
            let script = match v.get("scripts").and_then(|s| s.get(key)) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => continue,
            };
            self.script(
                SETTINGS_PATH,
                Some(format!("`scripts.{key}`")),
                &script,
                Accept::LocalDocker,
                0,
            );
        }
        v.get("runtime")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
    }

    /// Scans script text; `label` names a script inside a file (else lines are cited), and
    /// repository-local scripts it runs are followed `max_depth` levels down.
    fn script(
        &mut self,
        file: &str,
        label: Option<String>,
        text: &str,
        accept: Accept,
        level: usize,
    ) {
        let scan = shell::scan(text);
        for hit in scan.hits.iter().filter(|h| accept.takes(h.class)) {
            let reason = match &label {
                Some(l) => format!("{l} runs `{}`", hit.command),
                None => format!("line {} runs `{}`", hit.line, hit.command),
            };
            self.add(file, reason);
        }
        let dir = file.rsplit_once('/').map_or("", |(d, _)| d);
        for r in scan.refs {
            if level >= self.limits.max_depth {
                self.truncated = true;
                break;
            }
            let joined = if dir.is_empty() {
                r.clone()
            } else {
                format!("{dir}/{r}")
            };
            let Some(path) = [clean_within(&r), clean_within(&joined)]
                .into_iter()
                .flatten()
                .find(|p| self.files.contains(p))
            else {
                continue;
            };
            if self.followed.insert(path.clone())
                && let Some(text) = self.read(&path)
            {
                self.script(&path, None, &text, accept, level + 1);
            }
        }
    }

    fn compose_files(&mut self) {
        for name in COMPOSE_FILES {
            if let Some(reason) = self.read(name).and_then(|t| m::compose_services(&t)) {
                self.add(name, reason.to_string());
            }
        }
        let devcontainers: Vec<String> = self
            .files
            .iter()
            .filter(|p| {
                p.as_str() == ".devcontainer.json"
                    || (p.starts_with(".devcontainer/")
                        && p.ends_with("/devcontainer.json")
                        && depth(p) <= 2)
            })
            .cloned()
            .collect();
        for p in devcontainers {
            if self.read(&p).is_some_and(|t| m::devcontainer_compose(&t)) {
                self.add(
                    &p,
                    "`dockerComposeFile`: a Docker Compose dev container".to_string(),
                );
            }
        }
    }

    /// Evidence by presence alone: Supabase CLI projects and LocalStack's `lstk` configuration.
    fn markers(&mut self) {
        let max = self.limits.max_depth;
        let found: Vec<(String, String)> = self
            .files
            .iter()
            .filter_map(|p| {
                if p == ".lstk/config.toml" {
                    return Some((p.clone(), "LocalStack configuration".to_string()));
                }
                let prefix = p.strip_suffix("supabase/config.toml")?;
                let nested = prefix.is_empty() || (prefix.ends_with('/') && depth(prefix) <= max);
                nested.then(|| (p.clone(), "Supabase CLI project".to_string()))
            })
            .collect();
        for (p, reason) in found {
            self.add(&p, reason);
        }
    }

    /// Package manifests and Makefiles at the root and nested, shallowest first.
    fn manifests(&mut self) {
        let mut todo: Vec<String> = self
            .files
            .iter()
            .filter(|p| depth(p) <= self.limits.max_depth && manifest_kind(p).is_some())
            .cloned()
            .collect();
        todo.sort_by(|a, b| (depth(a), a).cmp(&(depth(b), b)));
        for path in todo {
            let Some(text) = self.read(&path) else {
                continue;
            };
            match manifest_kind(&path) {
                Some(Kind::PackageJson) => self.package_json(&path, &text),
                Some(Kind::Pom) if m::pom_testcontainers(&text) => {
                    self.testcontainers(&path, "org.testcontainers")
                }
                Some(Kind::Gradle) if m::gradle_testcontainers(&text) => {
                    self.testcontainers(&path, "org.testcontainers")
                }
                Some(Kind::GoMod) if m::gomod_testcontainers(&text) => {
                    self.testcontainers(&path, "github.com/testcontainers/testcontainers-go")
                }
                Some(Kind::Requirements) => self.python(&path, m::requirements(&text)),
                Some(Kind::Pyproject) => {
                    self.python(&path, m::pyproject(&text).unwrap_or_default())
                }
                Some(Kind::Composer) if m::composer_sail(&text) => {
                    self.add(&path, "requires `laravel/sail` (Laravel Sail)".to_string())
                }
                Some(Kind::Makefile) => {
                    let recipes = m::makefile_recipes(&text);
                    self.script(&path, None, &recipes, Accept::Containers, 0);
                }
                _ => {}
            }
        }
    }

    fn testcontainers(&mut self, path: &str, dep: &str) {
        self.add(path, format!("depends on `{dep}` (Testcontainers)"));
    }

    fn package_json(&mut self, path: &str, text: &str) {
        let Some(pkg) = m::package_json(text) else {
            return;
        };
        for dep in &pkg.testcontainers {
            self.testcontainers(path, dep);
        }
        for (name, cmd) in &pkg.scripts {
            self.script(
                path,
                Some(format!("script `{name}`")),
                cmd,
                Accept::Containers,
                0,
            );
        }
    }

    fn python(&mut self, path: &str, names: Vec<String>) {
        for n in names {
            if m::is_testcontainers_py(&n) {
                self.testcontainers(path, &n);
            } else if n == "localstack" {
                self.add(path, "depends on `localstack` (LocalStack)".to_string());
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    PackageJson,
    Pom,
    Gradle,
    GoMod,
    Requirements,
    Pyproject,
    Composer,
    Makefile,
}

fn manifest_kind(path: &str) -> Option<Kind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    Some(match name {
        "package.json" => Kind::PackageJson,
        "pom.xml" => Kind::Pom,
        "build.gradle" | "build.gradle.kts" => Kind::Gradle,
        "libs.versions.toml" if path.ends_with("gradle/libs.versions.toml") => Kind::Gradle,
        "go.mod" => Kind::GoMod,
        "pyproject.toml" => Kind::Pyproject,
        "composer.json" => Kind::Composer,
        "Makefile" | "makefile" | "GNUmakefile" => Kind::Makefile,
        n if n.starts_with("requirements") && n.ends_with(".txt") => Kind::Requirements,
        _ => return None,
    })
}
