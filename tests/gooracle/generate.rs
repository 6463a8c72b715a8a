//! A seeded generator of container-create bodies that probe where Go's decoding is subtle:
//! key casing, `\uXXXX` escapes in keys, nulls, wrong types, odd numbers, top-level HostConfig
//! fields and, in "odd" mode, fold-equal duplicates, `ſ`/`K` in keys, NUL, lone surrogates,
//! invalid UTF-8 and trailing data.

/// SplitMix64: tiny, deterministic, good enough for test generation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `pct` percent.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub fn bytes<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len())]
    }
}

#[derive(Clone, Copy)]
pub enum Kind {
    Str,
    Bool,
    Int,
    List,
    Map,
    Set,
    Ports,
    Structs(&'static [(&'static str, Kind)]),
    ListOfLists,
    Object(&'static [(&'static str, Kind)]),
}

use Kind::*;

const DRIVER: &[(&str, Kind)] = &[("Name", Str), ("Options", Map)];
const VOLUME_OPTIONS: &[(&str, Kind)] = &[("DriverConfig", Object(DRIVER)), ("NoCopy", Bool)];
const MOUNT: &[(&str, Kind)] = &[
    ("Type", Str),
    ("Source", Str),
    ("Target", Str),
    ("ReadOnly", Bool),
    ("VolumeOptions", Object(VOLUME_OPTIONS)),
];
const DEVICE: &[(&str, Kind)] = &[
    ("PathOnHost", Str),
    ("PathInContainer", Str),
    ("CgroupPermissions", Str),
];
const DEVICE_REQUEST: &[(&str, Kind)] = &[
    ("Driver", Str),
    ("Count", Int),
    ("DeviceIDs", List),
    ("Capabilities", ListOfLists),
];
const BINDING: &[(&str, Kind)] = &[("HostIp", Str), ("HostPort", Str)];

/// The HostConfig fields of the oracle's struct (Resources flattened in), plus two unknowns.
pub const HOST_CONFIG: &[(&str, Kind)] = &[
    ("Privileged", Bool),
    ("Binds", List),
    ("CapAdd", List),
    ("SecurityOpt", List),
    ("MaskedPaths", List),
    ("ReadonlyPaths", List),
    ("NetworkMode", Str),
    ("PidMode", Str),
    ("IpcMode", Str),
    ("UTSMode", Str),
    ("UsernsMode", Str),
    ("CgroupnsMode", Str),
    ("PortBindings", Ports),
    ("Mounts", Structs(MOUNT)),
    ("ExtraHosts", List),
    ("Sysctls", Map),
    ("Runtime", Str),
    ("VolumeDriver", Str),
    ("VolumesFrom", List),
    ("PublishAllPorts", Bool),
    ("OomScoreAdj", Int),
    ("Devices", Structs(DEVICE)),
    ("DeviceCgroupRules", List),
    ("DeviceRequests", Structs(DEVICE_REQUEST)),
    ("CgroupParent", Str),
    ("Memory", Int),
    ("PidsLimit", Int),
    ("Resources", Object(&[("Privileged", Bool)])),
    ("Capabilities", List),
];

const CONFIG: &[(&str, Kind)] = &[
    ("Image", Str),
    ("Cmd", List),
    ("Env", List),
    ("User", Str),
    ("Labels", Map),
    ("ExposedPorts", Set),
    ("Volumes", Set),
    ("Hostname", Str),
];

const STRINGS: &[&str] = &[
    "",
    "alpine",
    "host",
    "container:abc",
    "private",
    "bridge",
    "none",
    "/etc:/x",
    "/ws/a:/a:ro",
    "/var/run/docker.sock:/s",
    "no-new-privileges",
    "seccomp=unconfined",
    "SYS_ADMIN",
    "bind",
    "volume",
    "tmpfs",
    "127.0.0.1",
    "0.0.0.0",
    "8080",
    "\\u00e9t\\u00e9",
    "a\\\"b\\\\c",
    "\\n\\t",
    "\\ud83d\\ude00",
    "\\/etc",
    "\u{e9}\u{2603}",
    "runc",
    "local",
    "/",
];
const ODD_STRINGS: &[&[u8]] = &[
    b"\\u0000",
    b"a\\u0000b",
    b"\\ud800",
    b"\\udc00x",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
];
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "4096",
    "9223372036854775807",
    "-9223372036854775808",
];
/// Valid JSON numbers Go refuses for integer fields.
const BAD_INTS: &[&str] = &[
    "1.0",
    "1e3",
    "1E3",
    "0.5",
    "-0.0",
    "9223372036854775808",
    "123456789012345678901234567890",
];
const MAP_KEYS: &[&str] = &[
    "a",
    "net.core.somaxconn",
    "kernel.domainname",
    "com.example",
    "o",
    "device",
    "type",
];
const PORTS: &[&str] = &["80/tcp", "443", "53/udp", "8080/tcp"];

/// Builds bodies; `odd` turns on the inputs our reader is meant to refuse.
pub struct Gen {
    pub rng: Rng,
    pub odd: bool,
}

impl Gen {
    pub fn new(seed: u64, odd: bool) -> Self {
        Self {
            rng: Rng::new(seed),
            odd,
        }
    }

    /// One create body.
    pub fn body(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.rng.chance(2) {
            out.extend_from_slice(
                self.rng
                    .bytes(&[&b"[]"[..], b"null", b"\"x\"", b"1", b"true"]),
            );
        } else {
            let mut entries = self.fields(CONFIG, 40);
            if self.rng.chance(75) {
                let v = match self.rng.below(20) {
                    0 => b"null".to_vec(),
                    1 => self.wrong(Object(HOST_CONFIG)),
                    _ => self.object(HOST_CONFIG, 45),
                };
                entries.push((self.key("HostConfig"), v));
            }
            if self.rng.chance(25) {
                entries.extend(self.fields(HOST_CONFIG, 8));
            }
            self.write_object(&mut out, entries);
        }
        if self.odd && self.rng.chance(6) {
            out.extend_from_slice(self.rng.bytes(&[
                &b" x"[..],
                b" {}",
                b"]",
                b"}",
                b"\n1",
                b",",
                b"\x00",
            ]));
        }
        out
    }

    fn fields(&mut self, fields: &[(&'static str, Kind)], pct: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut entries = Vec::new();
        for &(name, kind) in fields {
            if self.rng.chance(pct) {
                let v = self.value(kind);
                entries.push((self.key(name), v));
                if self.odd && self.rng.chance(4) {
                    let v = self.value(kind);
                    entries.push((self.key(name), v));
                }
            }
        }
        if self.rng.chance(10) {
            // Distinct per field table, so a clean body never repeats a key.
            let unknown = format!("Unknown{}", fields.len());
            entries.push((self.key(&unknown), self.value(Str)));
        }
        entries
    }

    fn object(&mut self, fields: &[(&'static str, Kind)], pct: u64) -> Vec<u8> {
        let entries = self.fields(fields, pct);
        let mut out = Vec::new();
        self.write_object(&mut out, entries);
        out
    }

    fn write_object(&mut self, out: &mut Vec<u8>, mut entries: Vec<(Vec<u8>, Vec<u8>)>) {
        for i in (1..entries.len()).rev() {
            let j = self.rng.below(i + 1);
            entries.swap(i, j);
        }
        out.push(b'{');
        for (i, (k, v)) in entries.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.space(out);
            out.push(b'"');
            out.extend(k);
            out.extend_from_slice(b"\":");
            self.space(out);
            out.extend(v);
        }
        out.push(b'}');
    }

    fn space(&mut self, out: &mut Vec<u8>) {
        if self.rng.chance(15) {
            out.extend_from_slice(self.rng.bytes(&[&b" "[..], b"\n", b"\t", b"\r\n  "]));
        }
    }

    /// A key spelled the way a client might: other casing, escapes, runes Go folds.
    fn key(&mut self, name: &str) -> Vec<u8> {
        let mut chars: Vec<char> = match self.rng.below(10) {
            0..=5 => name.chars().collect(),
            6 | 7 => name.to_ascii_lowercase().chars().collect(),
            8 => name.to_ascii_uppercase().chars().collect(),
            _ => name
                .chars()
                .map(|c| {
                    if self.rng.chance(50) {
                        c.to_ascii_lowercase()
                    } else {
                        c
                    }
                })
                .collect(),
        };
        // Dotless i folds to nothing ASCII in Go: a different, unknown key.
        if self.rng.chance(3)
            && let Some(p) = chars.iter().position(|c| *c == 'i')
        {
            chars[p] = '\u{131}';
        }
        if self.odd
            && self.rng.chance(8)
            && let Some(p) = chars
                .iter()
                .position(|c| matches!(c, 's' | 'S' | 'k' | 'K'))
        {
            chars[p] = if matches!(chars[p], 's' | 'S') {
                '\u{17f}'
            } else {
                '\u{212a}'
            };
        }
        let mut out = Vec::new();
        if self.odd && self.rng.chance(2) {
            // NUL, a lone surrogate or invalid UTF-8 inside the key itself.
            out.extend_from_slice(self.rng.bytes(ODD_STRINGS));
        }
        for c in chars {
            if self.rng.chance(8) {
                let hex = format!("\\u{:04x}", c as u32);
                out.extend(
                    if self.rng.chance(50) {
                        hex.to_uppercase().replace("\\U", "\\u")
                    } else {
                        hex
                    }
                    .bytes(),
                );
            } else {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        out
    }

    fn value(&mut self, kind: Kind) -> Vec<u8> {
        match self.rng.below(100) {
            0..=6 => b"null".to_vec(),
            7..=9 => self.wrong(kind),
            _ => self.right(kind),
        }
    }

    fn wrong(&mut self, kind: Kind) -> Vec<u8> {
        let candidates: &[&[u8]] = &[
            b"\"true\"",
            b"1",
            b"true",
            b"[]",
            b"{}",
            b"[\"x\"]",
            b"{\"a\":\"b\"}",
        ];
        loop {
            let c = self.rng.pick(candidates).to_vec();
            let fits = match kind {
                Str => c.starts_with(b"\""),
                Bool => c == b"true",
                Int => c == b"1",
                List | Structs(_) | ListOfLists => c.starts_with(b"["),
                Map | Set | Ports | Object(_) => c.starts_with(b"{"),
            };
            if !fits {
                return c;
            }
        }
    }

    fn string(&mut self) -> Vec<u8> {
        let mut s = b"\"".to_vec();
        if self.odd && self.rng.chance(5) {
            s.extend_from_slice(self.rng.bytes(ODD_STRINGS));
        }
        s.extend_from_slice(self.rng.pick(STRINGS).as_bytes());
        s.push(b'"');
        s
    }

    fn right(&mut self, kind: Kind) -> Vec<u8> {
        match kind {
            Str => self.string(),
            Bool => self.rng.bytes(&[&b"true"[..], b"false"]).to_vec(),
            Int if self.rng.chance(10) => self.rng.pick(BAD_INTS).as_bytes().to_vec(),
            Int => self.rng.pick(INTS).as_bytes().to_vec(),
            List => self.array(|g| {
                if g.rng.chance(8) {
                    b"null".to_vec()
                } else {
                    g.string()
                }
            }),
            ListOfLists => self.array(|g| {
                if g.rng.chance(15) {
                    b"null".to_vec()
                } else {
                    g.right(List)
                }
            }),
            Structs(fields) => self.array(|g| {
                if g.rng.chance(8) {
                    b"null".to_vec()
                } else {
                    g.object(fields, 50)
                }
            }),
            Object(fields) => self.object(fields, 50),
            Map => self.map(MAP_KEYS, |g| {
                if g.rng.chance(8) {
                    b"null".to_vec()
                } else {
                    g.string()
                }
            }),
            Set => self.map(PORTS, |g| {
                g.rng.bytes(&[&b"{}"[..], b"null", b"{\"x\":1}"]).to_vec()
            }),
            Ports => self.map(PORTS, |g| match g.rng.below(10) {
                0 => b"null".to_vec(),
                1 => b"[]".to_vec(),
                _ => g.array(|g| {
                    if g.rng.chance(8) {
                        b"null".to_vec()
                    } else {
                        g.object(BINDING, 60)
                    }
                }),
            }),
        }
    }

    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Vec<u8>) -> Vec<u8> {
        let n = self.rng.below(4);
        let items: Vec<Vec<u8>> = (0..n).map(|_| item(self)).collect();
        let mut out = b"[".to_vec();
        out.extend(items.join(&b","[..]));
        out.push(b']');
        out
    }

    /// A map object; keys are distinct under folding unless in odd mode.
    fn map(&mut self, keys: &[&str], mut value: impl FnMut(&mut Self) -> Vec<u8>) -> Vec<u8> {
        let n = self.rng.below(4);
        let mut entries = Vec::new();
        for _ in 0..n {
            let k = *self.rng.pick(keys);
            let k = if self.odd && self.rng.chance(20) {
                k.to_ascii_uppercase()
            } else {
                k.to_owned()
            };
            if !self.odd
                && entries
                    .iter()
                    .any(|(e, _): &(Vec<u8>, Vec<u8>)| e.eq_ignore_ascii_case(k.as_bytes()))
            {
                continue;
            }
            entries.push((k.into_bytes(), value(self)));
        }
        let mut out = Vec::new();
        self.write_object(&mut out, entries);
        out
    }
}
