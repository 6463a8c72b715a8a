//! One file per lifecycle verb; each is guard → act → persist atomically → typed error.

mod connect;
mod create;
mod delete;
mod exec;
mod files;
mod kill;
mod list;
mod run_script;
mod snapshot;

pub use files::{FileOp, FileOut};

#[cfg(test)]
mod tests;
