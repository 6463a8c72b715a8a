//! The files API: operations on paths relative to a worktree, never escaping it.

pub mod batch;
mod ops;
mod resolve;
mod symlink;
mod tree;

pub use ops::{FileInfo, FileKind, Files, MAX_IO_BYTES};
pub use resolve::clean_rel;

#[cfg(test)]
mod tests;
