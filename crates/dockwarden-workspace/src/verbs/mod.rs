//! One file per lifecycle verb; each is guard → act → persist atomically → typed error.

mod approve;
mod connect;
pub(crate) mod create;
mod delete;
mod exec;
mod files;
mod idempotent;
mod image_clone;
mod kill;
mod list;
pub mod prologue;
mod reprovision;
mod resize;
mod resources;
mod restart;
pub(crate) mod resume;
mod run_script;
mod snapshot;
mod status;
mod suspend;

pub use files::{FileOp, FileOut};
pub use prologue::{OpGuard, RunGuard};
pub use resize::ResizeOutcome;

#[cfg(test)]
mod tests;
