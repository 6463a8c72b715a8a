//! Command implementations behind the thin `main`.

pub use dockwarden_proxy::cli::{budget, logging, proxy};
pub mod rules;
pub mod secrets;
pub mod workspace;
mod ws_progress;
