//! Command implementations behind the thin `main`: `proxy` (its arguments and start-up live in
//! dockwarden-proxy), `rules`, `secrets`, `serve` and `ws`.

pub use dockwarden_proxy::cli::{budget, logging, proxy};
pub mod rules;
pub mod secrets;
pub mod serve;
pub mod ws;
