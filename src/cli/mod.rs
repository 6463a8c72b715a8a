//! Command implementations behind the thin `main`.

pub mod budget;
pub mod logging;
pub mod proxy;
pub mod rules;
pub mod secrets;
pub mod workspace;
mod ws_progress;
