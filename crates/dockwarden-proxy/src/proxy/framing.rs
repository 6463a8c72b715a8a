//! A byte-level witness of request framing, because hyper normalises what it parses.
//!
//! hyper drops `Content-Length` when `Transfer-Encoding` is present and folds repeated equal
//! `Content-Length` headers into one, so the service cannot see that a request was framed
//! ambiguously. This wrapper watches the bytes hyper reads, finds each request head with
//! `httparse` (hyper's own parser), follows its body framing to find the next head, and records
//! the index of every head whose framing is ambiguous. The handler refuses those with 400.

use std::collections::HashSet;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::rt::{Read, ReadBufCursor, Write};

/// Which requests on one connection (0-based, in order) had ambiguous framing.
#[derive(Clone, Default)]
pub struct Verdicts(Arc<Mutex<HashSet<u64>>>);

impl Verdicts {
    pub fn is_ambiguous(&self, index: u64) -> bool {
        self.0.lock().map(|s| s.contains(&index)).unwrap_or(true)
    }
    fn mark(&self, index: u64) {
        if let Ok(mut s) = self.0.lock() {
            s.insert(index);
        }
    }
}

enum State {
    Head(Vec<u8>),
    Body(u64),
    ChunkSize(Vec<u8>),
    ChunkData(u64),
    ChunkEnd(u8),
    Trailers(Vec<u8>),
    /// After an upgrade request or a parse failure: hyper decides from here on.
    Done,
}

/// Largest head we buffer while looking for its end (hyper's own limit is lower).
const MAX_HEAD: usize = 512 * 1024;

/// The framing tracker. Feed it every byte read from the client, in order.
pub struct Tracker {
    state: State,
    index: u64,
    verdicts: Verdicts,
}

impl Tracker {
    pub fn new(verdicts: Verdicts) -> Self {
        Self {
            state: State::Head(Vec::new()),
            index: 0,
            verdicts,
        }
    }

    pub fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            data = match &mut self.state {
                State::Done => return,
                State::Head(buf)
                    if buf.is_empty()
                        && let Some(end) = whole_head(data) =>
                {
                    // The whole head in this read: parsed where it lies, not copied.
                    self.state = self.on_head(&data[..end]);
                    &data[end..]
                }
                State::Head(buf) => {
                    let (line_done, used) = take_until_blank_line(buf, data);
                    if line_done {
                        let head = std::mem::take(buf);
                        self.state = self.on_head(&head);
                    } else if buf.len() > MAX_HEAD {
                        self.state = State::Done;
                    }
                    &data[used..]
                }
                State::Body(n) => {
                    let k = (*n).min(data.len() as u64) as usize;
                    *n -= k as u64;
                    if *n == 0 {
                        self.next_head();
                    }
                    &data[k..]
                }
                State::ChunkSize(line) => {
                    let Some(pos) = data.iter().position(|&b| b == b'\n') else {
                        line.extend_from_slice(data);
                        return;
                    };
                    line.extend_from_slice(&data[..pos]);
                    let size = parse_chunk_size(line);
                    self.state = match size {
                        Some(0) => State::Trailers(Vec::new()),
                        Some(n) => State::ChunkData(n),
                        None => State::Done,
                    };
                    &data[pos + 1..]
                }
                State::ChunkData(n) => {
                    let k = (*n).min(data.len() as u64) as usize;
                    *n -= k as u64;
                    if *n == 0 {
                        self.state = State::ChunkEnd(2);
                    }
                    &data[k..]
                }
                State::ChunkEnd(left) => {
                    // CRLF after the chunk data (a bare LF is tolerated like Go).
                    let b = data[0];
                    *left -= 1;
                    if b == b'\n' || *left == 0 {
                        self.state = State::ChunkSize(Vec::new());
                    }
                    &data[1..]
                }
                State::Trailers(buf) => {
                    // Trailers end with an empty line; with none, the next byte pair is CRLF.
                    buf.extend_from_slice(data);
                    match find_trailer_end(buf) {
                        Some(end) => {
                            let rest = buf.split_off(end);
                            self.next_head();
                            self.feed(&rest);
                            return;
                        }
                        None => return,
                    }
                }
            };
        }
    }

    /// Whether the next bytes belong to a request body (or come after an upgrade).
    pub fn in_body(&self) -> bool {
        !matches!(self.state, State::Head(_))
    }

    fn next_head(&mut self) {
        self.index += 1;
        self.state = State::Head(Vec::new());
    }

    fn on_head(&mut self, head: &[u8]) -> State {
        // Uninitialised slots: httparse fills what it parses (zeroing 128 headers per request
        // was a measurable part of the watcher's cost).
        let mut hs = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; 128];
        let mut req = httparse::Request::new(&mut []);
        let Ok(httparse::Status::Complete(_)) = req.parse_with_uninit_headers(head, &mut hs) else {
            return State::Done;
        };
        let (mut cls, mut first_cl, mut tes, mut upgrade) = (0usize, None, 0, false);
        for h in req.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                cls += 1;
                first_cl.get_or_insert(h.value);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                tes += 1;
            } else if h.name.eq_ignore_ascii_case("upgrade") {
                upgrade = true;
            }
        }
        if cls > 1 || (tes > 0 && cls > 0) || tes > 1 {
            self.verdicts.mark(self.index);
        }
        if upgrade {
            return State::Done;
        }
        if tes > 0 {
            return State::ChunkSize(Vec::new());
        }
        let len = match first_cl {
            None => 0,
            Some(v) => match std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
            {
                Some(n) => n,
                None => return State::Done,
            },
        };
        if len == 0 {
            self.index += 1;
            State::Head(Vec::new())
        } else {
            State::Body(len)
        }
    }
}

/// The length of the head at the start of `data` when all of it is there, for the common
/// case of a read that starts with a request line (no leading empty lines): the head ends at
/// the first `\n` that closes `\n\n` or `\r\n\r\n`.
fn whole_head(data: &[u8]) -> Option<usize> {
    if !data.first().is_some_and(|b| *b != b'\r' && *b != b'\n') {
        return None;
    }
    let mut from = 0;
    while let Some(off) = data[from..].iter().position(|&b| b == b'\n') {
        let i = from + off;
        if (i >= 1 && data[i - 1] == b'\n') || (i >= 3 && &data[i - 3..i] == b"\r\n\r") {
            return Some(i + 1);
        }
        from = i + 1;
    }
    None
}

/// Appends bytes to `buf` until the head's blank line; returns (found, bytes consumed).
fn take_until_blank_line(buf: &mut Vec<u8>, data: &[u8]) -> (bool, usize) {
    for (i, &b) in data.iter().enumerate() {
        buf.push(b);
        if b == b'\n' && (buf.ends_with(b"\r\n\r\n") || buf.ends_with(b"\n\n")) {
            // Skip empty lines before a request line, as Go and hyper do.
            if buf.iter().all(|c| *c == b'\r' || *c == b'\n') {
                buf.clear();
                continue;
            }
            return (true, i + 1);
        }
    }
    (false, data.len())
}

fn parse_chunk_size(line: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let hex = s.split(';').next()?.trim();
    u64::from_str_radix(hex, 16).ok()
}

fn find_trailer_end(buf: &[u8]) -> Option<usize> {
    if buf.starts_with(b"\r\n") {
        return Some(2);
    }
    if buf.starts_with(b"\n") {
        return Some(1);
    }
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Scratch per connection between requests, and at most inside a request body.
const SCRATCH: usize = 16 * 1024;
const MAX_SCRATCH: usize = 256 * 1024;

/// The client connection, watched by a [`Tracker`].
pub struct Watched<T> {
    inner: T,
    tracker: Tracker,
    scratch: Vec<u8>,
}

impl<T> Watched<T> {
    pub fn new(inner: T, verdicts: Verdicts) -> Self {
        Self {
            inner,
            tracker: Tracker::new(verdicts),
            scratch: vec![0u8; SCRATCH],
        }
    }

    /// The connection itself, for a tunnel after a protocol switch (nothing left to watch).
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: Read + Unpin> Read for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Inside a body (an upload) hyper asks for more than 16 KiB at a time: let it have up to
        // 256 KiB per read, so a `docker cp` or build context moves in large frames. Back at a
        // head, the scratch shrinks again (1,000 idle `/events` connections stay small).
        let want = buf.remaining();
        if this.tracker.in_body() {
            if want > this.scratch.len() && this.scratch.len() < MAX_SCRATCH {
                this.scratch.resize(want.min(MAX_SCRATCH), 0);
            }
        } else if this.scratch.len() > SCRATCH {
            this.scratch = vec![0u8; SCRATCH];
        }
        // Read into a scratch buffer so the bytes can be observed before hyper sees them.
        let n = want.min(this.scratch.len());
        let mut rb = hyper::rt::ReadBuf::new(&mut this.scratch[..n]);
        match Pin::new(&mut this.inner).poll_read(cx, rb.unfilled()) {
            Poll::Ready(Ok(())) => {
                let filled = rb.filled();
                this.tracker.feed(filled);
                buf.put_slice(filled);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<T: Write + Unpin> Write for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ambiguous(stream: &[u8], chunk: usize) -> Vec<u64> {
        let v = Verdicts::default();
        let mut t = Tracker::new(v.clone());
        for part in stream.chunks(chunk) {
            t.feed(part);
        }
        let mut out: Vec<u64> = (0..8).filter(|i| v.is_ambiguous(*i)).collect();
        out.sort_unstable();
        out
    }

    #[test]
    fn flags_cl_with_te_and_duplicate_cl_in_pipelined_requests() {
        let s = b"GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n\
POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd\
POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
POST /c HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
POST /d HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}\
GET /e HTTP/1.1\r\n\r\n";
        for chunk in [1, 3, 7, 4096] {
            assert_eq!(ambiguous(s, chunk), vec![3, 4], "chunk size {chunk}");
        }
    }

    #[test]
    fn stops_at_an_upgrade() {
        let s = b"POST /x/attach HTTP/1.1\r\nUpgrade: tcp\r\n\r\nPOST /c HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(ambiguous(s, 5).is_empty());
    }
}
