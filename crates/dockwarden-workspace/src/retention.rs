//! Which snapshots may be pruned: pure, over a workspace's snapshots and what refers to them.
//!
//! Seed 004: `kill()` keeps the snapshots, so `connect` still works. So:
//! - a capture that stops the workspace (`kill`, `idle`) prunes nothing: a stopped workspace
//!   keeps every snapshot until it is deleted;
//! - only *automatic* snapshots (`baseline`, `idle`, `suspend`) are ever pruned, and only when a newer
//!   automatic one supersedes them: manual and kill snapshots are the user's;
//! - `keep` (`serve --keep-snapshots`) is how many superseded automatic snapshots stay;
//! - never a snapshot something refers to: the workspace's latest, its stop record's, the parent
//!   of a fork (a workspace whose `from_snapshot` names it, being created or not).

use std::collections::BTreeSet;

use crate::model::SnapshotInfo;

/// Snapshot reasons the service takes by itself.
const AUTOMATIC: &[&str] = &["baseline", "idle", "suspend"];

/// Reasons of the captures that stop a workspace: they prune nothing.
const STOPPING: &[&str] = &["kill", "idle", "max_runtime"];

/// Whether a capture with this reason may prune at all.
pub fn prunes_after(reason: &str) -> bool {
    !STOPPING.contains(&reason)
}

/// The ids to prune from `snaps` (newest first): automatic snapshots past the newest one and
/// past `keep` more, that nothing in `referenced` names.
pub fn prunable(snaps: &[SnapshotInfo], keep: usize, referenced: &BTreeSet<String>) -> Vec<String> {
    snaps
        .iter()
        .filter(|s| AUTOMATIC.contains(&s.reason.as_str()))
        // The newest automatic snapshot supersedes the rest; `keep` of those stay.
        .skip(1 + keep)
        .filter(|s| !referenced.contains(&s.id))
        .map(|s| s.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(id: &str, reason: &str) -> SnapshotInfo {
        SnapshotInfo {
            id: id.into(),
            workspace_id: "w".into(),
            created_at_ms: 0,
            files: 0,
            bytes: 0,
            new_bytes: 0,
            hashed: 0,
            image_clone: false,
            reason: reason.into(),
            skipped: Vec::new(),
            vanished: 0,
            changed_while_read: 0,
        }
    }

    fn ids(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_superseded_automatic_snapshots_past_keep_are_pruned() {
        // Newest first.
        let snaps = [
            snap("b5", "baseline"),
            snap("m4", "manual"),
            snap("b3", "baseline"),
            snap("k2", "kill"),
            snap("i1", "idle"),
            snap("b0", "baseline"),
        ];
        assert_eq!(prunable(&snaps, 0, &ids(&[])), ["b3", "i1", "b0"]);
        assert_eq!(prunable(&snaps, 1, &ids(&[])), ["i1", "b0"]);
        assert_eq!(prunable(&snaps, 5, &ids(&[])), Vec::<String>::new());
        // Referenced ones stay whatever their age.
        assert_eq!(prunable(&snaps, 0, &ids(&["b0", "b3"])), ["i1"]);
    }

    #[test]
    fn manual_and_kill_snapshots_are_never_pruned() {
        let mut snaps: Vec<SnapshotInfo> =
            (0..30).map(|i| snap(&format!("m{i}"), "manual")).collect();
        snaps.push(snap("k", "kill"));
        assert!(prunable(&snaps, 0, &ids(&[])).is_empty());
    }

    #[test]
    fn stopping_captures_prune_nothing() {
        for r in ["kill", "idle", "max_runtime"] {
            assert!(!prunes_after(r), "{r}");
        }
        for r in ["manual", "baseline"] {
            assert!(prunes_after(r), "{r}");
        }
    }
}
