//! dockwarden-sys: the one home of each Linux primitive that dockwarden's proxy and workspace
//! service share. Every module here is small, knows nothing of Docker, policy or workspaces,
//! and is the only copy of what it does: a second copy elsewhere in the tree is a defect.
//!
//! Lexical path cleaning is pure and the policy core needs it, so its one copy is
//! `dockwarden_policy::path_clean`, not here (the policy crate may not depend on libc).

pub mod beneath;
pub mod cgroupfs;
pub mod memory;
pub mod mountinfo;
pub mod peer;
pub mod poll;
