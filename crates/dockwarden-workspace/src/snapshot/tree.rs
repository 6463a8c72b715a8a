//! Tree objects: a manifest as one content-addressed object per directory, git-like, so
//! that an unchanged subtree costs a snapshot one reference and no bytes.
//!
//! A tree lists one directory's entries, sorted by name: directories (mode, mtime and the
//! hash of their own tree), files (mode, size, mtime, content hash) and symlinks (target,
//! mtime). Its hash is the BLAKE3 of its encoding, so a root hash vouches for the whole
//! snapshot (a Merkle tree): every tree is checked against its hash as it is loaded.
//! The snapshot's record in `manifests/` ([`Root`]) names the root tree and the number of
//! entries, which bounds what a load may produce.
//!
//! This module is pure: [`build`] turns a capture's entries into trees, [`expand`] turns a
//! root back into entries through a lookup the caller provides (`tree_io.rs` reads packs).

use std::collections::HashMap;
use std::ops::Range;

use super::codec::{Malformed, R, Reader, Writer};
use super::digest::Digest;
use super::manifest::{Entry, EntryKind};

const TREE_MAGIC: &[u8; 4] = b"DWT\x01";
/// A snapshot's record: the root of its trees (manifest version 3).
pub(super) const ROOT_MAGIC: &[u8; 4] = b"DWM\x03";
const TAG_DIR: u8 = 0;
const TAG_FILE: u8 = 1;
const TAG_SYMLINK: u8 = 2;

/// One snapshot's record in `manifests/`: small, whatever the tree's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Root {
    pub id: String,
    pub created_at_ms: u64,
    pub root_mode: u32,
    /// Entries below the root, in all (dirs, files, symlinks).
    pub entries: u64,
    pub tree: Digest,
}

impl Root {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.raw(ROOT_MAGIC);
        w.bytes(self.id.as_bytes());
        w.varint(self.created_at_ms);
        w.varint(u64::from(self.root_mode));
        w.varint(self.entries);
        w.raw(&self.tree);
        w.buf
    }

    pub fn decode(body: &[u8]) -> R<Root> {
        let rest = body.strip_prefix(ROOT_MAGIC).ok_or(Malformed)?;
        let mut r = Reader::new(rest);
        let root = Root {
            id: r.string()?,
            created_at_ms: r.varint()?,
            root_mode: r.u32()?,
            entries: r.varint()?,
            tree: r.digest()?,
        };
        if !r.done() {
            return Err(Malformed);
        }
        Ok(root)
    }
}

/// The trees of one capture: their encodings in one buffer, each tree once.
#[derive(Debug, Default)]
pub(super) struct Built {
    pub root: Digest,
    pub buf: Vec<u8>,
    /// Hash of each distinct tree and where its encoding is in `buf`; children first.
    pub objects: Vec<(Digest, Range<usize>)>,
}

impl Built {
    pub fn bytes(&self, range: &Range<usize>) -> &[u8] {
        &self.buf[range.clone()]
    }
}

/// Why entries do not make a tree.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum BuildError {
    /// An entry's parent is not a directory entry.
    Orphan(String),
    /// A path listed twice.
    Duplicate(String),
}

/// `(parent, name)` of a relative path.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// Builds the trees of `entries` (any order; every parent directory listed). Pure.
pub(super) fn build(entries: &[Entry]) -> Result<Built, BuildError> {
    // Each directory gets a slot (the root is slot 0); its children are (name, index of
    // the entry), split once.
    let mut slot_of: HashMap<&str, usize> = HashMap::new();
    let mut dirs: Vec<&str> = vec![""];
    slot_of.insert("", 0);
    for e in entries {
        if matches!(e.kind, EntryKind::Dir { .. }) {
            slot_of.entry(e.path.as_str()).or_insert_with(|| {
                dirs.push(e.path.as_str());
                dirs.len() - 1
            });
        }
    }
    let mut children: Vec<Vec<(&str, usize)>> = vec![Vec::new(); dirs.len()];
    // A capture lists a directory's entries together: the parent is usually the last one.
    let mut last: Option<(&str, usize)> = None;
    for (i, e) in entries.iter().enumerate() {
        let (parent, name) = split(&e.path);
        let slot = match last {
            Some((p, slot)) if p == parent => slot,
            _ => *slot_of
                .get(parent)
                .ok_or_else(|| BuildError::Orphan(e.path.clone()))?,
        };
        last = Some((parent, slot));
        children[slot].push((name, i));
    }
    // Deepest first: a directory's subtrees are hashed before it is encoded. Each depth
    // counted once (a key function would count it at every comparison).
    let mut order: Vec<(usize, usize)> = dirs.iter().map(|d| depth(d)).zip(0..).collect();
    order.sort_unstable_by_key(|&(depth, _)| std::cmp::Reverse(depth));
    let mut hashes: Vec<Digest> = vec![Digest::default(); dirs.len()];
    let mut seen = std::collections::HashSet::with_capacity(dirs.len());
    let mut out = Built::default();
    for (_, slot) in order {
        let mut kids = std::mem::take(&mut children[slot]);
        // A walk lists each directory in name order: usually nothing to sort.
        if !kids.is_sorted_by(|a, b| a.0 < b.0) {
            kids.sort_unstable_by(|a, b| a.0.cmp(b.0));
            if let Some(w) = kids.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(BuildError::Duplicate(entries[w[0].1].path.clone()));
            }
        }
        let start = out.buf.len();
        let mut w = Writer::default();
        w.buf = std::mem::take(&mut out.buf);
        w.raw(TREE_MAGIC);
        w.varint(kids.len() as u64);
        for &(name, k) in &kids {
            let e = &entries[k];
            w.bytes(name.as_bytes());
            match &e.kind {
                EntryKind::Dir { mode, mtime_ns } => {
                    w.u8(TAG_DIR);
                    w.varint(u64::from(*mode));
                    w.i64(*mtime_ns);
                    let sub = slot_of
                        .get(e.path.as_str())
                        .map(|&s| hashes[s])
                        .unwrap_or_default();
                    w.raw(&sub);
                }
                leaf => super::manifest::write_leaf(&mut w, leaf, TAG_FILE, TAG_SYMLINK),
            }
        }
        out.buf = w.buf;
        let hash = *blake3::hash(&out.buf[start..]).as_bytes();
        hashes[slot] = hash;
        if seen.insert(hash) {
            out.objects.push((hash, start..out.buf.len()));
        } else {
            // The same tree again (empty directories, identical packages): one object.
            out.buf.truncate(start);
        }
    }
    out.root = hashes[0];
    Ok(out)
}

fn depth(path: &str) -> usize {
    if path.is_empty() {
        0
    } else {
        1 + path.matches('/').count()
    }
}

/// One decoded entry of a tree: its path (the tree's prefix and its name) and kind (a
/// directory's hash beside it).
struct Item {
    path: String,
    kind: EntryKind,
    subtree: Option<Digest>,
}

/// True if `name` is one path component a restore may create.
fn safe_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

/// Decodes one tree whose directory is `prefix` ("" for the root); names must be safe and
/// strictly increasing. Each path is allocated once, whole.
fn decode(body: &[u8], prefix: &str) -> R<Vec<Item>> {
    let rest = body.strip_prefix(TREE_MAGIC).ok_or(Malformed)?;
    let mut r = Reader::new(rest);
    let n = r.usize()?;
    let mut items: Vec<Item> = Vec::with_capacity(n.min(rest.len() / 12));
    let mut last: Option<&[u8]> = None;
    for _ in 0..n {
        let raw = r.bytes()?;
        let name = std::str::from_utf8(raw).map_err(|_| Malformed)?;
        if !safe_name(name) || last.is_some_and(|p| p >= raw) {
            return Err(Malformed);
        }
        last = Some(raw);
        let mut path = String::with_capacity(prefix.len() + 1 + name.len());
        if !prefix.is_empty() {
            path.push_str(prefix);
            path.push('/');
        }
        path.push_str(name);
        let (kind, subtree) = match r.u8()? {
            TAG_DIR => {
                let kind = EntryKind::Dir {
                    mode: r.u32()?,
                    mtime_ns: r.i64()?,
                };
                (kind, Some(r.digest()?))
            }
            TAG_FILE => {
                let mode = r.u32()?;
                let size = r.varint()?;
                let mtime_ns = r.i64()?;
                let hash = r.digest()?;
                let kind = EntryKind::File {
                    mode,
                    size,
                    hash,
                    mtime_ns,
                };
                (kind, None)
            }
            TAG_SYMLINK => {
                let target = r.string()?;
                let kind = EntryKind::Symlink {
                    target,
                    mtime_ns: r.i64()?,
                };
                (kind, None)
            }
            _ => return Err(Malformed),
        };
        items.push(Item {
            path,
            kind,
            subtree,
        });
    }
    if !r.done() {
        return Err(Malformed);
    }
    Ok(items)
}

/// Why a root does not expand.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ExpandError {
    /// The lookup failed (missing, unreadable or failing its hash); its message.
    Object(String),
    /// A tree does not decode.
    Malformed(Digest),
    /// More or fewer entries than the root says.
    Count { want: u64, found: u64 },
}

/// The entries below `root` in path order (directories before their children), and every
/// tree hash met (for garbage collection). `get` returns a tree's bytes, checked against
/// its hash. Fails if the trees hold other than `root.entries` entries (a damaged or
/// hostile store cannot make a load grow without bound). Pure.
pub(super) fn expand(
    root: &Root,
    mut get: impl FnMut(&Digest) -> Result<Vec<u8>, String>,
) -> Result<(Vec<Entry>, Vec<Digest>), ExpandError> {
    let cap = usize::try_from(root.entries).unwrap_or(usize::MAX);
    let mut entries: Vec<Entry> = Vec::with_capacity(cap.min(1 << 24));
    let mut trees = vec![root.tree];
    let mut load = |hash: &Digest, prefix: &str| -> Result<Vec<Item>, ExpandError> {
        let body = get(hash).map_err(ExpandError::Object)?;
        decode(&body, prefix).map_err(|Malformed| ExpandError::Malformed(*hash))
    };
    // Depth first, each directory's items in name order: nearly path order already.
    let mut stack: Vec<std::vec::IntoIter<Item>> = vec![load(&root.tree, "")?.into_iter()];
    while let Some(items) = stack.last_mut() {
        let Some(item) = items.next() else {
            stack.pop();
            continue;
        };
        if entries.len() as u64 >= root.entries {
            return Err(ExpandError::Count {
                want: root.entries,
                found: root.entries + 1,
            });
        }
        if let Some(sub) = item.subtree {
            trees.push(sub);
            stack.push(load(&sub, &item.path)?.into_iter());
        }
        entries.push(Entry {
            path: item.path,
            kind: item.kind,
        });
    }
    if entries.len() as u64 != root.entries {
        return Err(ExpandError::Count {
            want: root.entries,
            found: entries.len() as u64,
        });
    }
    // `a/x` sorts after `a-b`: a stable sort (linear on these long sorted runs) gives byte
    // order, as version 2 manifests had.
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    trees.sort_unstable();
    trees.dedup();
    Ok((entries, trees))
}
