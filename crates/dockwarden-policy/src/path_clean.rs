//! Every lexical path rule of dockwarden, as named variants with shared tests. They differ
//! on purpose, and the name says how:
//!
//! | variant | input | `..` | result |
//! |---|---|---|---|
//! | [`clean`] | absolute host path | pops, stops at `/` (Go's `path.Clean`) | the cleaned path |
//! | [`is_clean_absolute`] | absolute API path | refused | whether it is already clean (one trailing `/` allowed) |
//! | [`clean_within`] | repository-relative path | pops, never above the top | the cleaned path, `None` if it leaves or is empty |
//! | [`clean_relative_no_dotdot`] | caller's worktree path | refused | the cleaned path (`""` is the top), `None` if refused |
//! | [`is_clean_relative`] | stored relative path | refused | whether it is non-empty and already clean |
//!
//! It lives here rather than in the main crate's `hostfs` (which re-exports it) because the
//! policy compares bind sources and pins by their cleaned form and must not depend on the
//! module that opens files.

/// Go's `path.Clean` for absolute paths: lexical, `..` at the root stays at the root.
pub fn clean(p: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// Whether an absolute path is already in its clean form: no empty, `.` or `..` segment,
/// at most one trailing `/` (an API path the daemon's router would see unchanged).
pub fn is_clean_absolute(p: &str) -> bool {
    if p == "/" {
        return true;
    }
    let Some(rest) = p.strip_prefix('/') else {
        return false;
    };
    let body = rest.strip_suffix('/').unwrap_or(rest);
    body.split('/')
        .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// A path relative to a tree's top, cleaned lexically; `..` may climb back, but never above
/// the top. `None` when it is absolute, climbs out, or names the top itself.
pub fn clean_within(p: &str) -> Option<String> {
    if p.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// A caller's path relative to a tree's top, with empty and `.` segments dropped (`""` is the
/// top). `None` when it is absolute, has a NUL, or has any `..`.
pub fn clean_relative_no_dotdot(p: &str) -> Option<String> {
    if p.starts_with('/') || p.contains('\0') {
        return None;
    }
    let mut parts = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// Whether a relative path is non-empty and already clean: no leading `/`, and no empty,
/// `.` or `..` segment.
pub fn is_clean_relative(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One table for every variant: `clean`, `is_clean_absolute`, `clean_within`,
    /// `clean_relative_no_dotdot`, `is_clean_relative`.
    #[test]
    fn every_variant_on_the_same_inputs() {
        type Row = (
            &'static str,
            &'static str,
            bool,
            Option<&'static str>,
            Option<&'static str>,
            bool,
        );
        let rows: &[Row] = &[
            ("/a/b", "/a/b", true, None, None, false),
            ("/a/b/", "/a/b", true, None, None, false),
            ("/a//b", "/a/b", false, None, None, false),
            ("/a/../b", "/b", false, None, None, false),
            ("/..", "/", false, None, None, false),
            ("a/b", "/a/b", false, Some("a/b"), Some("a/b"), true),
            ("a/./b/", "/a/b", false, Some("a/b"), Some("a/b"), false),
            ("a/../b", "/b", false, Some("b"), None, false),
            ("../b", "/b", false, None, None, false),
            ("a/..", "/", false, None, None, false),
            ("", "/", false, None, Some(""), false),
            (".", "/", false, None, Some(""), false),
            ("a\0b", "/a\0b", false, Some("a\0b"), None, true),
        ];
        for &(input, go, abs_clean, within, no_dotdot, rel_clean) in rows {
            assert_eq!(clean(input), go, "clean({input:?})");
            assert_eq!(
                is_clean_absolute(input),
                abs_clean,
                "is_clean_absolute({input:?})"
            );
            assert_eq!(
                clean_within(input).as_deref(),
                within,
                "clean_within({input:?})"
            );
            assert_eq!(
                clean_relative_no_dotdot(input).as_deref(),
                no_dotdot,
                "clean_relative_no_dotdot({input:?})"
            );
            assert_eq!(
                is_clean_relative(input),
                rel_clean,
                "is_clean_relative({input:?})"
            );
        }
    }

    #[test]
    fn clean_is_lexical_like_go() {
        assert_eq!(clean("/ws/../etc"), "/etc");
        assert_eq!(clean("/../../x//y/."), "/x/y");
        assert_eq!(clean("/"), "/");
    }
}
