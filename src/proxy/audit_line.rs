//! An audit record as one JSON line, written into a reused buffer.
//!
//! The bytes are exactly what `serde_json::to_vec` wrote for the `Serialize` derive this
//! replaces (same field order, `null` for an absent value, serde_json's escapes), so readers of
//! the audit log see no change; the unit tests compare the two. Hand-written because serde's
//! per-fragment writer calls and a fresh `Vec` per record were ~5,500 instructions of every
//! proxied request (callgrind, benches/README.md).

use super::audit::{Peer, Record};

/// Appends `rec` as one JSON object and a newline to `out`.
pub fn encode(rec: &Record<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"time\":\"");
    rec.time.write_rfc3339(out);
    out.extend_from_slice(b"\",\"peer\":");
    peer(&rec.peer, out);
    out.extend_from_slice(b",\"method\":");
    string(rec.method, out);
    out.extend_from_slice(b",\"path\":");
    string(rec.path, out);
    out.extend_from_slice(b",\"api_version\":");
    match rec.api_version {
        Some(v) => string(v, out),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"endpoint\":");
    string(rec.endpoint, out);
    out.extend_from_slice(b",\"decision\":");
    string(rec.decision, out);
    out.extend_from_slice(b",\"rules\":");
    list(rec.rules.iter().copied(), out);
    out.extend_from_slice(b",\"rewrites\":");
    list(rec.rewrites.iter().map(String::as_str), out);
    out.extend_from_slice(b"}\n");
}

fn peer(p: &Peer, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"uid\":");
    number(p.uid.map(i64::from), out);
    out.extend_from_slice(b",\"gid\":");
    number(p.gid.map(i64::from), out);
    out.extend_from_slice(b",\"pid\":");
    number(p.pid.map(i64::from), out);
    out.push(b'}');
}

fn number(n: Option<i64>, out: &mut Vec<u8>) {
    match n {
        Some(n) => out.extend_from_slice(itoa_buf(n, &mut [0u8; 20])),
        None => out.extend_from_slice(b"null"),
    }
}

/// Decimal digits of `n` in `buf`, without a formatter.
fn itoa_buf(n: i64, buf: &mut [u8; 20]) -> &[u8] {
    let neg = n < 0;
    let mut v = n.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if neg {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

fn list<'a>(items: impl Iterator<Item = &'a str>, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, s) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(s, out);
    }
    out.push(b']');
}

/// A JSON string with serde_json's escapes: `\"`, `\\`, `\b \f \n \r \t`, other controls as
/// `\u00xx`; everything else (UTF-8 included) as is.
fn string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let mut rest = s.as_bytes();
    // Copy the runs between escapes whole; most strings (paths, names) have none.
    while let Some(i) = rest
        .iter()
        .position(|&c| c < 0x20 || c == b'"' || c == b'\\')
    {
        out.extend_from_slice(&rest[..i]);
        let c = rest[i];
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 0xf)],
            ]),
        }
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::super::audit::{Peer, Record, Timestamp};
    use proptest::prelude::*;

    /// The record's former shape, with the `Serialize` derive this module replaces.
    #[derive(serde::Serialize)]
    struct Derived<'a> {
        time: String,
        peer: Peer,
        method: &'a str,
        path: &'a str,
        api_version: Option<&'a str>,
        endpoint: &'a str,
        decision: &'a str,
        rules: Vec<&'a str>,
        rewrites: Vec<String>,
    }

    fn with_serde(rec: &Record<'_>) -> Vec<u8> {
        let d = Derived {
            time: rec.time.to_string(),
            peer: rec.peer,
            method: rec.method,
            path: rec.path,
            api_version: rec.api_version,
            endpoint: rec.endpoint,
            decision: rec.decision,
            rules: rec.rules.clone(),
            rewrites: rec.rewrites.clone(),
        };
        let mut out = serde_json::to_vec(&d).unwrap_or_default();
        out.push(b'\n');
        out
    }

    fn encoded(rec: &Record<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        super::encode(rec, &mut out);
        out
    }

    #[test]
    fn writes_what_serde_json_wrote() {
        let rec = Record {
            time: Timestamp::now(),
            peer: Peer {
                uid: Some(1000),
                gid: Some(0),
                pid: Some(-1),
            },
            method: "POST",
            path: "/v1.41/containers/a \"b\"\\c\u{1}\u{7f}é\n/json",
            api_version: Some("1.41"),
            endpoint: "ContainerInspect",
            decision: "deny",
            rules: vec!["container.privileged", "x\ty"],
            rewrites: vec!["a: b".into(), "\u{8}\u{c}\r".into()],
        };
        assert_eq!(
            String::from_utf8_lossy(&encoded(&rec)),
            String::from_utf8_lossy(&with_serde(&rec))
        );
        let empty = Record {
            time: Timestamp::now(),
            peer: Peer::default(),
            method: "",
            path: "",
            api_version: None,
            endpoint: "Unclassified",
            decision: "allow",
            rules: Vec::new(),
            rewrites: Vec::new(),
        };
        assert_eq!(
            String::from_utf8_lossy(&encoded(&empty)),
            String::from_utf8_lossy(&with_serde(&empty))
        );
    }

    proptest! {
        #[test]
        fn any_strings_and_numbers_match_serde_json(
            path in any::<String>(),
            method in "[A-Z\\x00-\\x1f\"\\\\]{0,8}",
            rules in proptest::collection::vec(any::<String>(), 0..3),
            uid in any::<Option<u32>>(),
            pid in any::<Option<i32>>(),
        ) {
            let rule_refs: Vec<&str> = rules.iter().map(String::as_str).collect();
            let rec = Record {
                time: Timestamp::now(),
                peer: Peer { uid, gid: uid, pid },
                method: &method,
                path: &path,
                api_version: Some(&path),
                endpoint: "Ping",
                decision: "allow",
                rules: rule_refs,
                rewrites: rules.clone(),
            };
            prop_assert_eq!(encoded(&rec), with_serde(&rec));
        }
    }
}
