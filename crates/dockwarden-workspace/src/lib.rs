//! The workspace lifecycle service.
//!
//! A store of workspaces, each a state machine (creating → ready → running ↔ stopped →
//! deleted) with a worktree, an unprivileged uid, snapshots in a content-addressed store,
//! and a runtime behind a trait. `api` serves it over HTTP on a Unix socket.
//!
//! `daemon::run` is the entry point (`dockwarden serve`); `client` is what `dockwarden ws`
//! talks through. It sits above `dockwarden-proxy` (the child proxy's typed arguments) and
//! `dockwarden-sys`, below the `dockwarden` binary. See ARCHITECTURE.md.

pub mod api;
pub mod client;
pub mod daemon;
pub mod error;
pub mod events;
mod fdnames;
pub mod files;
pub(crate) mod gitsafe;
pub mod heal;
pub mod heal_run_script;
pub mod hex;
pub mod hints;
mod idle;
pub mod lock;
pub mod model;
pub mod model_resources;
pub mod model_runtime;
pub mod preflight;
pub(crate) mod provision;
mod recovery;
pub mod reserve;
pub mod resources;
pub mod retention;
pub mod runtime;
pub mod sandbox;
pub mod secrets;
pub mod service;
pub mod settings;
pub mod snapshot;
pub mod status;
pub mod store;
mod supervise;
pub mod uidsweep;
pub mod verbs;
mod worktree;

pub use error::{WsError, WsResult};
pub use service::{Config, Service};
pub use status::Status;
