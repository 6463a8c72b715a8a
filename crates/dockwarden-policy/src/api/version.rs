//! Docker API versions, parsed and compared exactly like dockerd's `versions.compare`.
//!
//! dockerd splits the version on `.`, parses each part with `strconv.Atoi` (a failure counts as 0)
//! and compares the parts numerically, with missing parts counting as 0. So `1.9 < 1.24`,
//! `1.040 == 1.40` and `1.23.99 < 1.24`. The proxy uses the *same* parsed value for its own
//! version-dependent rules that the daemon will use.

use std::cmp::Ordering;
use std::fmt;

/// A version as dockerd would compare it. The raw text is kept for logs and forwarding.
#[derive(Debug, Clone, Eq)]
pub struct ApiVersion {
    raw: String,
    parts: Vec<u64>,
}

impl ApiVersion {
    /// Parses the text captured by dockerd's `/v{version:[0-9.]+}` route variable.
    /// Returns `None` when the text is not made of digits and dots only.
    pub fn parse(raw: &str) -> Option<Self> {
        if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        // INVARIANT: like Go's strconv.Atoi failing, an empty or overlong part counts as 0.
        let parts = raw
            .split('.')
            .map(|p| p.parse::<u64>().unwrap_or(0))
            .collect();
        Some(Self {
            raw: raw.to_owned(),
            parts,
        })
    }

    /// A version from major and minor numbers, for constants such as the audited window.
    pub fn new(major: u64, minor: u64) -> Self {
        Self {
            raw: format!("{major}.{minor}"),
            parts: vec![major, minor],
        }
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// `versions.LessThan(self, other)`.
    pub fn less_than(&self, other: &ApiVersion) -> bool {
        self.cmp(other) == Ordering::Less
    }
}

impl Ord for ApiVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            match a.cmp(&b) {
                Ordering::Equal => continue,
                o => return o,
            }
        }
        Ordering::Equal
    }
}

impl PartialOrd for ApiVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ApiVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> ApiVersion {
        ApiVersion::parse(s).expect("valid version text")
    }

    #[test]
    fn compares_numerically_per_component_like_dockerd() {
        assert!(v("1.9").less_than(&v("1.24")));
        assert_eq!(v("1.040"), v("1.40"));
        assert_eq!(v("1.41.0"), v("1.41"));
        assert!(v("1.41").less_than(&v("1.41.9")));
        assert!(v("1.23.99").less_than(&v("1.24")));
        assert_eq!(v("1.."), v("1"));
        assert_eq!(v("."), v("0"));
    }

    #[test]
    fn rejects_non_numeric_text() {
        assert!(ApiVersion::parse("").is_none());
        assert!(ApiVersion::parse("1.41a").is_none());
        assert!(ApiVersion::parse("V1.41").is_none());
    }
}
