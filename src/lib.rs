//! dockwarden: a default-deny Docker Engine API policy proxy on a Unix socket.
//!
//! See ARCHITECTURE.md for the pipeline and the invariants each module keeps.
#![deny(unsafe_code)]

pub mod api;
pub mod cli;
pub mod hostfs;
pub mod hostnet;
pub mod limits;
pub mod policy;
pub mod proxy;
pub mod workspace;
