//! dockwarden: the binary's library half. The work lives in the workspace's crates, layered
//! one way (ARCHITECTURE.md):
//!
//! `dockwarden-policy` (pure) and `dockwarden-sys` (Linux primitives) are leaves;
//! `dockwarden-proxy` builds on both, `dockwarden-workspace` on all three, and `dockwarden`
//! (this crate: the clap commands in `cli`) on everything.
//!
//! They are re-exported under the paths they had when this was one crate, so tests and
//! benches name `dockwarden::policy::..`, `dockwarden::workspace::..` as before.
#![deny(unsafe_code)]

pub use dockwarden_policy::{api, policy};
pub use dockwarden_proxy::{hostfs, hostnet, limits, proxy};
pub use dockwarden_sys as sys;
pub use dockwarden_workspace as workspace;

pub mod cli;
