//! Query-string parsing: percent-decoding and the `meta.<key>=<value>` filter.

use std::collections::BTreeMap;

use crate::error::{WsError, WsResult};

/// Decodes `%XX` and `+` in one query component.
pub fn decode(s: &str) -> WsResult<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                let v = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(v.ok_or_else(|| WsError::Invalid(format!("bad escape in query `{s}`")))?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| WsError::Invalid("query is not utf-8".into()))
}

/// All key/value pairs of a query string, decoded.
pub fn parse(query: Option<&str>) -> WsResult<Vec<(String, String)>> {
    let mut out = Vec::new();
    for part in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        out.push((decode(k)?, decode(v)?));
    }
    Ok(out)
}

/// The first value of `key`.
pub fn get<'a>(q: &'a [(String, String)], key: &str) -> Option<&'a str> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// The value of `key`, or `invalid`.
pub fn require<'a>(q: &'a [(String, String)], key: &str) -> WsResult<&'a str> {
    get(q, key).ok_or_else(|| WsError::Invalid(format!("missing query parameter `{key}`")))
}

/// True for `1`, `true` or `yes`.
pub fn flag(q: &[(String, String)], key: &str) -> bool {
    matches!(get(q, key), Some("1" | "true" | "yes"))
}

/// The metadata filter from `meta.<key>=<value>` pairs.
pub fn metadata(q: &[(String, String)]) -> BTreeMap<String, String> {
    q.iter()
        .filter_map(|(k, v)| k.strip_prefix("meta.").map(|k| (k.to_string(), v.clone())))
        .collect()
}

/// `metadata` for `list` and delete-by-metadata, which take nothing else: a key without
/// the `meta.` prefix is refused rather than silently ignored.
pub fn metadata_filter(q: &[(String, String)]) -> crate::error::WsResult<BTreeMap<String, String>> {
    if let Some((k, _)) = q
        .iter()
        .find(|(k, _)| !k.starts_with("meta.") && k != "stream")
    {
        return Err(crate::error::WsError::Invalid(format!(
            "unknown filter `{k}`; metadata filters are `meta.<key>=<value>`"
        )));
    }
    Ok(metadata(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_metadata_filters() {
        let q = parse(Some("meta.conversation=42&meta.user=ada%20l&path=a%2Fb")).expect("valid");
        let m = metadata(&q);
        assert_eq!(m.get("conversation").map(String::as_str), Some("42"));
        assert_eq!(m.get("user").map(String::as_str), Some("ada l"));
        assert_eq!(get(&q, "path"), Some("a/b"));
        assert!(parse(Some("a=%zz")).is_err());
    }
}
