//! A small binary encoding for manifests and stat indexes: varints, length-prefixed bytes,
//! paths stored as (length shared with the previous path, new suffix). Every read is
//! bounds-checked; a malformed input is an error, never a panic.

use super::digest::Digest;

/// Appends values to a byte buffer.
#[derive(Default)]
pub(super) struct Writer {
    pub buf: Vec<u8>,
    last_path: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// A path, prefix-compressed against the previous one written.
    #[cfg(test)]
    pub fn path(&mut self, p: &str) {
        self.path_bytes(p.as_bytes());
    }

    /// A path given as bytes; see [`Writer::path`].
    pub fn path_bytes(&mut self, p: &[u8]) {
        let shared = self
            .last_path
            .iter()
            .zip(p)
            .take_while(|(a, b)| a == b)
            .count();
        self.varint(shared as u64);
        self.bytes(&p[shared..]);
        self.last_path.clear();
        self.last_path.extend_from_slice(p);
    }
}

/// Reads values written by [`Writer`].
pub(super) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    last_path: Vec<u8>,
}

/// The input ended early or held an impossible value.
#[derive(Debug)]
pub(super) struct Malformed;

pub(super) type R<T> = Result<T, Malformed>;

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader {
            data,
            pos: 0,
            last_path: Vec::new(),
        }
    }

    pub fn done(&self) -> bool {
        self.pos == self.data.len()
    }

    pub fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Malformed)?;
        let s = self.data.get(self.pos..end).ok_or(Malformed)?;
        self.pos = end;
        Ok(s)
    }

    pub fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn varint(&mut self) -> R<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Malformed)
    }

    pub fn u32(&mut self) -> R<u32> {
        u32::try_from(self.varint()?).map_err(|_| Malformed)
    }

    pub fn usize(&mut self) -> R<usize> {
        usize::try_from(self.varint()?).map_err(|_| Malformed)
    }

    pub fn i64(&mut self) -> R<i64> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| Malformed)?;
        Ok(i64::from_le_bytes(b))
    }

    pub fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.usize()?;
        self.take(n)
    }

    pub fn string(&mut self) -> R<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| Malformed)
    }

    pub fn path(&mut self) -> R<String> {
        self.path_bytes()?;
        String::from_utf8(self.last_path.clone()).map_err(|_| Malformed)
    }

    /// The next path as bytes, borrowed until the next read (no allocation).
    pub fn path_bytes(&mut self) -> R<&[u8]> {
        let shared = self.usize()?;
        if shared > self.last_path.len() {
            return Err(Malformed);
        }
        let suffix = self.bytes()?;
        self.last_path.truncate(shared);
        self.last_path.extend_from_slice(suffix);
        Ok(&self.last_path)
    }

    /// A 32-byte content hash.
    pub fn digest(&mut self) -> R<Digest> {
        self.take(32)?.try_into().map_err(|_| Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_truncation_is_an_error() {
        let mut w = Writer::default();
        w.varint(300);
        w.i64(-5);
        w.path("a/b/c");
        w.path("a/b/d");
        w.bytes(b"xyz");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.varint().ok(), Some(300));
        assert_eq!(r.i64().ok(), Some(-5));
        assert_eq!(r.path().ok().as_deref(), Some("a/b/c"));
        assert_eq!(r.path().ok().as_deref(), Some("a/b/d"));
        assert_eq!(r.bytes().ok(), Some(&b"xyz"[..]));
        assert!(r.done());
        let short = &w.buf[..w.buf.len() - 1];
        let mut r = Reader::new(short);
        let _ = (r.varint(), r.i64(), r.path(), r.path());
        assert!(r.bytes().is_err());
    }
}
