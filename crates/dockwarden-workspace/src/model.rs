//! Plain data carried between the store, the verbs and the API (all serde types).
//!
//! INVARIANT: the model is a leaf. It and its parts (`model_runtime`, `model_resources`,
//! `status`) import nothing else of the workspace service; the services re-export what they
//! need from here. `tests::the_model_is_a_leaf` checks it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model_resources::{DiskEvent, ResourceRequest};
use crate::model_runtime::{RuntimeKind, Selection};
use crate::status::Status;

/// Default idle timeout, as in the sandbox SDK we follow.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 3600;

/// Time a workspace stays suspended before it is archived (stopped with a snapshot).
pub const DEFAULT_ARCHIVE_AFTER_SECS: u64 = 3600;

fn default_archive_after() -> u64 {
    DEFAULT_ARCHIVE_AFTER_SECS
}

/// A workspace as stored. Secrets are kept apart and never serialized back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workspace {
    pub id: String,
    pub status: Status,
    pub uid: u32,
    pub created_at_ms: u64,
    pub metadata: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    /// Names only; the values stay in the store.
    pub secret_names: Vec<String>,
    pub repo: Option<String>,
    pub revision: Option<String>,
    pub from_snapshot: Option<String>,
    pub idle_timeout_secs: u64,
    pub latest_snapshot: Option<String>,
    pub setup: Option<SetupOutcome>,
    pub last_recovery: Option<RecoveryReport>,
    /// The runtime chosen for this workspace and why (absent in records made before
    /// runtimes were selectable: those are `standard`).
    #[serde(default = "crate::model_runtime::standard_selection")]
    pub runtime: Selection,
    /// `DOCKER_HOST` of the workspace's commands (docker-compose runtime only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker_host: Option<String>,
    /// The last stop (kill or idle) and the snapshot it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<StopRecord>,
    /// Commands cut off when the service ended (SIGTERM or a crash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interruption>,
    /// Longest time the workspace may stay live (from its create or its last connect) before
    /// it is stopped with the reason `max_runtime`; `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_secs: Option<u64>,
    /// When it last became live (create, connect); `None` while stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_since_ms: Option<u64>,
    /// Seconds from suspension (idle, `suspend`) to archive (a stop with a snapshot). `0`:
    /// idle archives at once, without suspending.
    #[serde(default = "default_archive_after")]
    pub archive_after_secs: u64,
    /// When it was suspended; `None` unless `suspended`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_at_ms: Option<u64>,
}

impl Workspace {
    /// True when every pair of `filter` is in this workspace's metadata.
    pub fn matches(&self, filter: &BTreeMap<String, String>) -> bool {
        filter.iter().all(|(k, v)| self.metadata.get(k) == Some(v))
    }
}

/// What the caller asks `create` for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CreateRequest {
    pub id: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    pub repo: Option<String>,
    pub revision: Option<String>,
    pub from: Option<String>,
    /// With `from`, copy the parent workspace's metadata under the caller's.
    pub inherit_parent_metadata: bool,
    pub idle_timeout_secs: Option<u64>,
    /// Longest time the workspace stays live before it is stopped (`max_runtime`); wins over
    /// the repository's settings and `serve --max-runtime`.
    pub max_runtime_secs: Option<u64>,
    /// Seconds from suspension to archive (`0`: idle archives without suspending); wins
    /// over the repository's settings and `serve --archive-after`.
    pub archive_after_secs: Option<u64>,
    /// Time limit for the setup script.
    pub setup_timeout_ms: Option<u64>,
    /// `standard` or `docker-compose`; wins over the repository's settings and evidence.
    pub runtime: Option<RuntimeKind>,
    /// Reservation, burst limit, disk and the workspace layer's bounds (docs/resources.md).
    pub resources: Option<ResourceRequest>,
}

/// The outcome of the settings file's setup script.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetupOutcome {
    /// False when the repository has no setup script.
    pub ran: bool,
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    /// Set when setup failed on a full disk: the growth and the one retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskEvent>,
    /// What to do about the failure, when the service can tell (`hints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The answer to `create`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Created {
    pub workspace: Workspace,
    /// False when the id already existed and that workspace is returned.
    pub created: bool,
    /// What the caller should know (a fork's daemon starts empty, for example).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A recorded, complete snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotInfo {
    pub id: String,
    pub workspace_id: String,
    pub created_at_ms: u64,
    pub files: u64,
    pub bytes: u64,
    /// Bytes that were new to the blob store.
    pub new_bytes: u64,
    /// Files read and hashed; the others were recognised by their stat data (or, for a
    /// fork's baseline, taken from the parent's manifest).
    #[serde(default)]
    pub hashed: u64,
    /// The snapshot keeps a whole-image clone of the worktree (forks from it clone it).
    #[serde(default)]
    pub image_clone: bool,
    pub reason: String,
    /// Entries that could not be captured (for example non-UTF-8 names), never silently.
    pub skipped: Vec<String>,
    /// Entries that vanished between listing and reading (left out).
    #[serde(default)]
    pub vanished: u64,
    /// Files that changed while read and were read again.
    #[serde(default)]
    pub changed_while_read: u64,
}

/// What an automatic or explicit restore did, and what it could not keep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub at_ms: u64,
    pub reason: String,
    pub restored_from: Option<String>,
    pub snapshot_created_at_ms: Option<u64>,
    /// Paths whose newer content in the damaged worktree is not in the snapshot.
    pub unrecovered: Vec<String>,
    /// Where the damaged worktree was moved, if anything of it remained.
    pub preserved_at: Option<String>,
    pub note: String,
}

impl RecoveryReport {
    /// A part of the runtime was restarted, now: no files were restored and none lost.
    pub fn restarted(reason: String, note: String) -> Self {
        RecoveryReport {
            at_ms: now_ms(),
            reason,
            restored_from: None,
            snapshot_created_at_ms: None,
            unrecovered: Vec::new(),
            preserved_at: None,
            note,
        }
    }
}

/// The last stop of a workspace, shown by `info`: by `kill` or by the idle timeout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StopRecord {
    pub at_ms: u64,
    /// `kill`, `idle`, ...
    pub reason: String,
    /// The snapshot taken at the stop, if one could be written.
    pub snapshot_id: Option<String>,
    /// Why no snapshot was taken (a full disk, a damaged worktree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_error: Option<String>,
}

/// Commands of a workspace that the service did not see to their end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interruption {
    pub at_ms: u64,
    /// `service stopped (SIGTERM)`, `service restarted after a crash`.
    pub reason: String,
    /// Processes found and stopped.
    pub processes: u32,
    pub note: String,
}

/// An `exec` request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecRequest {
    pub cmd: String,
    pub timeout_ms: Option<u64>,
    pub env: BTreeMap<String, String>,
}

/// An `exec` result: a non-zero exit is a result, not an error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Set when the command failed on a full disk: whether it grew (never replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskEvent>,
    /// What to do about the failure, when the service can tell (`hints`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Answer of `suspend`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Suspended {
    pub workspace: Workspace,
    /// The snapshot taken at suspension, so a crash while suspended loses nothing.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// Why no snapshot was taken; the workspace was suspended all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_error: Option<String>,
}

/// What `resume` did: the workspace, and how long the thaw itself took (0 when it was not
/// suspended).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Thawed {
    pub workspace: Workspace,
    pub thawed: bool,
    pub thaw_us: u64,
}

/// Answer of `kill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Killed {
    pub workspace: Workspace,
    pub snapshot: Option<SnapshotInfo>,
    /// The id of `snapshot`, or null when none could be taken.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// Why no snapshot was taken; the processes were stopped all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_error: Option<String>,
}

/// Answer of `connect`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Connected {
    pub workspace: Workspace,
    pub recovery: Option<RecoveryReport>,
    /// What did not come back by itself (containers and previews of a docker runtime).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Answer of `restart`: always disruptive.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restarted {
    pub workspace: Workspace,
    pub disruptive: bool,
    /// Processes, containers, daemon, proxy: what was stopped and started again.
    pub stopped: Vec<String>,
    pub processes: u32,
    pub notes: Vec<String>,
}

/// A `reprovision` request: a runtime, or a repository-local script read for evidence.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReprovisionRequest {
    pub runtime: Option<RuntimeKind>,
    /// Path, relative to the worktree, of a script read by the evidence rules (never run).
    pub inspect_script: Option<String>,
    pub setup_timeout_ms: Option<u64>,
}

/// Answer of `reprovision`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reprovisioned {
    pub workspace: Workspace,
    /// The runtime before.
    pub previous: Selection,
    pub disruptive: bool,
    pub stopped: Vec<String>,
    pub notes: Vec<String>,
}

/// One row of `list`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ListEntry {
    pub id: String,
    pub status: Status,
    pub live: bool,
    pub metadata: BTreeMap<String, String>,
    pub latest_snapshot: Option<String>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A random lowercase hex string of `bytes * 2` characters.
pub fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if filled.is_err() {
        // Fall back to time and pid; ids need uniqueness, not secrecy.
        let seed = now_ms() ^ u64::from(std::process::id()).rotate_left(32);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8 ^ (i as u8);
        }
    }
    crate::hex::encode(&buf)
}

/// Checks a caller-chosen id: 1–64 of `[A-Za-z0-9._-]`, not starting with `.` or `-`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && !id.starts_with(['.', '-'])
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    /// The model's files. `status` is part of it: the lifecycle states and their guards; so is
    /// `hex`, the leaf encoder its ids use.
    const MODEL_FILES: [(&str, &str); 5] = [
        ("model.rs", include_str!("model.rs")),
        ("model_runtime.rs", include_str!("model_runtime.rs")),
        ("model_resources.rs", include_str!("model_resources.rs")),
        ("status.rs", include_str!("status.rs")),
        ("hex.rs", include_str!("hex.rs")),
    ];

    /// The modules a model file may name.
    const MODEL_MODULES: [&str; 5] = ["model", "model_runtime", "model_resources", "status", "hex"];

    /// What `code` names of the crate outside the model: `crate::` paths (with or without
    /// the `workspace::` level, which the crate split removes) and any `super::`.
    fn outside(code: &str) -> Vec<String> {
        let mut found = Vec::new();
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            for (at, _) in line.match_indices("crate::") {
                let path = &line[at + "crate::".len()..];
                let path = path.strip_prefix("workspace::").unwrap_or(path);
                let module: String = path
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !MODEL_MODULES.contains(&module.as_str()) {
                    found.push(line.trim().to_string());
                }
            }
            if line.contains("super::") {
                found.push(line.trim().to_string());
            }
        }
        found
    }

    #[test]
    fn the_model_is_a_leaf() {
        for (name, text) in MODEL_FILES {
            // The tests may use anything; the model's own code may not.
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            assert_eq!(
                outside(code),
                Vec::<String>::new(),
                "{name} imports from outside the model (runtime, provision, events, resources, service, store, ...)"
            );
        }
    }

    #[test]
    fn the_leaf_check_sees_the_edges_it_forbids() {
        for bad in [
            "use crate::runtime::{RuntimeKind, Selection};",
            "#[serde(default = \"crate::provision::standard_selection\")]",
            "pub last_stop: Option<crate::events::StopRecord>,",
            "use crate::resources::DiskEvent;",
            "use crate::{model_runtime, store};",
            "use super::service::Service;",
        ] {
            assert_eq!(outside(bad).len(), 1, "{bad}");
        }
        assert!(outside("use crate::model_runtime::Selection;").is_empty());
        assert!(outside("use crate::status::Status; // crate::store").is_empty());
    }
}
