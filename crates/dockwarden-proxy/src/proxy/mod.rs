//! The transport: accept on the Unix socket, classify, read what the policy needs, decide,
//! forward a [`crate::policy::Permitted`] request upstream, tunnel after a protocol switch.

pub mod admission;
pub mod archive;
pub mod audit;
pub mod body;
pub mod containers;
pub mod error;
pub mod events;
pub mod facts;
pub mod framing;
pub mod grpc;
pub mod handler;
pub mod link;
pub mod pins;
pub mod server;
pub mod sessions;
pub mod splice;
pub mod tunnel;
pub mod unpin;
pub mod upstream;

pub use server::{Options, Shared, run};

/// `--allow-unbudgeted-builds`: every build let by outside the budget is a warning, each time.
fn warn_unbudgeted(rewrites: &[crate::policy::Rewrite]) {
    for r in rewrites
        .iter()
        .filter(|r| r.rule == crate::policy::limits::UNBUDGETED)
    {
        tracing::warn!(rule.id = r.rule, "{}", r.what);
    }
}
