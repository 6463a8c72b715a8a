//! The SDK's batch write, `files.write([{path, data}, ...])`: one call, each file written
//! atomically (temp file, fsync, rename), each within the per-file limit.
//!
//! Every entry is checked (path, encoding, size) before the first file is written, so a bad
//! entry changes nothing; a write that fails midway names its path and the files already
//! written.

use base64::Engine;
use serde::Deserialize;

use crate::error::{WsError, WsResult};
use crate::files::{Files, MAX_IO_BYTES, clean_rel};

/// At most this many files per call.
pub const MAX_BATCH_FILES: usize = 1000;

/// One entry of a batch: `data` as UTF-8 text, or `data_base64` for bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEntry {
    pub path: String,
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub data_base64: Option<String>,
}

/// The request body: `{"files": [...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    pub files: Vec<BatchEntry>,
}

/// Decodes and checks every entry; the cleaned path and the bytes of each.
pub fn decode(req: BatchRequest) -> WsResult<Vec<(String, Vec<u8>)>> {
    if req.files.is_empty() {
        return Err(WsError::Invalid("the batch has no files".into()));
    }
    if req.files.len() > MAX_BATCH_FILES {
        return Err(WsError::Invalid(format!(
            "the batch has {} files; at most {MAX_BATCH_FILES} per call",
            req.files.len()
        )));
    }
    let mut out = Vec::with_capacity(req.files.len());
    for e in req.files {
        let rel = clean_rel(&e.path)?;
        if rel.is_empty() {
            return Err(WsError::Invalid("a batch entry has an empty path".into()));
        }
        let data = match (e.data, e.data_base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64.as_bytes())
                .map_err(|err| {
                    WsError::Invalid(format!(
                        "`data_base64` of `{}` is not base64: {err}",
                        e.path
                    ))
                })?,
            _ => {
                return Err(WsError::Invalid(format!(
                    "entry `{}` needs exactly one of `data` and `data_base64`",
                    e.path
                )));
            }
        };
        if data.len() as u64 > MAX_IO_BYTES {
            return Err(WsError::TooLarge {
                path: e.path,
                size: data.len() as u64,
                limit: MAX_IO_BYTES,
            });
        }
        out.push((rel, data));
    }
    Ok(out)
}

/// Writes each file atomically, in order; returns the paths written.
pub fn write_all(files: &Files, entries: &[(String, Vec<u8>)]) -> WsResult<Vec<String>> {
    let mut written = Vec::with_capacity(entries.len());
    for (rel, data) in entries {
        if let Err(e) = files.write(rel, data) {
            if written.is_empty() {
                return Err(e);
            }
            return Err(WsError::Partial {
                detail: format!("batch write stopped at `{rel}`: {e}"),
                done: written,
                cause: Box::new(e),
            });
        }
        written.push(rel.clone());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, data: Option<&str>, b64: Option<&str>) -> BatchEntry {
        BatchEntry {
            path: path.into(),
            data: data.map(str::to_string),
            data_base64: b64.map(str::to_string),
        }
    }

    #[test]
    fn a_bad_entry_rejects_the_batch_before_anything_is_written() {
        let ok = entry("a.txt", Some("x"), None);
        for bad in [
            entry("../x", Some("x"), None),
            entry("b", None, None),
            entry("b", Some("x"), Some("eA==")),
            entry("b", None, Some("not base64!")),
        ] {
            let r = decode(BatchRequest {
                files: vec![ok.clone(), bad.clone()],
            });
            assert!(r.is_err(), "{bad:?} accepted");
        }
        let big = "x".repeat(MAX_IO_BYTES as usize + 1);
        let r = decode(BatchRequest {
            files: vec![entry("big", Some(&big), None)],
        });
        assert!(matches!(r, Err(WsError::TooLarge { .. })));
        let good = decode(BatchRequest {
            files: vec![ok, entry("d/b.bin", None, Some("AAEC"))],
        })
        .expect("valid batch");
        assert_eq!(good[1], ("d/b.bin".to_string(), vec![0u8, 1, 2]));
    }
}
