//! The workspace lifecycle: creating → ready → running ↔ suspended, running ↔ stopped →
//! deleted, with guards.

use serde::{Deserialize, Serialize};

/// Where a workspace is in its lifecycle.
///
/// `Ready` means set up but nothing started yet; `Running` means the runtime has run or is
/// running commands; `Suspended` means its processes and containers are frozen in place
/// (idle, or `suspend`), thawed by the next verb; `Stopped` means killed or archived, with
/// its snapshots kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Ready,
    Running,
    Suspended,
    Stopped,
    Deleted,
}

impl Status {
    /// The name stored in the database and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Creating => "creating",
            Status::Ready => "ready",
            Status::Running => "running",
            Status::Suspended => "suspended",
            Status::Stopped => "stopped",
            Status::Deleted => "deleted",
        }
    }

    /// Parses a stored status name.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "creating" => Some(Status::Creating),
            "ready" => Some(Status::Ready),
            "running" => Some(Status::Running),
            "suspended" => Some(Status::Suspended),
            "stopped" => Some(Status::Stopped),
            "deleted" => Some(Status::Deleted),
            _ => None,
        }
    }

    /// Every status, in lifecycle order (for truth tables).
    pub const ALL: [Status; 6] = [
        Status::Creating,
        Status::Ready,
        Status::Running,
        Status::Suspended,
        Status::Stopped,
        Status::Deleted,
    ];

    /// Live workspaces can run commands without being started first.
    pub fn is_live(self) -> bool {
        matches!(self, Status::Ready | Status::Running)
    }

    /// Set up and not being created or deleted: its processes may be stopped or not.
    fn is_settled(self) -> bool {
        matches!(
            self,
            Status::Ready | Status::Running | Status::Suspended | Status::Stopped
        )
    }

    /// A live workspace is frozen in place; suspending a suspended one is a no-op.
    pub fn can_suspend(self) -> bool {
        self.is_live() || self == Status::Suspended
    }

    pub fn can_exec(self) -> bool {
        self.is_live()
    }

    /// Reads work on stopped workspaces too, without starting them.
    pub fn can_read_files(self) -> bool {
        self.is_settled()
    }

    pub fn can_write_files(self) -> bool {
        self.is_live()
    }

    pub fn can_snapshot(self) -> bool {
        self.is_live()
    }

    /// Killing a stopped workspace is a no-op rather than an error.
    pub fn can_kill(self) -> bool {
        self.is_settled()
    }

    pub fn can_connect(self) -> bool {
        self.is_settled()
    }

    /// Restarting needs something running; a stopped workspace is connected instead.
    pub fn can_restart(self) -> bool {
        self.is_live()
    }

    /// A stopped workspace is reprovisioned too: its runtime is replaced and it runs again.
    pub fn can_reprovision(self) -> bool {
        self.is_settled()
    }

    /// A stopped workspace keeps its cgroup and disk image, so it is resized as it is; a
    /// workspace being created is refused, its setup is still sizing it.
    pub fn can_resize(self) -> bool {
        self.is_settled()
    }

    pub fn can_delete(self) -> bool {
        !matches!(self, Status::Deleted)
    }
}

/// A verb that checks the workspace's status first: its name in messages, its guard, and
/// the hint a refusal carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Exec,
    ReadFiles,
    WriteFiles,
    Snapshot,
    Kill,
    Connect,
    Restart,
    Reprovision,
    Resize,
    Delete,
    Suspend,
}

impl Verb {
    pub const ALL: [Verb; 11] = [
        Verb::Exec,
        Verb::ReadFiles,
        Verb::WriteFiles,
        Verb::Snapshot,
        Verb::Kill,
        Verb::Connect,
        Verb::Restart,
        Verb::Reprovision,
        Verb::Resize,
        Verb::Delete,
        Verb::Suspend,
    ];

    /// As in ``workspace `w` is stopped; cannot {name}``.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Exec => "exec",
            Verb::ReadFiles => "read files",
            Verb::WriteFiles => "change files",
            Verb::Snapshot => "snapshot",
            Verb::Kill => "kill",
            Verb::Connect => "connect",
            Verb::Restart => "restart",
            Verb::Reprovision => "reprovision",
            Verb::Resize => "resize",
            Verb::Delete => "delete",
            Verb::Suspend => "suspend",
        }
    }

    /// The guard: whether a workspace of `status` may go through this verb.
    pub fn permits(self, status: Status) -> bool {
        match self {
            Verb::Exec => status.can_exec(),
            Verb::ReadFiles => status.can_read_files(),
            Verb::WriteFiles => status.can_write_files(),
            Verb::Snapshot => status.can_snapshot(),
            Verb::Kill => status.can_kill(),
            Verb::Connect => status.can_connect(),
            Verb::Restart => status.can_restart(),
            Verb::Reprovision => status.can_reprovision(),
            Verb::Resize => status.can_resize(),
            Verb::Delete => status.can_delete(),
            Verb::Suspend => status.can_suspend(),
        }
    }

    /// What to do about a refusal in `status` (`""` when nothing helps).
    pub fn hint(self, status: Status) -> &'static str {
        match self {
            Verb::Exec | Verb::WriteFiles | Verb::Snapshot | Verb::Suspend => not_live_hint(status),
            Verb::Restart => "; `connect` it instead",
            Verb::Resize => match status {
                Status::Creating => CREATING_HINT,
                _ => "",
            },
            Verb::ReadFiles | Verb::Kill | Verb::Connect | Verb::Reprovision | Verb::Delete => "",
        }
    }

    /// Whether the prologue thaws a suspended workspace before this verb (every verb but
    /// `suspend` itself: a verb on a suspended workspace wakes it).
    pub fn thaws_first(self) -> bool {
        self != Verb::Suspend
    }
}

const CREATING_HINT: &str = "; its setup is still running: wait for `ready` (`ws info` shows it)";

/// Why a call cannot run in a workspace of `status`, and what to do about it.
pub fn not_live_hint(status: Status) -> &'static str {
    match status {
        Status::Creating => CREATING_HINT,
        Status::Stopped => "; `connect` it first",
        _ => "",
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopped_workspaces_are_readable_but_not_writable() {
        assert!(Status::Stopped.can_read_files());
        assert!(!Status::Stopped.can_write_files());
        assert!(!Status::Stopped.can_exec());
        assert!(!Status::Creating.can_read_files());
    }

    /// Every guard over every status. A suspended workspace is thawed by the prologue
    /// before the guard runs (`Verb::thaws_first`), so only `suspend` ever sees `Suspended`
    /// in practice; the guards still say what a frozen workspace could take as it is.
    #[test]
    fn every_guard_over_every_status() {
        use Status::*;
        let table: [(Verb, &[Status]); 11] = [
            (Verb::Exec, &[Ready, Running]),
            (Verb::ReadFiles, &[Ready, Running, Suspended, Stopped]),
            (Verb::WriteFiles, &[Ready, Running]),
            (Verb::Snapshot, &[Ready, Running]),
            (Verb::Kill, &[Ready, Running, Suspended, Stopped]),
            (Verb::Connect, &[Ready, Running, Suspended, Stopped]),
            (Verb::Restart, &[Ready, Running]),
            (Verb::Reprovision, &[Ready, Running, Suspended, Stopped]),
            (Verb::Resize, &[Ready, Running, Suspended, Stopped]),
            (
                Verb::Delete,
                &[Creating, Ready, Running, Suspended, Stopped],
            ),
            (Verb::Suspend, &[Ready, Running, Suspended]),
        ];
        assert_eq!(
            table.map(|(v, _)| v),
            Verb::ALL,
            "the table covers every verb"
        );
        for (verb, allowed) in table {
            for s in Status::ALL {
                assert_eq!(
                    verb.permits(s),
                    allowed.contains(&s),
                    "{} in a {s} workspace",
                    verb.name()
                );
            }
        }
    }

    #[test]
    fn each_verb_is_guarded_by_its_own_status_method() {
        type Guard = fn(Status) -> bool;
        let methods: [(Verb, Guard); 11] = [
            (Verb::Exec, Status::can_exec),
            (Verb::ReadFiles, Status::can_read_files),
            (Verb::WriteFiles, Status::can_write_files),
            (Verb::Snapshot, Status::can_snapshot),
            (Verb::Kill, Status::can_kill),
            (Verb::Connect, Status::can_connect),
            (Verb::Restart, Status::can_restart),
            (Verb::Reprovision, Status::can_reprovision),
            (Verb::Resize, Status::can_resize),
            (Verb::Delete, Status::can_delete),
            (Verb::Suspend, Status::can_suspend),
        ];
        for (verb, can) in methods {
            for s in Status::ALL {
                assert_eq!(verb.permits(s), can(s), "{} in {s}", verb.name());
            }
        }
    }

    #[test]
    fn refusals_keep_their_hints() {
        assert_eq!(Verb::Exec.hint(Status::Stopped), "; `connect` it first");
        assert_eq!(Verb::Snapshot.hint(Status::Stopped), "; `connect` it first");
        assert_eq!(
            Verb::WriteFiles.hint(Status::Stopped),
            "; `connect` it first"
        );
        assert!(
            Verb::Exec
                .hint(Status::Creating)
                .contains("wait for `ready`")
        );
        assert!(
            Verb::Resize
                .hint(Status::Creating)
                .contains("wait for `ready`")
        );
        for s in Status::ALL {
            assert_eq!(Verb::Restart.hint(s), "; `connect` it instead");
            for v in [
                Verb::ReadFiles,
                Verb::Kill,
                Verb::Connect,
                Verb::Reprovision,
                Verb::Delete,
            ] {
                assert_eq!(v.hint(s), "", "{}", v.name());
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
    }
}
