//! Body types shared by the server and the upstream client.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, combinators::BoxBody};

/// The body type flowing through the proxy in both directions.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

pub fn full(b: impl Into<Bytes>) -> ProxyBody {
    Full::new(b.into()).map_err(|e| match e {}).boxed()
}

pub fn empty() -> ProxyBody {
    Empty::new().map_err(|e| match e {}).boxed()
}
