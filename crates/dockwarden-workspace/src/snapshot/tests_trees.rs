//! The pure core of tree objects: build, expand, sharing, refusals.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use super::digest::Digest;
use super::manifest::{Entry, EntryKind};
use super::tree::{Built, ExpandError, Root, build, expand};

fn dir(path: &str, mtime_ns: i64) -> Entry {
    Entry {
        path: path.into(),
        kind: EntryKind::Dir {
            mode: 0o755,
            mtime_ns,
        },
    }
}

fn file(path: &str, h: u8) -> Entry {
    Entry {
        path: path.into(),
        kind: EntryKind::File {
            mode: 0o644,
            size: u64::from(h) * 1000,
            hash: [h; 32],
            mtime_ns: 1_700_000_000_000_000_000 + i64::from(h),
        },
    }
}

fn link(path: &str, target: &str) -> Entry {
    Entry {
        path: path.into(),
        kind: EntryKind::Symlink {
            target: target.into(),
            mtime_ns: 5,
        },
    }
}

/// A tree whose byte order differs from a depth-first walk's (`a-b` sorts between `a`
/// and `a/x`), with an empty directory twice (one shared object).
fn sample() -> Vec<Entry> {
    let mut v = vec![
        dir("a", 1),
        file("a/x", 1),
        dir("a/deep", 2),
        file("a/deep/y", 2),
        file("a-b", 3),
        file("a.js", 4),
        dir("b", 3),
        file("b/z", 5),
        link("b/l", "../a/x"),
        dir("e1", 0),
        dir("e2", 0),
        file("top", 6),
    ];
    v.sort_by(|x, y| x.path.cmp(&y.path));
    v
}

fn objects(b: &Built) -> HashMap<Digest, Vec<u8>> {
    b.objects
        .iter()
        .map(|(h, r)| (*h, b.bytes(r).to_vec()))
        .collect()
}

fn root_of(b: &Built, entries: usize) -> Root {
    Root {
        id: "s".into(),
        created_at_ms: 9,
        root_mode: 0o750,
        entries: entries as u64,
        tree: b.root,
    }
}

#[test]
fn trees_round_trip_in_path_order_whatever_order_they_were_built_from() {
    let want = sample();
    let mut shuffled = want.clone();
    shuffled.reverse();
    shuffled.swap(0, 5);
    let b = build(&shuffled).unwrap();
    let b2 = build(&want).unwrap();
    assert_eq!(b.root, b2.root, "the order of the input does not matter");
    let store = objects(&b);
    // 6 directories (root, a, a/deep, b, e1, e2), the two empty ones one object.
    assert_eq!(store.len(), 5);
    for (h, body) in &store {
        assert_eq!(blake3::hash(body).as_bytes(), h, "named by its hash");
    }
    let (entries, trees) = expand(&root_of(&b, want.len()), |h| {
        store.get(h).cloned().ok_or_else(|| "missing".to_string())
    })
    .unwrap();
    assert_eq!(entries, want);
    let mut all: Vec<Digest> = store.keys().copied().collect();
    all.sort_unstable();
    assert_eq!(trees, all, "every tree met is reported");
    let root = root_of(&b, 12);
    assert_eq!(Root::decode(&root.encode()).unwrap(), root);
    for cut in [0, 4, root.encode().len() - 1] {
        assert!(Root::decode(&root.encode()[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn an_unchanged_subtree_is_the_same_object_and_only_the_changed_path_is_new() {
    let before = sample();
    let mut after = sample();
    for e in &mut after {
        if e.path == "a/deep/y" {
            e.kind = file("a/deep/y", 77).kind;
        }
    }
    let b1 = build(&before).unwrap();
    let b2 = build(&after).unwrap();
    let old = objects(&b1);
    let new: Vec<_> = b2
        .objects
        .iter()
        .filter(|(h, _)| !old.contains_key(h))
        .collect();
    // a/deep, a and the root changed; b, e1/e2 (one object) are shared.
    assert_eq!(new.len(), 3, "only the changed directory and its ancestors");
    assert_ne!(b1.root, b2.root);
    assert_eq!(build(&before).unwrap().root, b1.root, "deterministic");
}

#[test]
fn entries_without_their_directory_or_listed_twice_make_no_tree() {
    let mut v = sample();
    v.retain(|e| e.path != "a/deep");
    assert!(build(&v).is_err(), "a/deep/y has no parent entry");
    let mut v = sample();
    v.push(file("b/z", 9));
    assert!(build(&v).is_err(), "b/z twice");
    let b = build(&[]).unwrap();
    let store = objects(&b);
    let (entries, _) = expand(&root_of(&b, 0), |h| Ok(store[h].clone())).unwrap();
    assert!(entries.is_empty(), "an empty worktree is one empty tree");
}

#[test]
fn a_missing_malformed_or_miscounted_tree_is_refused() {
    let want = sample();
    let b = build(&want).unwrap();
    let store = objects(&b);
    let get = |skip: Option<Digest>| {
        let store = store.clone();
        move |h: &Digest| {
            if Some(*h) == skip {
                return Err("tree missing".to_string());
            }
            Ok(store[h].clone())
        }
    };
    // Missing: any tree but the root, and the root itself.
    for h in store.keys() {
        let r = expand(&root_of(&b, want.len()), get(Some(*h)));
        assert_eq!(r.err(), Some(ExpandError::Object("tree missing".into())));
    }
    // More or fewer entries than the root records (a damaged or hostile store).
    for n in [want.len() - 1, want.len() + 1, 0] {
        let r = expand(&root_of(&b, n), get(None));
        assert!(matches!(r, Err(ExpandError::Count { .. })), "{n}");
    }
    // Malformed trees: cut, trailing bytes, names that climb out or repeat.
    let root_body = store[&b.root].clone();
    let bad = |body: Vec<u8>| {
        let r = expand(&root_of(&b, want.len()), move |_| Ok(body.clone()));
        assert!(matches!(r, Err(ExpandError::Malformed(_))));
    };
    bad(root_body[..root_body.len() - 1].to_vec());
    bad([root_body.clone(), vec![0]].concat());
    let one = build(&[file("q", 1)]).unwrap();
    let body = objects(&one)[&one.root].clone();
    // Magic (4), count (1), the name's length (1), the name.
    assert_eq!(&body[5..7], &[1, b'q']);
    for name in ["..", ".", "x/y", ""] {
        let evil = [
            &body[..5],
            &[name.len() as u8][..],
            name.as_bytes(),
            &body[7..],
        ]
        .concat();
        bad(evil);
    }
    let two = build(&[file("q", 1), file("r", 1)]).unwrap();
    let mut dup = objects(&two)[&two.root].clone();
    // The second name: after the first entry (tag, mode, size, mtime, hash: 45 bytes).
    assert_eq!(&dup[52..54], &[1, b'r']);
    dup[53] = b'q';
    bad(dup);
}
