//! Runtime selection: which runtime a repository needs, read from the repository itself at the
//! revision being provisioned, within fixed caps.
//!
//! [`select`] is pure over a [`RepoView`]: the view lists paths and reads bounded prefixes of
//! files (a directory tree, or a git revision through `git ls-tree`/`git cat-file --batch`);
//! everything else is string inspection here. An explicit setting wins, then decisive Docker
//! evidence, then the standard runtime. The rules, caps and non-evidence are in
//! `docs/runtime-selection.md`.

mod inspect;
mod manifests;
mod shell;
#[cfg(test)]
mod tests;
mod view;

pub use view::{Blob, DirView, GitView, Listing, RepoView};

// The selection's types are plain data of the workspace model (a leaf); re-exported here,
// where they are made.
pub use crate::model_runtime::{Evidence, RuntimeKind, Selection, Source, UnknownRuntime};

/// Caps on the inspection. Every read is bounded by them; nothing grows with the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Tree entries (files and directories) a listing may visit.
    pub max_entries: usize,
    /// Files read (existence checks are free: they come from the listing).
    pub max_files: usize,
    /// Bytes read of one file; a longer file is read as its prefix.
    pub max_file_bytes: usize,
    /// Bytes read over the whole inspection.
    pub max_total_bytes: usize,
    /// Directory levels below the root for nested searches (`a/b/c/supabase/config.toml`,
    /// `a/b/c/package.json`), and levels of scripts followed from a lifecycle script.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_entries: 100_000,
            max_files: 64,
            max_file_bytes: 256 * 1024,
            max_total_bytes: 2 * 1024 * 1024,
            max_depth: 3,
        }
    }
}

/// Where `runtime` may be set in the repository.
pub const SETTINGS_PATH: &str = ".dockwarden/settings.json";

/// Selects the runtime for the repository `view` shows; `explicit` is create's `runtime` field.
pub fn select(view: &dyn RepoView, explicit: Option<RuntimeKind>, limits: &Limits) -> Selection {
    select_with(view, explicit, limits, None)
}

/// [`select`] with default caps, also reading `extra_script` (path, contents) by the same rules
/// as a setup script: `reprovision --inspect-script`. The script is read, never run.
pub fn select_with_script(
    view: &dyn RepoView,
    explicit: Option<RuntimeKind>,
    extra_script: Option<(&str, &[u8])>,
) -> Selection {
    select_with(view, explicit, &Limits::default(), extra_script)
}

/// The general form of [`select`] and [`select_with_script`].
pub fn select_with(
    view: &dyn RepoView,
    explicit: Option<RuntimeKind>,
    limits: &Limits,
    extra_script: Option<(&str, &[u8])>,
) -> Selection {
    let found = inspect::Inspector::new(view, limits).run(extra_script);
    let (runtime, source, setting) = match (explicit, found.setting) {
        (Some(k), _) => (k, Source::Explicit, Some("create".to_string())),
        (None, Some(k)) => (k, Source::Explicit, Some(SETTINGS_PATH.to_string())),
        (None, None) if !found.evidence.is_empty() => {
            (RuntimeKind::DockerCompose, Source::Evidence, None)
        }
        (None, None) => (RuntimeKind::Standard, Source::Default, None),
    };
    Selection {
        runtime,
        source,
        evidence: found.evidence,
        setting,
        truncated: found.truncated,
    }
}
