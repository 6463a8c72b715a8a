//! Raw HTTP/1.1 over a Unix socket: the one client the suites use where framing matters (the
//! proxy's socket, a daemon's, the workspace service's), and the one parser of what comes back.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How far [`exchange`] reads the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Until EOF, or until a Content-Length body has been read whole.
    Complete,
    /// Until the end of the head (for requests that switch protocols and then stay open).
    Head,
}

/// What [`exchange`] read.
#[derive(Debug)]
pub struct Answer {
    pub bytes: Vec<u8>,
    /// The read error that ended it early (a reset, or a read that waited past the timeout).
    pub cut: Option<std::io::Error>,
}

/// Sends `bytes` on a fresh connection and reads the answer as far as `until` says, or until
/// EOF, a read error or a read that waits longer than `timeout` (none: no limit). Only the
/// connection fails it: the peer may answer (413, 400) and close before reading everything,
/// so a failed write is not a failure, the answer is what counts.
pub fn exchange(
    sock: &Path,
    bytes: &[u8],
    until: Until,
    timeout: Option<Duration>,
) -> std::io::Result<Answer> {
    let mut s = UnixStream::connect(sock)?;
    s.set_read_timeout(timeout)?;
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    let mut cut = None;
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Err(e) => {
                cut = Some(e);
                break;
            }
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                let done = match until {
                    Until::Complete => response_complete(&out),
                    Until::Head => head_end(&out).is_some(),
                };
                if done {
                    break;
                }
            }
        }
    }
    Ok(Answer { bytes: out, cut })
}

/// Raw HTTP on a Unix socket; returns the response text (reads wait at most 10 s).
pub fn raw(sock: &Path, bytes: &[u8]) -> String {
    raw_maybe(sock, bytes).expect("connect")
}

/// As [`raw`], `None` when nothing listens on `sock`.
pub fn raw_maybe(sock: &Path, bytes: &[u8]) -> Option<String> {
    let out = exchange(sock, bytes, Until::Complete, Some(Duration::from_secs(10))).ok()?;
    Some(String::from_utf8_lossy(&out.bytes).into_owned())
}

/// Sends raw bytes and returns the response head only (reads wait at most 20 s).
pub fn head(sock: &Path, bytes: &[u8]) -> String {
    let out = exchange(sock, bytes, Until::Head, Some(Duration::from_secs(20))).expect("connect");
    String::from_utf8_lossy(&out.bytes).into_owned()
}

/// A request with `Connection: close`, a JSON body when there is one, on `sock`: `(status,
/// response body)`.
pub fn request(sock: &Path, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let req = match body {
        Some(b) => format!(
            "{method} {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
            b.len()
        ),
        None => format!("{method} {path} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"),
    };
    let resp = raw(sock, req.as_bytes());
    (status(&resp), body_of(&resp).to_owned())
}

/// One HTTP/1.1 request with `Connection: close` and a `Content-Length` body, read to the end
/// with no time limit: `(status, body)`, a chunked body decoded. An answer cut off by a read
/// error is an error.
pub fn http(
    socket: &Path,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: dockwarden\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    let answer = exchange(socket, &req, Until::Complete, None)?;
    if let Some(e) = answer.cut {
        return Err(e);
    }
    let resp = answer.bytes;
    let split = head_end(&resp).ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&resp[..split]).to_string();
    let mut body = resp[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Ok((status(&head), body))
}

/// The status code of a raw response (0 when there is none).
pub fn status(resp: &str) -> u16 {
    resp.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Everything after a raw response's head ("" when the head is not complete).
pub fn body_of(resp: &str) -> &str {
    resp.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default()
}

/// A raw response's status and its body parsed as JSON (`Null` when it is not JSON).
pub fn status_and_json(resp: &str) -> (u16, serde_json::Value) {
    (
        status(resp),
        serde_json::from_str(body_of(resp)).unwrap_or(serde_json::Value::Null),
    )
}

/// Where the head ends (the offset of its blank line's `\r\n\r\n`).
fn head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n")
}

/// True once a Content-Length response has been read whole.
fn response_complete(b: &[u8]) -> bool {
    let text = String::from_utf8_lossy(b);
    let Some(end) = text.find("\r\n\r\n") else {
        return false;
    };
    let head = text[..end].to_ascii_lowercase();
    let cl = head.lines().find_map(|l| {
        l.strip_prefix("content-length:")
            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
    });
    matches!(cl, Some(n) if b.len() >= end + 4 + n)
}

/// A chunked body, decoded (stops at the last chunk or where the framing ends).
pub fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..nl]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&data[nl + 2..nl + 2 + size]);
        data = &data[nl + 2 + size + 2..];
    }
    out
}
