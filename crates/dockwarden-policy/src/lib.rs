//! dockwarden-policy: the pure core of dockwarden's proxy.
//!
//! [`api`] classifies and decodes Docker Engine API requests; [`policy`] decides them from the
//! decoded request and facts gathered beforehand. Nothing here does I/O, async work or
//! filesystem access: `dockwarden-proxy` gathers facts, forwards and audits. A leaf of the
//! cargo workspace's layering: it depends on no other dockwarden crate (`tests/layering.rs`).
//! See ARCHITECTURE.md.
#![forbid(unsafe_code)]

pub mod api;
pub mod path_clean;
pub mod policy;
