//! dockwarden: the binary's library half. The work lives in the workspace's crates, layered
//! one way (ARCHITECTURE.md):
//!
//! `dockwarden-policy` (pure) ← `dockwarden-sys` ← `dockwarden-proxy` ← `dockwarden-workspace`
//! ← `dockwarden` (this crate: the clap commands in `cli`).
//!
//! They are re-exported under the paths they had when this was one crate, so tests, benches
//! and the fuzz targets name `dockwarden::policy::..`, `dockwarden::workspace::..` as before.
#![deny(unsafe_code)]

pub use dockwarden_policy::{api, policy};
pub use dockwarden_proxy::{hostfs, hostnet, limits, proxy};
pub use dockwarden_sys as sys;
pub use dockwarden_workspace as workspace;

pub mod cli;
