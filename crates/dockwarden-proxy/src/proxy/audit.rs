//! The audit trail: one JSON line per decision, separate from the tracing logs.

use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Who sent a request, from `SO_PEERCRED` on the accepted socket.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Peer {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub pid: Option<i32>,
}

/// One audit record, written as one JSON line (serde_json, fields in this order).
#[derive(Debug, Serialize)]
pub struct Record<'a> {
    pub time: Timestamp,
    pub peer: Peer,
    pub method: &'a str,
    pub path: &'a str,
    pub api_version: Option<&'a str>,
    pub endpoint: &'a str,
    /// `allow`, `deny` or `would-deny` (dry run).
    pub decision: &'a str,
    pub rules: Vec<&'a str>,
    pub rewrites: Vec<String>,
}

/// Where audit lines go: a file opened for append, or stderr.
pub struct AuditLog {
    out: Mutex<Out>,
}

/// The destination and the line buffer, reused for every record (one allocation per log,
/// not per request).
struct Out {
    w: Box<dyn Write + Send>,
    line: Vec<u8>,
}

/// Lines longer than this give their buffer back after being written.
const KEEP_LINE: usize = 16 * 1024;

impl AuditLog {
    pub fn stderr() -> Self {
        Self::new(Box::new(std::io::stderr()))
    }

    pub fn file(path: &std::path::Path) -> std::io::Result<Self> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self::new(Box::new(f)))
    }

    fn new(w: Box<dyn Write + Send>) -> Self {
        Self {
            out: Mutex::new(Out {
                w,
                line: Vec::with_capacity(1024),
            }),
        }
    }

    /// Writes one line with one `write` (the file is unbuffered). A record that cannot be
    /// written is an error the caller must act on: an allowed request is then refused, never
    /// forwarded unaudited (`ProxyError::Audit`).
    pub fn write(&self, rec: &Record<'_>) -> Result<(), AuditError> {
        let mut out = self
            .out
            .lock()
            .map_err(|_| AuditError("the audit writer panicked earlier".into()))?;
        let Out { w, line } = &mut *out;
        line.clear();
        // Into the reused buffer: no allocation per record. Serialising these plain fields
        // cannot fail; were it to, the record is refused like a failed write.
        serde_json::to_writer(&mut *line, rec).map_err(|e| AuditError(e.to_string()))?;
        line.push(b'\n');
        let res = w.write_all(line).and_then(|()| w.flush());
        if line.capacity() > KEEP_LINE {
            *line = Vec::with_capacity(1024);
        }
        res.map_err(|e| {
            tracing::error!(error = %e, "audit log write failed; the request is refused");
            AuditError(e.to_string())
        })
    }
}

/// An audit record could not be written (a full disk, say).
#[derive(Debug, thiserror::Error)]
#[error("cannot write the audit record: {0}")]
pub struct AuditError(pub String);

/// A record's time: taken when the record is made, written as RFC 3339 UTC with
/// milliseconds when the line is encoded.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp(std::time::Duration);

impl Timestamp {
    pub fn now() -> Self {
        Self(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        )
    }

    /// The 24 bytes of `2026-12-01T20:15:43.123Z`, digit by digit: `format!` with eight
    /// padded fields was ~3,300 instructions of the ~66,000 a proxied `/_ping` cost
    /// (callgrind, benches/README.md).
    pub fn rfc3339(&self) -> [u8; 24] {
        let d = self.0;
        let secs = d.as_secs();
        let (days, rem) = (secs / 86_400, secs % 86_400);
        let (y, m, dd) = civil_from_days(days as i64);
        let mut out = [0u8; 24];
        let mut at = 0;
        let mut put = |v: u64, width: usize, after: u8| {
            let mut v = v;
            for slot in out[at..at + width].iter_mut().rev() {
                *slot = b'0' + (v % 10) as u8;
                v /= 10;
            }
            out[at + width] = after;
            at += width + 1;
        };
        put(y.clamp(0, 9999) as u64, 4, b'-');
        put(u64::from(m), 2, b'-');
        put(u64::from(dd), 2, b'T');
        put(rem / 3600, 2, b':');
        put(rem % 3600 / 60, 2, b':');
        put(rem % 60, 2, b'.');
        put(u64::from(d.subsec_millis()), 3, b'Z');
        out
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let b = self.rfc3339();
        s.serialize_str(std::str::from_utf8(&b).unwrap_or("1970-01-01T00:00:00.000Z"))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.rfc3339()))
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_have_the_rfc3339_shape() {
        let t = super::Timestamp::now().to_string();
        assert_eq!(t.len(), 24, "{t}");
        let b = t.as_bytes();
        assert_eq!(
            (b[4], b[7], b[10], b[13], b[16], b[19], b[23]),
            (b'-', b'-', b'T', b':', b':', b'.', b'Z'),
            "{t}"
        );
        assert!(t.starts_with("20"), "{t}");
    }

    #[test]
    fn civil_dates_are_right() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_422), (2025, 11, 30));
    }

    #[test]
    fn a_record_is_one_json_line_with_its_fields_in_order() {
        let rec = super::Record {
            time: super::Timestamp(std::time::Duration::from_millis(1_764_620_143_123)),
            peer: super::Peer {
                uid: Some(1000),
                gid: None,
                pid: Some(-1),
            },
            method: "POST",
            path: "/containers/create?name=\"a\nb\u{1}\u{e9}",
            api_version: Some("1.41"),
            endpoint: "ContainerCreate",
            decision: "deny",
            rules: vec!["container.privileged"],
            rewrites: vec!["ports.loopback".into()],
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.log");
        let log = super::AuditLog::file(&path).expect("open");
        log.write(&rec).expect("write");
        log.write(&rec).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        let line = concat!(
            r#"{"time":"2025-12-01T20:15:43.123Z","peer":{"uid":1000,"gid":null,"pid":-1},"method":"POST","#,
            r#""path":"/containers/create?name=\"a\nb\u0001é","api_version":"1.41","endpoint":"ContainerCreate","#,
            r#""decision":"deny","rules":["container.privileged"],"rewrites":["ports.loopback"]}"#,
            "\n"
        );
        assert_eq!(text, format!("{line}{line}"));
    }

    #[test]
    fn a_record_that_cannot_be_written_is_an_error() {
        let rec = super::Record {
            time: super::Timestamp::now(),
            peer: super::Peer::default(),
            method: "GET",
            path: "/_ping",
            api_version: None,
            endpoint: "Ping",
            decision: "allow",
            rules: Vec::new(),
            rewrites: Vec::new(),
        };
        // `/dev/full` answers every write with ENOSPC, like a full disk.
        let full =
            super::AuditLog::file(std::path::Path::new("/dev/full")).expect("open /dev/full");
        let err = full
            .write(&rec)
            .expect_err("a full destination is an error");
        assert!(err.to_string().contains("No space left"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let ok = super::AuditLog::file(&dir.path().join("a.log")).expect("open");
        ok.write(&rec).expect("written");
        let text = std::fs::read_to_string(dir.path().join("a.log")).expect("read");
        assert!(
            text.ends_with("\"decision\":\"allow\",\"rules\":[],\"rewrites\":[]}\n"),
            "{text}"
        );
    }
}
