//! The route templates as plain string tests, so a request is classified without running a
//! regex: most templates are a literal path or `prefix(.*)suffix`, and those are a
//! `starts_with` and an `ends_with` on the path borrowed from the request. The few with
//! alternations or optional parts keep their anchored regex.
//!
//! INVARIANT: a shape matches exactly the strings its template's regex `^<template>$` matches,
//! and yields the same captures (`tests.rs` compares the two on generated paths). The version
//! prefix is handled by the caller as the regex `^(?:/v([0-9.]+))?<template>$` would: the
//! version is taken when the rest matches, else the whole path is tried without one.

use regex::Regex;

/// One template, in the cheapest form that matches like its regex.
pub(super) enum Shape {
    /// No regex syntax: the path equals the template.
    Exact(&'static str),
    /// `prefix(.*)suffix` (or `prefix(.+)suffix` with `min` 1), neither part with regex syntax:
    /// a greedy capture anchored at both ends is the middle of the path.
    Around {
        prefix: &'static str,
        suffix: &'static str,
        min: usize,
    },
    /// Anything else (alternations, optional groups, several captures).
    Regex(Regex),
}

const META: &[char] = &[
    '(', ')', '[', ']', '.', '*', '+', '?', '|', '\\', '^', '$', '{', '}',
];

impl Shape {
    /// The shape of one table template.
    pub(super) fn of(template: &'static str) -> Result<Self, regex::Error> {
        if !template.contains(META) {
            return Ok(Shape::Exact(template));
        }
        for (group, min) in [("(.*)", 0), ("(.+)", 1)] {
            if let Some(i) = template.find(group) {
                let (prefix, suffix) = (&template[..i], &template[i + group.len()..]);
                if !prefix.contains(META) && !suffix.contains(META) {
                    return Ok(Shape::Around {
                        prefix,
                        suffix,
                        min,
                    });
                }
            }
        }
        Regex::new(&format!("^{template}$")).map(Shape::Regex)
    }

    /// The captures of `path` when it matches, at most two (the table's largest).
    pub(super) fn matches<'p>(&self, path: &'p str) -> Option<Captures<'p>> {
        match self {
            Shape::Exact(t) => (path == *t).then_some(Captures::default()),
            Shape::Around {
                prefix,
                suffix,
                min,
            } => {
                let rest = path.strip_prefix(prefix)?;
                let mid = rest.strip_suffix(suffix)?;
                (mid.len() >= *min).then_some(Captures { n: 1, v: [mid, ""] })
            }
            Shape::Regex(re) => {
                let caps = re.captures(path)?;
                let mut out = Captures::default();
                for m in caps.iter().skip(1).flatten().take(2) {
                    out.v[out.n] = m.as_str();
                    out.n += 1;
                }
                Some(out)
            }
        }
    }
}

/// The variables a template captured, in order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Captures<'p> {
    n: usize,
    v: [&'p str; 2],
}

impl<'p> Captures<'p> {
    pub(super) fn as_slice(&self) -> &[&'p str] {
        &self.v[..self.n]
    }
}

/// Splits `/v<digits and dots>/rest` into the version text and `/rest`, as the optional
/// group `(?:/v([0-9.]+))?` before a template that starts with `/` does: the version run is
/// maximal, since a shorter one would leave a digit or dot where the template wants `/`.
pub(super) fn split_version(path: &str) -> Option<(&str, &str)> {
    let after = path.strip_prefix("/v")?;
    let end = after
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(after.len());
    let (v, rest) = after.split_at(end);
    (!v.is_empty() && rest.starts_with('/')).then_some((v, rest))
}
