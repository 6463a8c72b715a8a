//! Lexical cleaning of absolute host paths, as the daemon does it before it looks a path up.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_is_lexical_like_go() {
        assert_eq!(clean("/ws/../etc"), "/etc");
        assert_eq!(clean("/../../x//y/."), "/x/y");
        assert_eq!(clean("/"), "/");
    }
}
