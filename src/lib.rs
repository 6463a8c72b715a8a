//! dockwarden
#![forbid(unsafe_code)]

pub mod workspace;
pub mod cli {
    pub mod workspace;
}
