//! Lowercase hex, the one encoder of the crate: digests in blob names and manifests, random
//! ids.

/// Lowercase hex of `bytes`, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Bytes first, one UTF-8 check at the end: cheaper than a `char` push per digit, and
    // this runs twice per file when a manifest and an index are loaded.
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0xf)]);
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::encode;

    #[test]
    fn hex_is_lowercase_and_two_digits_a_byte() {
        assert_eq!(encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(encode(&[]), "");
    }
}
