//! A JSON reader that sees a body the way Go's `encoding/json` decodes it into Docker's structs,
//! and refuses the bodies where a faithful reading would be fragile.
//!
//! Go matches object keys to struct fields case-insensitively (with Unicode folding that maps
//! `ſ` to `s` and the Kelvin sign to `k`), lets later duplicate keys win or merge, treats `null`
//! as "leave the zero value", and ignores unknown keys. We keep every key, match fields with the
//! same folding, and **refuse** any object with two fold-equal keys, any key containing `ſ` or
//! `K`, any NUL in a string, invalid UTF-8 and trailing data. What is left has one meaning, and
//! the proxy forwards its own canonical serialisation of it, so the daemon decodes exactly the
//! value the policy judged.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// A decoded JSON value with object keys in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// A JSON object whose keys are unique under Go's field-name folding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object(Vec<(String, Json)>);

/// Why a body was refused, or which field had a type Go would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("malformed JSON body: {0}")]
    Syntax(String),
    #[error("field `{field}` must be {expected}")]
    Type {
        field: String,
        expected: &'static str,
    },
}

/// Go's `foldName` restricted to what survives our key check: ASCII letters upper-cased.
/// (Keys holding the only non-ASCII runes that fold to ASCII, `ſ` and `K`, are refused.)
pub fn fold(key: &str) -> String {
    key.to_ascii_uppercase()
}

/// `fold(a) == fold(b)` without allocating.
pub fn fold_eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Objects with more keys than this check duplicates through a hash set of folded keys;
/// smaller ones scan the keys already read, which allocates nothing.
const LINEAR_DUP_CHECK: usize = 16;

/// Parses a whole body. Trailing non-whitespace, invalid UTF-8, lone surrogates, NUL in
/// strings, fold-equal duplicate keys and keys containing `ſ`/`K` are all refused.
pub fn parse(body: &[u8]) -> Result<Json, DecodeError> {
    serde_json::from_slice::<Json>(body).map_err(|e| DecodeError::Syntax(e.to_string()))
}

impl Json {
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// The canonical bytes the proxy forwards in place of the client's body.
    pub fn to_bytes(&self) -> Vec<u8> {
        // INVARIANT: serialising our own tree cannot fail (no maps with non-string keys).
        serde_json::to_vec(self).unwrap_or_default()
    }

    fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

impl Object {
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Looks up a struct field the way Go does (exact, else folded; both give one key here).
    pub fn get(&self, field: &str) -> Option<&Json> {
        self.0
            .iter()
            .find(|(k, _)| fold_eq(k, field))
            .map(|(_, v)| v)
    }

    /// Mutable access to a struct field, matched like [`Object::get`].
    pub fn get_mut(&mut self, field: &str) -> Option<&mut Json> {
        self.0
            .iter_mut()
            .find(|(k, _)| fold_eq(k, field))
            .map(|(_, v)| v)
    }

    /// Appends an entry whose key is known not to fold-equal any present key (it comes from
    /// another object that was already checked). Cheaper than [`Object::set`].
    pub(crate) fn push_unique(&mut self, key: &str, value: Json) {
        debug_assert!(self.get(key).is_none(), "push_unique with a present key");
        self.0.push((key.to_owned(), value));
    }

    /// The value of a field, with `null` treated as absent (Go leaves the zero value).
    pub fn field(&self, field: &str) -> Option<&Json> {
        self.get(field).filter(|v| !v.is_null())
    }

    /// Replaces the field (matching by fold) or appends it.
    pub fn set(&mut self, field: &str, value: Json) {
        match self.0.iter_mut().find(|(k, _)| fold_eq(k, field)) {
            Some(slot) => slot.1 = value,
            None => self.0.push((field.to_owned(), value)),
        }
    }

    pub fn remove(&mut self, field: &str) {
        self.0.retain(|(k, _)| !fold_eq(k, field));
    }

    /// Entries in document order, keys exactly as sent (Go map keys are not folded).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn bool(&self, field: &str) -> Result<Option<bool>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(type_err(field, "a boolean")),
        }
    }

    pub fn str(&self, field: &str) -> Result<Option<&str>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s)),
            Some(_) => Err(type_err(field, "a string")),
        }
    }

    /// An integer field; `1.0`, `1e3` and out-of-range values are errors, as in Go.
    ///
    /// Stricter than Go in one spot: `-0` is refused (Go reads 0), because serde_json hands us
    /// `-0` as the float `-0.0` and it cannot be told apart from `-0.0`, which Go refuses.
    pub fn int(&self, field: &str) -> Result<Option<i64>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Number(n)) => n
                .as_i64()
                .map(Some)
                .ok_or_else(|| type_err(field, "an integer")),
            Some(_) => Err(type_err(field, "an integer")),
        }
    }

    pub fn object(&self, field: &str) -> Result<Option<&Object>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Object(o)) => Ok(Some(o)),
            Some(_) => Err(type_err(field, "an object")),
        }
    }

    /// A `[]string` field. `None` is absent or null (Go's nil slice); `Some(vec![])` is an
    /// explicit empty list, which matters for fields such as `MaskedPaths`.
    pub fn str_list(&self, field: &str) -> Result<Option<Vec<String>>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Array(items)) => items
                .iter()
                .map(|it| match it {
                    Json::String(s) => Ok(s.clone()),
                    Json::Null => Ok(String::new()),
                    _ => Err(type_err(field, "a list of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(type_err(field, "a list of strings")),
        }
    }

    /// A `[]T` field of objects (null elements decode as zero values, i.e. empty objects).
    pub fn object_list(&self, field: &str) -> Result<Option<Vec<Object>>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Array(items)) => items
                .iter()
                .map(|it| match it {
                    Json::Object(o) => Ok(o.clone()),
                    Json::Null => Ok(Object::new()),
                    _ => Err(type_err(field, "a list of objects")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(type_err(field, "a list of objects")),
        }
    }

    /// A `map[string]string` field (null values decode as "").
    pub fn str_map(&self, field: &str) -> Result<Option<Vec<(String, String)>>, DecodeError> {
        match self.field(field) {
            None => Ok(None),
            Some(Json::Object(o)) => o
                .entries()
                .map(|(k, v)| match v {
                    Json::String(s) => Ok((k.to_owned(), s.clone())),
                    Json::Null => Ok((k.to_owned(), String::new())),
                    _ => Err(type_err(field, "an object of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(type_err(field, "an object of strings")),
        }
    }
}

fn type_err(field: &str, expected: &'static str) -> DecodeError {
    DecodeError::Type {
        field: field.to_owned(),
        expected,
    }
}

/// Describes a value's JSON type, for messages.
pub fn describe(v: &Json) -> &'static str {
    v.type_name()
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        check_string(v)?;
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        check_string(&v)?;
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<Json>()? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out: Vec<(String, Json)> = Vec::new();
        // Built only for large objects, so a small body costs no hashing (see LINEAR_DUP_CHECK).
        let mut seen: Option<std::collections::HashSet<String>> = None;
        while let Some(key) = map.next_key::<String>()? {
            check_string(&key)?;
            if !key.is_ascii() && key.contains(['\u{017F}', '\u{212A}']) {
                return Err(de::Error::custom(format!(
                    "key `{key}` contains a rune Go folds to ASCII"
                )));
            }
            let dup = match &mut seen {
                Some(set) => !set.insert(fold(&key)),
                None if out.len() < LINEAR_DUP_CHECK => out.iter().any(|(k, _)| fold_eq(k, &key)),
                None => {
                    let mut set: std::collections::HashSet<String> =
                        out.iter().map(|(k, _)| fold(k)).collect();
                    let dup = !set.insert(fold(&key));
                    seen = Some(set);
                    dup
                }
            };
            if dup {
                return Err(de::Error::custom(format!(
                    "duplicate key `{key}` (keys are case-insensitive)"
                )));
            }
            let v = map.next_value::<Json>()?;
            out.push((key, v));
        }
        Ok(Json::Object(Object(out)))
    }
}

fn check_string<E: de::Error>(s: &str) -> Result<(), E> {
    if s.contains('\0') {
        return Err(E::custom("NUL character in a string"));
    }
    Ok(())
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for it in items {
                    seq.serialize_element(it)?;
                }
                seq.end()
            }
            Json::Object(o) => {
                let mut m = s.serialize_map(Some(o.0.len()))?;
                for (k, v) in &o.0 {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

#[cfg(test)]
mod tests;
