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

/// One audit record.
#[derive(Debug, Serialize)]
pub struct Record<'a> {
    pub time: String,
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
    out: Mutex<Box<dyn Write + Send>>,
}

impl AuditLog {
    pub fn stderr() -> Self {
        Self { out: Mutex::new(Box::new(std::io::stderr())) }
    }

    pub fn file(path: &std::path::Path) -> std::io::Result<Self> {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self { out: Mutex::new(Box::new(f)) })
    }

    /// Writes one line. A failed write is logged and does not fail the request.
    pub fn write(&self, rec: &Record<'_>) {
        let Ok(mut line) = serde_json::to_vec(rec) else { return };
        line.push(b'\n');
        let Ok(mut out) = self.out.lock() else { return };
        if let Err(e) = out.write_all(&line).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "audit log write failed");
        }
    }
}

/// The current time as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, dd) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
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
    fn civil_dates_are_right() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_422), (2025, 11, 30));
    }
}
