//! dockwarden: a default-deny Docker Engine API policy proxy on a Unix socket.
//!
//! See ARCHITECTURE.md for the pipeline and the invariants each module keeps.
#![deny(unsafe_code)]

// The pure core lives in the `dockwarden-policy` crate; re-exported under its old paths so
// `crate::api::..`, `crate::policy::..` and `dockwarden::policy::..` keep naming the same items.
pub use dockwarden_policy::{api, policy};

pub mod cli;
pub mod hostfs;
pub mod hostnet;
pub mod limits;
pub mod proxy;
pub mod workspace;
