//! dockwarden-proxy: the policy proxy around the pure core. It accepts Docker Engine API
//! requests on a Unix socket, gathers the facts the policy asks for, forwards what the policy
//! permits and audits every decision (`proxy`); pins and hands back host paths (`hostfs`);
//! computes the shared budget (`limits`); reads the host's routes (`hostnet`); and owns the
//! `dockwarden proxy` command's typed arguments and start-up (`cli`), so the workspace service
//! builds a child proxy's arguments from the same types. See ARCHITECTURE.md.
#![deny(unsafe_code)]

// The pure core under the paths this crate has always used (`crate::api`, `crate::policy`).
pub use dockwarden_policy::{api, policy};

pub mod cli;
pub mod hostfs;
pub mod hostnet;
pub mod limits;
pub mod proxy;
