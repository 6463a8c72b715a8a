//! One file per lifecycle verb; each is guard → act → persist atomically → typed error.

mod connect;
pub(crate) mod create;
mod delete;
mod exec;
mod files;
mod kill;
mod list;
mod reprovision;
mod restart;
mod run_script;
mod snapshot;

pub use files::{FileOp, FileOut};

#[cfg(test)]
mod tests;
