//! Fuzzes the router: `CanonicalPath::parse` and `route::classify` never panic, classifying
//! is stable, and a `/v1.41` prefix never changes which endpoint a bare path names.
#![no_main]

use dockwarden_policy::api::path::CanonicalPath;
use dockwarden_policy::api::route::classify;
use libfuzzer_sys::fuzz_target;

const METHODS: &[&str] = &[
    "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "get",
];

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let method = METHODS[usize::from(m) % METHODS.len()];
    let Ok(p) = CanonicalPath::parse(raw) else {
        return;
    };
    let r = classify(method, &p);
    assert_eq!(classify(method, &p), r, "classification is stable");
    let first = p.as_str().trim_start_matches('/');
    if !(first.starts_with('v') && first[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.'))
    {
        // The prefix goes on the raw path: `p` is decoded already, and parsing it again would
        // decode it twice (`%2525` is `%25` to the daemon, not `%`).
        if let Ok(vp) = CanonicalPath::parse(&format!("/v1.41{raw}")) {
            assert_eq!(
                classify(method, &vp).endpoint,
                r.endpoint,
                "version prefix changed the endpoint"
            );
        }
    }
});
