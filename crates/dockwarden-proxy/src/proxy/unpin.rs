//! Container inspect and list answers show the workspace path a pin was made from, not the
//! pin: `Mounts[].Source`, `HostConfig.Binds` and `HostConfig.Mounts[].Source`. Clients
//! compare what they asked for with what they get back (docker-py's bind tests, Compose's
//! diffing, IDEs), and the pin path means nothing to them. `--show-pins` turns this off for
//! reviewers; the daemon itself and the proxy's own look-ups always see the pins.
//!
//! The body is rewritten as it streams, whatever its size: each pin path, a string value or
//! the source part of a `Binds` entry (followed by `"` or `:`), becomes the JSON-escaped
//! source. Pin paths are `<pin dir>/<hex>-<n>` (no character JSON escapes), so they appear
//! byte for byte in the daemon's JSON. Only bytes that could still become a pin path are held
//! back between chunks.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use hyper::body::{Body, Frame};

use super::body::ProxyBody;

/// Pin path → the JSON-escaped workspace path it was made from.
#[derive(Debug, Clone, Default)]
pub struct PinMap {
    /// `<pin dir>/`.
    prefix: Vec<u8>,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn is_name(b: u8) -> bool {
    b.is_ascii_hexdigit() || b == b'-'
}

/// A string's contents as Go's encoder would write them (`"`, `\`, control characters).
fn json_escape(s: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted
        .as_bytes()
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default()
        .to_vec()
}

impl PinMap {
    pub fn new(pin_dir: &str, pins: impl IntoIterator<Item = (String, String)>) -> Self {
        let prefix = format!("{}/", pin_dir.trim_end_matches('/')).into_bytes();
        let map = pins
            .into_iter()
            .filter(|(_, src)| src.starts_with('/'))
            .map(|(pin, src)| (pin.into_bytes(), json_escape(&src)))
            .collect();
        Self { prefix, map }
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Rewrites `buf`; returns the output and how many input bytes it covers. Without `eof`,
    /// a tail that could still grow into a pin path is left for the next call.
    pub fn rewrite(&self, buf: &[u8], eof: bool) -> (Vec<u8>, usize) {
        let p = &self.prefix;
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        let mut copied = 0;
        while let Some(off) = find(&buf[i..], p) {
            let start = i + off;
            let mut end = start + p.len();
            while end < buf.len() && is_name(buf[end]) {
                end += 1;
            }
            if end == buf.len() && !eof {
                out.extend_from_slice(&buf[copied..start]);
                return (out, start);
            }
            let ends_token = matches!(buf.get(end), Some(b'"') | Some(b':'));
            if let (true, Some(src)) = (ends_token, self.map.get(&buf[start..end])) {
                out.extend_from_slice(&buf[copied..start]);
                out.extend_from_slice(src);
                copied = end;
            }
            i = end;
        }
        // Hold back a tail that is a proper prefix of `<pin dir>/`.
        let keep = if eof {
            0
        } else {
            (1..p.len())
                .rev()
                .find(|&k| k <= buf.len() && buf[buf.len() - k..] == p[..k])
                .unwrap_or(0)
        };
        let upto = (buf.len() - keep).max(copied);
        out.extend_from_slice(&buf[copied..upto]);
        (out, upto)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A response body with pin paths rewritten (see the module docs).
pub struct Unpinned {
    inner: ProxyBody,
    map: PinMap,
    carry: BytesMut,
    trailers: Option<Frame<Bytes>>,
    done: bool,
}

impl Unpinned {
    pub fn new(inner: ProxyBody, map: PinMap) -> Self {
        Self {
            inner,
            map,
            carry: BytesMut::new(),
            trailers: None,
            done: false,
        }
    }

    fn flush(&mut self) -> Option<Frame<Bytes>> {
        let (out, _) = self.map.rewrite(&self.carry, true);
        self.carry.clear();
        (!out.is_empty()).then(|| Frame::data(Bytes::from(out)))
    }
}

impl Body for Unpinned {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => {
                    this.done = true;
                    if let Some(f) = this.flush() {
                        return Poll::Ready(Some(Ok(f)));
                    }
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.carry.extend_from_slice(&data);
                        let (out, used) = this.map.rewrite(&this.carry, false);
                        this.carry.advance(used);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    Err(trailers) => {
                        this.done = true;
                        this.trailers = Some(trailers);
                        if let Some(f) = this.flush() {
                            return Poll::Ready(Some(Ok(f)));
                        }
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> PinMap {
        PinMap::new(
            "/run/dw/pins/ab",
            [
                ("/run/dw/pins/ab/18f-1".to_owned(), "/ws/da\"ta".to_owned()),
                ("/run/dw/pins/ab/18f-10".to_owned(), "/ws/x".to_owned()),
            ],
        )
    }

    const BODY: &str = r#"{"HostConfig":{"Binds":["/run/dw/pins/ab/18f-1:/data:ro"],"Mounts":[{"Source":"/run/dw/pins/ab/18f-10"}]},"Mounts":[{"Source":"/run/dw/pins/ab/18f-1"},{"Source":"/run/dw/pins/ab/18f-2"},{"Source":"/run/dw/pins/ab/18f-1/sub"}]}"#;
    const WANT: &str = r#"{"HostConfig":{"Binds":["/ws/da\"ta:/data:ro"],"Mounts":[{"Source":"/ws/x"}]},"Mounts":[{"Source":"/ws/da\"ta"},{"Source":"/run/dw/pins/ab/18f-2"},{"Source":"/run/dw/pins/ab/18f-1/sub"}]}"#;

    #[test]
    fn pins_become_their_sources_and_nothing_else_changes() {
        let (out, used) = map().rewrite(BODY.as_bytes(), true);
        assert_eq!(String::from_utf8(out).expect("utf8"), WANT);
        assert_eq!(used, BODY.len());
    }

    #[test]
    fn every_split_of_the_stream_gives_the_same_answer() {
        let m = map();
        let b = BODY.as_bytes();
        for cut in 0..=b.len() {
            let mut carry = Vec::new();
            let mut out = Vec::new();
            for part in [&b[..cut], &b[cut..]] {
                carry.extend_from_slice(part);
                let (o, used) = m.rewrite(&carry, false);
                out.extend(o);
                carry.drain(..used);
            }
            out.extend(m.rewrite(&carry, true).0);
            assert_eq!(String::from_utf8(out).expect("utf8"), WANT, "cut at {cut}");
        }
    }
}
