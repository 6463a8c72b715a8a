//! Command implementations behind the thin `main`.

pub mod proxy;
pub mod rules;
