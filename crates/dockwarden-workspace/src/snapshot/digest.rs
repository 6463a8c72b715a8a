//! Content hashes as 32 bytes. Inside the store a hash is never a string: manifests,
//! stat indexes, pack indexes and the walk carry `[u8; 32]`; hex appears only at the edges
//! (blob file names, JSON of version 1 manifests, error messages).

/// A content hash: BLAKE3 (version 2 manifests) or SHA-256 (version 1), both 32 bytes.
pub type Digest = [u8; 32];

/// Lowercase hex of a digest (64 digits).
pub fn hex(d: &Digest) -> String {
    crate::hex::encode(d)
}

/// Parses 64 hex digits.
pub fn parse(s: &str) -> Option<Digest> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        let d = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        out[i] = (d(pair[0])? << 4) | d(pair[1])?;
    }
    Some(out)
}

/// Serde as a hex string (the JSON of version 1 manifests and the API).
pub mod serde_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Digest;

    pub fn serialize<S: Serializer>(d: &Digest, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Digest, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(de)?;
        super::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("`{text}` is not a 64-digit hex content hash"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_round_trip_through_hex_and_bad_hex_is_refused() {
        let d = [0xa5u8; 32];
        assert_eq!(parse(&hex(&d)), Some(d));
        assert_eq!(parse(&"AB".repeat(32)), Some([0xab; 32]));
        assert_eq!(parse("ab"), None);
        assert_eq!(parse(&"zz".repeat(32)), None);
        assert_eq!(parse(&"é".repeat(32)), None, "64 bytes, not 64 digits");
    }
}
