//! One file per lifecycle verb; each is guard → act → persist atomically → typed error.

mod connect;
pub(crate) mod create;
mod delete;
mod exec;
mod idempotent;
mod files;
mod kill;
mod list;
mod reprovision;
mod restart;
pub(crate) mod resume;
mod run_script;
mod snapshot;

pub use files::{FileOp, FileOut};

#[cfg(test)]
mod tests;
