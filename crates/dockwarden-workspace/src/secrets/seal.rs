//! The sealed form of a value at rest: XChaCha20-Poly1305 under the service's key, bound to
//! its row by associated data, written as self-describing text `dwseal1:<base64>`.
//!
//! INVARIANT: every seal draws a fresh random 24-byte nonce (XChaCha's nonce is long enough
//! for random nonces never to repeat under one key in practice).
//! INVARIANT: `open` returns bytes only when the tag verifies under this key and exactly
//! the associated data given, so a value copied to another row does not open.

use base64::Engine;
use chacha20poly1305::aead::{Aead, Generate, Payload};
use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

/// The prefix of every value sealed by this version.
pub const PREFIX: &str = "dwseal1:";
/// Bytes of a key.
pub const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

/// Why a sealed value did not open, or a value could not be sealed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("the sealed value is not valid base64 or too short")]
    Malformed,
    /// Wrong key, other associated data, or changed bytes: AEAD cannot tell them apart.
    #[error(
        "the sealed value does not open under this key (wrong key, another row's value, or altered bytes)"
    )]
    Unauthentic,
    #[error("no randomness from the system: {0}")]
    Random(String),
}

/// How a stored value is written.
#[derive(Debug, PartialEq, Eq)]
pub enum Form<'a> {
    /// JSON text written by a version that stored secrets in plain text.
    Plain(&'a str),
    /// Sealed by this version: the base64 after the prefix.
    Sealed(&'a str),
    /// Neither: a later version's seal (`dwseal2:`...) or damage; never guessed at.
    Unknown(&'a str),
}

/// Tells the forms apart by their first bytes: plain text was always a JSON object.
pub fn form(stored: &str) -> Form<'_> {
    if let Some(rest) = stored.strip_prefix(PREFIX) {
        Form::Sealed(rest)
    } else if stored.starts_with('{') {
        Form::Plain(stored)
    } else {
        // Named in messages: the version tag, at most 16 characters of it.
        let tag = stored.split(':').next().unwrap_or_default();
        let end = tag.char_indices().nth(16).map_or(tag.len(), |(i, _)| i);
        Form::Unknown(&tag[..end])
    }
}

/// The service's secrets key. The cipher wipes its copy of the key when dropped.
pub struct SealKey(XChaCha20Poly1305);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

impl SealKey {
    /// A key from its 32 bytes; `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<SealKey> {
        XChaCha20Poly1305::new_from_slice(bytes).ok().map(SealKey)
    }

    /// Fresh key bytes from the system's random source.
    pub fn generate() -> Result<Zeroizing<[u8; KEY_LEN]>, SealError> {
        let key =
            chacha20poly1305::Key::try_generate().map_err(|e| SealError::Random(e.to_string()))?;
        let mut out = Zeroizing::new([0u8; KEY_LEN]);
        out.copy_from_slice(key.as_slice());
        Ok(out)
    }

    /// Seals `plain` for the row named by `ad`.
    pub fn seal(&self, ad: &[u8], plain: &[u8]) -> Result<String, SealError> {
        let nonce = XNonce::try_generate().map_err(|e| SealError::Random(e.to_string()))?;
        let sealed = self
            .0
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: ad,
                },
            )
            // Only a message over the cipher's 256 GiB limit fails.
            .map_err(|_| SealError::Malformed)?;
        let mut blob = Vec::with_capacity(NONCE_LEN + sealed.len());
        blob.extend_from_slice(nonce.as_slice());
        blob.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{}", B64.encode(blob)))
    }

    /// Opens a value sealed for the row named by `ad` (the whole stored text, prefix included).
    pub fn open(&self, ad: &[u8], stored: &str) -> Result<Zeroizing<Vec<u8>>, SealError> {
        let Form::Sealed(b64) = form(stored) else {
            return Err(SealError::Malformed);
        };
        let blob = B64.decode(b64).map_err(|_| SealError::Malformed)?;
        if blob.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, sealed) = blob.split_at(NONCE_LEN);
        let nonce = XNonce::try_from(nonce).map_err(|_| SealError::Malformed)?;
        self.0
            .decrypt(
                &nonce,
                Payload {
                    msg: sealed,
                    aad: ad,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| SealError::Unauthentic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealKey {
        SealKey::from_bytes(&*SealKey::generate().expect("random")).expect("key")
    }

    #[test]
    fn a_sealed_value_opens_under_its_key_and_row() {
        let k = key();
        let s = k.seal(b"row-a", b"{\"TOKEN\":\"hunter2\"}").expect("seal");
        assert!(s.starts_with(PREFIX), "{s}");
        assert!(!s.contains("hunter2"));
        assert_eq!(
            &**k.open(b"row-a", &s).expect("open"),
            b"{\"TOKEN\":\"hunter2\"}"
        );
    }

    #[test]
    fn two_seals_of_one_value_differ_by_their_nonce() {
        let k = key();
        assert_ne!(
            k.seal(b"r", b"v").expect("seal"),
            k.seal(b"r", b"v").expect("seal")
        );
    }

    #[test]
    fn a_flipped_bit_anywhere_in_the_sealed_bytes_does_not_open() {
        let k = key();
        let s = k.seal(b"r", b"value").expect("seal");
        let blob = B64.decode(&s[PREFIX.len()..]).expect("b64");
        for i in 0..blob.len() {
            let mut bad = blob.clone();
            bad[i] ^= 0x01;
            let bad = format!("{PREFIX}{}", B64.encode(&bad));
            assert_eq!(
                k.open(b"r", &bad).map(|_| ()),
                Err(SealError::Unauthentic),
                "byte {i}"
            );
        }
    }

    #[test]
    fn another_key_does_not_open() {
        let s = key().seal(b"r", b"value").expect("seal");
        assert_eq!(
            key().open(b"r", &s).map(|_| ()),
            Err(SealError::Unauthentic)
        );
    }

    #[test]
    fn a_value_moved_to_another_rows_associated_data_does_not_open() {
        let k = key();
        let s = k.seal(b"workspace a", b"value").expect("seal");
        assert_eq!(
            k.open(b"workspace b", &s).map(|_| ()),
            Err(SealError::Unauthentic)
        );
    }

    #[test]
    fn truncated_or_non_base64_values_are_malformed() {
        let k = key();
        for bad in ["dwseal1:", "dwseal1:AAAA", "dwseal1:!!!!", "{\"A\":\"b\"}"] {
            assert_eq!(
                k.open(b"r", bad).map(|_| ()),
                Err(SealError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn forms_are_told_apart_by_their_first_bytes() {
        assert_eq!(form("{}"), Form::Plain("{}"));
        assert_eq!(form("dwseal1:abc"), Form::Sealed("abc"));
        assert_eq!(form("dwseal2:abc"), Form::Unknown("dwseal2"));
        assert_eq!(form(""), Form::Unknown(""));
    }

    #[test]
    fn keys_of_the_wrong_length_are_refused() {
        assert!(SealKey::from_bytes(&[0u8; 31]).is_none());
        assert!(SealKey::from_bytes(&[0u8; 33]).is_none());
        assert!(SealKey::from_bytes(&[0u8; 32]).is_some());
    }
}
