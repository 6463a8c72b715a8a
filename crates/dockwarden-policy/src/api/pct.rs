//! Every percent-encoding dockwarden writes, as named character sets over the
//! `percent-encoding` crate. Decoding stays in [`super::query`], which must read exactly
//! what Go's `url.ParseQuery` reads.

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - _ . ~`): a query value
/// or one path segment sent to dockerd or the workspace API.
pub const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// [`COMPONENT`] that keeps `/`: a query value holding a workspace path, left readable.
pub const PATH_VALUE: &AsciiSet = &COMPONENT.remove(b'/');

/// gRPC's `grpc-message` header: printable ASCII except `%` as is, everything else `%XX`
/// (controls, DEL and every non-ASCII byte).
pub const GRPC_MESSAGE: &AsciiSet = &CONTROLS.add(b'%');

/// `s` with every byte in `set` written as `%XX`.
pub fn encode(s: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(s, set).to_string()
}

/// A query value or path segment ([`COMPONENT`]).
pub fn component(s: &str) -> String {
    encode(s, COMPONENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_keeps_only_unreserved() {
        assert_eq!(component("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(component("a b/c:d&e=f%"), "a%20b%2Fc%3Ad%26e%3Df%25");
        assert_eq!(component("é"), "%C3%A9");
        // A signal name in `kill?signal=`: `+` must not read as a space.
        assert_eq!(component("SIGRTMIN+3"), "SIGRTMIN%2B3");
    }

    #[test]
    fn path_value_keeps_slashes() {
        assert_eq!(encode("/workspace/a b?", PATH_VALUE), "/workspace/a%20b%3F");
    }

    #[test]
    fn grpc_message_escapes_percent_controls_and_non_ascii() {
        assert_eq!(encode("a b%c\n→~", GRPC_MESSAGE), "a b%25c%0A%E2%86%92~");
        assert_eq!(encode("\x7f", GRPC_MESSAGE), "%7F");
    }

    #[test]
    fn every_set_round_trips_through_the_query_reader() {
        for s in ["plain", "a b+c&d=e", "{\"label\":[\"x=y\"]}", "/p/ä/%"] {
            for set in [COMPONENT, PATH_VALUE] {
                let q = format!("k={}", encode(s, set));
                let parsed = super::super::query::Query::parse(Some(&q)).expect("valid");
                assert_eq!(parsed.get("k"), Some(s), "{s:?}");
            }
        }
    }
}
