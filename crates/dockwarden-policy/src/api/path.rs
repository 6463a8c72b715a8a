//! Request-target canonicalisation, the way Go's `net/http` and gorilla/mux see the path.
//!
//! dockerd routes on `URL.Path`, the percent-decoded path, and answers 301 to any path that
//! `path.Clean` would change. We decode once, refuse the escapes that change the path's shape
//! (`%2F`, `%2E`, `%5C`, `%00`), refuse anything the daemon would redirect, and hand the router
//! the same string the daemon's router will see.

use std::fmt;

/// Why a request target was refused before routing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("malformed percent escape in the request path")]
    BadEscape,
    #[error("the request path contains an encoded `/`, `.`, `\\` or NUL")]
    ShapeChangingEscape,
    #[error("the request path is not canonical (dockerd would redirect it)")]
    NotClean,
    #[error("the request path is not valid UTF-8 or contains control characters")]
    BadBytes,
    #[error("only origin-form request targets are accepted")]
    NotOriginForm,
}

/// A percent-decoded path that `path.Clean` leaves unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalPath(String);

impl CanonicalPath {
    /// Decodes and checks a raw origin-form path (without the query).
    pub fn parse(raw: &str) -> Result<Self, PathError> {
        if !raw.starts_with('/') {
            return Err(PathError::NotOriginForm);
        }
        // The common path has no escapes and only printable ASCII: it is its own decoding and
        // has no control characters, so it is copied once instead of decoded and re-checked.
        let plain = raw.bytes().all(|b| b != b'%' && (0x20..0x7f).contains(&b));
        let s = if plain {
            raw.to_owned()
        } else {
            let decoded = percent_decode(raw)?;
            let s = String::from_utf8(decoded).map_err(|_| PathError::BadBytes)?;
            if s.chars().any(|c| c.is_control()) {
                return Err(PathError::BadBytes);
            }
            s
        };
        // gorilla/mux's `cleanPath` (Go `path.Clean`, keeping a trailing slash) must be a no-op.
        if !crate::path_clean::is_clean_absolute(&s) {
            return Err(PathError::NotClean);
        }
        Ok(Self(s))
    }

    /// The decoded path, as the daemon's router sees it. It is not a raw request target:
    /// parsing it again would decode its escapes a second time.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Go's `url.PathUnescape`, stricter: escapes that would change the path's structure are refused.
fn percent_decode(raw: &str) -> Result<Vec<u8>, PathError> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) else {
                return Err(PathError::BadEscape);
            };
            let v = h * 16 + l;
            if matches!(v, b'/' | b'.' | b'\\' | 0) {
                return Err(PathError::ShapeChangingEscape);
            }
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_go_and_refuses_shape_changes() {
        assert_eq!(
            CanonicalPath::parse("/v1.41/containers/json").map(|p| p.0),
            Ok("/v1.41/containers/json".into())
        );
        assert_eq!(
            CanonicalPath::parse("/v1.41/containers/a%20b/json").map(|p| p.0),
            Ok("/v1.41/containers/a b/json".into())
        );
        assert_eq!(
            CanonicalPath::parse("/v1.41/containers%2Fcreate"),
            Err(PathError::ShapeChangingEscape)
        );
        assert_eq!(
            CanonicalPath::parse("/v1.41/%2e%2e/x"),
            Err(PathError::ShapeChangingEscape)
        );
        assert_eq!(
            CanonicalPath::parse("/v1.41/x%zz"),
            Err(PathError::BadEscape)
        );
        assert_eq!(CanonicalPath::parse("/v1.41/x%"), Err(PathError::BadEscape));
    }

    /// Found by the `router` fuzz target (fuzz/regressions/router/): `%2525` is `%25` once
    /// decoded, which is what the daemon routes on; a second decoding would make it `%`.
    #[test]
    fn decodes_escapes_exactly_once() {
        let p = CanonicalPath::parse("/images/prune/%2525ii").expect("canonical");
        assert_eq!(p.as_str(), "/images/prune/%25ii");
        let versioned = CanonicalPath::parse("/v1.41/images/prune/%2525ii").expect("canonical");
        assert_eq!(versioned.as_str(), "/v1.41/images/prune/%25ii");
        assert_eq!(
            CanonicalPath::parse("/images/%25").map(|p| p.0),
            Ok("/images/%".into())
        );
    }

    #[test]
    fn refuses_paths_dockerd_would_redirect() {
        for p in [
            "//v1.41/containers/json",
            "/v1.41/./containers/json",
            "/v1.41/x/../containers/json",
            "/v1.41/.",
            "/a//b",
        ] {
            assert_eq!(CanonicalPath::parse(p), Err(PathError::NotClean), "{p}");
        }
        assert!(CanonicalPath::parse("/networks/").is_ok());
        assert!(CanonicalPath::parse("/").is_ok());
        assert_eq!(CanonicalPath::parse("*"), Err(PathError::NotOriginForm));
        assert_eq!(CanonicalPath::parse("/a%ff"), Err(PathError::BadBytes));
    }
}
