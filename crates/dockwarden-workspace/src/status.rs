//! The workspace lifecycle: creating → ready → running ↔ stopped → deleted, with guards.

use serde::{Deserialize, Serialize};

/// Where a workspace is in its lifecycle.
///
/// `Ready` means set up but nothing started yet; `Running` means the runtime has run or is
/// running commands; `Stopped` means killed or idle-stopped, with its snapshots kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Creating,
    Ready,
    Running,
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
            "stopped" => Some(Status::Stopped),
            "deleted" => Some(Status::Deleted),
            _ => None,
        }
    }

    /// Live workspaces can run commands without being started first.
    pub fn is_live(self) -> bool {
        matches!(self, Status::Ready | Status::Running)
    }

    pub fn can_exec(self) -> bool {
        self.is_live()
    }

    /// Reads work on stopped workspaces too, without starting them.
    pub fn can_read_files(self) -> bool {
        matches!(self, Status::Ready | Status::Running | Status::Stopped)
    }

    pub fn can_write_files(self) -> bool {
        self.is_live()
    }

    pub fn can_snapshot(self) -> bool {
        self.is_live()
    }

    /// Killing a stopped workspace is a no-op rather than an error.
    pub fn can_kill(self) -> bool {
        matches!(self, Status::Ready | Status::Running | Status::Stopped)
    }

    pub fn can_connect(self) -> bool {
        matches!(self, Status::Ready | Status::Running | Status::Stopped)
    }

    pub fn can_delete(self) -> bool {
        !matches!(self, Status::Deleted)
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

    #[test]
    fn names_round_trip() {
        for s in [
            Status::Creating,
            Status::Ready,
            Status::Running,
            Status::Stopped,
            Status::Deleted,
        ] {
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
    }
}
