//! Query strings read the way Go's `url.ParseQuery` and Docker's handlers read them.
//!
//! `Get`/`FormValue` take the **first** value of a key; some handlers read all values; `+` is a
//! space; a pair containing `;` is invalid in Go ≥ 1.17 (and a separator before that), so we
//! refuse any query containing `;` rather than guess which Go built the daemon.

/// Why a query string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query string contains `;`, which Go versions split differently")]
    Semicolon,
    #[error("malformed percent escape in the query string")]
    BadEscape,
    #[error("the query string is not valid UTF-8")]
    BadBytes,
}

/// Decoded query pairs in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Result<Self, QueryError> {
        let Some(raw) = raw else {
            return Ok(Self::default());
        };
        if raw.contains(';') {
            return Err(QueryError::Semicolon);
        }
        let mut out = Vec::new();
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            out.push((unescape(k)?, unescape(v)?));
        }
        Ok(Self(out))
    }

    /// `url.Values.Get`: the first value, or None when the key is absent.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a key, in order (for `t`, `extrahosts`, `changes`, ...).
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Docker's `httputils.BoolValue`: anything but "", 0, no, false, none is true.
    pub fn bool(&self, key: &str) -> bool {
        self.get(key).is_some_and(bool_value)
    }

    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Re-encodes the query canonically for forwarding.
    pub fn encode(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{}={}", super::pct::component(k), super::pct::component(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// Replaces every value of `key` with one value (or appends it).
    pub fn set(&mut self, key: &str, value: &str) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_owned(), value.to_owned()));
    }
}

/// Docker's `BoolValue` on one value (Go's `TrimSpace` is Unicode-aware, as is `trim`).
pub fn bool_value(v: &str) -> bool {
    !matches!(
        v.trim().to_lowercase().as_str(),
        "" | "0" | "no" | "false" | "none"
    )
}

fn unescape(s: &str) -> Result<String, QueryError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hex = s.get(i + 1..i + 3).ok_or(QueryError::BadEscape)?;
                let v = u8::from_str_radix(hex, 16).map_err(|_| QueryError::BadEscape)?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return Err(QueryError::BadEscape);
                }
                out.push(v);
                i += 3;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| QueryError::BadBytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_value_wins_and_plus_is_space() {
        let q = Query::parse(Some("networkmode=bridge&networkmode=host&t=a+b&t=c")).expect("valid");
        assert_eq!(q.get("networkmode"), Some("bridge"));
        assert_eq!(q.all("t"), vec!["a b", "c"]);
    }

    #[test]
    fn refuses_semicolons_and_bad_escapes() {
        assert_eq!(
            Query::parse(Some("a=1;networkmode=host")),
            Err(QueryError::Semicolon)
        );
        assert_eq!(Query::parse(Some("a=%zz")), Err(QueryError::BadEscape));
        assert_eq!(Query::parse(Some("a=%+1")), Err(QueryError::BadEscape));
    }

    #[test]
    fn bool_values_follow_docker() {
        for t in ["1", "yes", "True", "2", "x"] {
            assert!(bool_value(t), "{t}");
        }
        for f in ["", "0", "no", "FALSE", " none "] {
            assert!(!bool_value(f), "{f}");
        }
    }

    #[test]
    fn encode_round_trips() {
        let q = Query::parse(Some("filters=%7B%22a%22%3A1%7D&x=a+b")).expect("valid");
        assert_eq!(Query::parse(Some(&q.encode())), Ok(q));
    }
}
