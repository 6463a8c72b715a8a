#!/usr/bin/env bash
# Snapshot store at the scale of real repositories, side by side with tar, cp -a, rsync -a and restic.
#
#   benches/snapshot_scale.sh            # T1-like tree, 20k files by default
#   SCALE_FILES=150000 benches/snapshot_scale.sh   # T2 size (about 1.4 GiB: slow)
#   ROUNDS=3 (default) KEEP=1 (keep the work dir) WORK=/path (default: a temp dir)
#   SNAPSHOT_TOOL=/path/to/snapshot_scale_tool   # another build; the README is not touched
#   TOOLS="dw restic"   # only these of dw tar cp rsync restic (default: all); the README is
#                       # not touched then either (e.g. the store-size row needs dw and restic)
#   SERVICE=0           # skip the service memory run at the end
#
# Builds a deterministic node_modules-like tree (packages of small .js/.json files of
# pseudo-random source text, a few larger minified bundles and .node binaries, .bin symlinks), then, ROUNDS times and alternating the tools within each
# round, measures: first snapshot, incremental of the unchanged tree, incremental after 1%
# of files changed, restore into an empty directory, and fork (restore + baseline capture).
# Warm caches (this machine is shared: no cache dropping). Prints a Markdown table of the
# medians and writes it between the markers in benches/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=${SCALE_FILES:-20000}
TOOLS=${TOOLS:-dw tar cp rsync restic}
on() { [[ " $TOOLS " == *" $1 "* ]]; }
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$(mktemp -d /var/tmp/snapscale.XXXXXX)}
mkdir -p "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

command -v rsync >/dev/null || { echo "rsync missing: apt-get install -y rsync" >&2; exit 1; }
command -v restic >/dev/null || { echo "restic missing: apt-get install -y restic" >&2; exit 1; }
export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR=$WORK/restic-cache

echo "building the driver" >&2
# SNAPSHOT_TOOL: another build of the driver (e.g. of an older commit), for before/after.
[ -n "${SNAPSHOT_TOOL:-}" ] && TOOL=$SNAPSHOT_TOOL || TOOL=$(cargo bench --bench snapshot_scale_tool --no-run --message-format=json 2>/dev/null |
	python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "snapshot_scale_tool" and m.get("executable"):
        print(m["executable"])')
[ -x "$TOOL" ] || { echo "could not build the driver" >&2; exit 1; }

TREE=$WORK/tree
echo "building a $FILES-file tree in $TREE" >&2
python3 - "$TREE" "$FILES" <<'PY'
import os, random, sys
from array import array
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(16)
words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(3, 10))) for _ in range(2000)]
# Contents are pseudo-random with their own seed, so the tree's shape (names, sizes) is the
# one earlier runs measured: no file is a line repeated. Text is a stream of tokens (a word
# of a Zipf-weighted vocabulary and a punctuation) drawn from 65536 slots; source files have
# a line break every ~10 tokens, minified bundles none. `.node` binaries are random bytes
# through a skewed byte table (zstd-3 keeps ~70% of them; real ELF objects compress better).
crng = random.Random(1616)
def slots(newline):
    out, rank = [], 0
    while len(out) < 65536:
        w = words[rank % len(words)]
        for _ in range(max(1, 9000 // (rank + 1))):
            p = crng.choice([b" ", b".", b"(", b")", b",", b" = ", b"{", b"}", b"=>", b":", b";"])
            if newline and crng.random() < 0.1:
                p = b";\n"
            out.append(w + p)
        rank += 1
    return out[:65536]
SOURCE, MINIFIED = slots(True), slots(False)
BYTE_TABLE = bytes(([0] * 96) + ([0xff] * 16) + ([0x48] * 8) + list(range(1, 137)))
def text(size, table):
    toks = array("H", crng.randbytes(2 * (size // 6 + 16)))
    body = b"".join(map(table.__getitem__, toks))
    while len(body) < size:
        body += b"".join(map(table.__getitem__, array("H", crng.randbytes(2 * (size // 6 + 16)))))
    return body[:size]
def binary(size):
    return crng.randbytes(size).translate(BYTE_TABLE)
made = 0
pkg = 0
os.makedirs(root, exist_ok=True)
while made < n:
    name = f"node_modules/pkg{pkg:05d}"
    if pkg % 7 == 0:
        name = f"node_modules/@scope{pkg % 50}/pkg{pkg:05d}"
    base = os.path.join(root, name)
    subdirs = ["", "lib", "lib/util", "dist"][: rng.randint(1, 4)]
    for s in subdirs:
        os.makedirs(os.path.join(base, s), exist_ok=True)
    count = rng.randint(3, 25)
    for i in range(count):
        if made >= n:
            break
        d = rng.choice(subdirs)
        size = int(rng.paretovariate(1.2) * 600)
        large = made % 997 == 0
        if large:
            size = rng.randint(1, 8) << 20
        header = b"// " + b" ".join(rng.choice(words) for _ in range(12)) + b";\n"
        ext = rng.choice([".js", ".js", ".json", ".d.ts", ".md"])
        if large and (made // 997) % 2 == 1:
            ext, body = ".node", binary(size)
        else:
            body = (header + text(size, MINIFIED if large else SOURCE))[:size]
        with open(os.path.join(base, d, f"f{i}{ext}"), "wb") as f:
            f.write(body)
        made += 1
    if pkg % 40 == 0:
        bindir = os.path.join(root, "node_modules/.bin")
        os.makedirs(bindir, exist_ok=True)
        link = os.path.join(bindir, f"cli{pkg}")
        if not os.path.lexists(link):
            os.symlink(f"../{name[len('node_modules/'):]}/f0.js", link)
    pkg += 1
# Settle all timestamps in the past, as a real checkout's are.
for dp, dn, fn in os.walk(root):
    for x in fn:
        os.utime(os.path.join(dp, x), (1700000000, 1700000000), follow_symlinks=False)
PY
sleep 1
read -r NF ND NL BYTES < <(python3 - "$TREE" <<'PY'
import os, sys
f = d = l = b = 0
for dp, dn, fn in os.walk(sys.argv[1]):
    d += len(dn)
    for x in fn:
        p = os.path.join(dp, x)
        if os.path.islink(p): l += 1
        else: f += 1; b += os.path.getsize(p)
print(f, d, l, b)
PY
)
echo "tree: $NF files, $ND dirs, $NL symlinks, $((BYTES >> 20)) MiB" >&2

declare -A T
t() { # t KEY CMD...: time one command, append the seconds to T[KEY]
	local key=$1; shift
	local a b
	a=$(date +%s.%N)
	"$@" >/dev/null
	b=$(date +%s.%N)
	T[$key]+="$(echo "$b - $a" | bc) "
	echo "  $key $(echo "$b - $a" | bc)" >&2
}
change_1pct() { # deterministic 1% of the files, same sizes, new content
	python3 - "$TREE" "$1" <<'PY'
import os, sys
root, r = sys.argv[1], int(sys.argv[2])
paths = sorted(os.path.join(dp, x) for dp, dn, fn in os.walk(root) for x in fn if not os.path.islink(os.path.join(dp, x)))
for p in paths[r::100]:
    with open(p, "r+b") as f:
        b = bytearray(f.read()); 
        if b: b[0] = (b[0] + 1 + r) % 256
        f.seek(0); f.write(b)
PY
}

for r in $(seq 1 "$ROUNDS"); do
	echo "round $r/$ROUNDS" >&2
	R=$WORK/r$r
	mkdir -p "$R"
	S=$R/store
	# first snapshot
	on dw && { t dw_first /usr/bin/time -o "$R/rss" -f %M "$TOOL" capture "$S" "$TREE" s1; }
	on dw && { T[dw_rss]+="$(tail -1 "$R/rss") "; }
	on tar && { t tar_first tar -cf "$R/full.tar" --listed-incremental="$R/snar" -C "$TREE" .; }
	on cp && { t cp_first cp -a "$TREE" "$R/cp"; }
	on rsync && { t rsync_first rsync -a "$TREE/" "$R/rsync/"; }
	on restic && { restic init -q --repo "$R/restic" >/dev/null; }
	on restic && { t restic_first /usr/bin/time -o "$R/rss" -f %M restic -q --repo "$R/restic" backup "$TREE"; }
	on restic && { T[restic_rss]+="$(tail -1 "$R/rss") "; }
	# incremental, unchanged
	on tar && { cp "$R/snar" "$R/snar1"; }
	on dw && { t dw_inc0 "$TOOL" capture "$S" "$TREE" s2 s1; }
	on tar && { t tar_inc0 tar -cf "$R/inc0.tar" --listed-incremental="$R/snar1" -C "$TREE" .; }
	on rsync && { t rsync_inc0 rsync -a "$TREE/" "$R/rsync/"; }
	on restic && { t restic_inc0 restic -q --repo "$R/restic" backup "$TREE"; }
	# incremental, 1% changed
	sleep 0.2
	change_1pct "$r"
	sleep 0.2
	on dw && { t dw_inc1 "$TOOL" capture "$S" "$TREE" s3 s2; }
	on tar && { t tar_inc1 tar -cf "$R/inc1.tar" --listed-incremental="$R/snar1" -C "$TREE" .; }
	on rsync && { t rsync_inc1 rsync -a "$TREE/" "$R/rsync/"; }
	on restic && { t restic_inc1 restic -q --repo "$R/restic" backup "$TREE"; }
	# restore into an empty directory
	on dw && { t dw_restore "$TOOL" restore "$S" s3 "$R/dw-restored"; }
	on tar && { mkdir "$R/tar-restored"; }
	on tar && { t tar_restore tar -xf "$R/full.tar" -C "$R/tar-restored"; }
	on cp && { t cp_restore cp -a "$R/cp" "$R/cp-restored"; }
	on rsync && { t rsync_restore rsync -a "$R/rsync/" "$R/rsync-restored/"; }
	on restic && { t restic_restore restic -q --repo "$R/restic" restore latest --target "$R/restic-restored"; }
	# Bytes after the 3 snapshots, before the fork adds a fourth manifest: allocated (a
	# 4 KiB block per small file counts as 4 KiB), without the stat index (a cache);
	# restic's repository as it is.
	on dw && { T[dw_store]+="$(($(du -s --block-size=1 "$S" | cut -f1) - $(du -s --block-size=1 "$S/index" | cut -f1))) "; }
	on dw && { echo "  store $S: $(du -s --block-size=1 "$S"/{blobs,packs,manifests} | tr '\n\t' '  ')" >&2; ls -l "$S/packs" >&2; }
	on restic && { T[restic_store]+="$(du -s --block-size=1 "$R/restic" | cut -f1) "; }
	on tar && { T[tar_store]+="$(($(stat -c %s "$R/full.tar") + $(stat -c %s "$R/inc0.tar") + $(stat -c %s "$R/inc1.tar"))) "; }
	# fork: restore + baseline capture from the restore's index
	on dw && { t dw_fork "$TOOL" fork "$S" s3 "$R/fork" f1; }
	if on dw; then diff -r --no-dereference "$TREE" "$R/dw-restored" >/dev/null || { echo "restored tree differs" >&2; exit 1; }; fi
	rm -rf "$R"
done

# The service itself: peak and idle RSS of `dockwarden serve` snapshotting the same tree
# (first snapshot and an unchanged incremental through its API; needs root).
SVC_START=0 SVC_PEAK1=0 SVC_PEAK=0 SVC_IDLE=0
[ "${SERVICE:-1}" = 1 ] && cargo build --release --bin dockwarden >/dev/null 2>&1 || true
[ "${SERVICE:-1}" = 1 ] && read -r _ SVC_START SVC_PEAK1 SVC_PEAK SVC_IDLE < <(benches/snapshot_scale_service.sh "$TREE" "$WORK" target/release/dockwarden | grep '^service_rss' || echo "service_rss 0 0 0 0")
echo "service RSS (KiB): start $SVC_START, peak after the first snapshot $SVC_PEAK1, peak $SVC_PEAK, idle 10 s later $SVC_IDLE" >&2

# A measure of a tool that was not run (TOOLS) prints as "–", not as zero.
med() { [ -n "${T[$1]:-}" ] || { echo –; return; }; tr ' ' '\n' <<<"${T[$1]}" | grep . | sort -g | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'; }
kib() { [ -n "${T[$1]:-}" ] || { echo –; return; }; tr ' ' '\n' <<<"${T[$1]}" | grep . | sort -g | awk '{a[NR]=$1} END {printf "%d MiB", a[int((NR+1)/2)]/1024}'; }
mib() { [ -n "${T[$1]:-}" ] || { echo –; return; }; tr ' ' '\n' <<<"${T[$1]}" | grep . | sort -g | awk '{a[NR]=$1} END {printf "%.1f MiB", a[int((NR+1)/2)]/1048576}'; }
TABLE=$(
	cat <<EOF
Tree: $NF files, $ND dirs, $NL symlinks, $((BYTES >> 20)) MiB (SCALE_FILES=$FILES); medians of $ROUNDS rounds, seconds, warm caches, $(nproc) shared cores; $(date -u +%Y-%m-%d).

| operation | dockwarden | \`tar\` | \`cp -a\` | \`rsync -a\` | restic $(restic version | cut -d' ' -f2) |
|---|---:|---:|---:|---:|---:|
| first snapshot | $(med dw_first) | $(med tar_first) (\`-c\`) | $(med cp_first) | $(med rsync_first) | $(med restic_first) |
| incremental, unchanged | $(med dw_inc0) | $(med tar_inc0) (\`-g\`) | – | $(med rsync_inc0) | $(med restic_inc0) |
| incremental, 1% changed | $(med dw_inc1) | $(med tar_inc1) (\`-g\`) | – | $(med rsync_inc1) | $(med restic_inc1) |
| restore into an empty dir | $(med dw_restore) | $(med tar_restore) (\`-x\`) | $(med cp_restore) | $(med rsync_restore) | $(med restic_restore) |
| fork (restore + baseline) | $(med dw_fork) | = restore | | | |
| bytes stored after 3 snapshots (allocated; tar: archive sizes) | $(mib dw_store) | $(mib tar_store) | | | $(mib restic_store) |
| peak RSS of the first snapshot | $(kib dw_rss) | | | | $(kib restic_rss) |
| \`dockwarden serve\` RSS: peak (first + unchanged snapshot) / idle 10 s after | $((SVC_PEAK >> 10)) / $((SVC_IDLE >> 10)) MiB | | | | |
EOF
)
echo "$TABLE"
README=benches/README.md
if [ -z "${SNAPSHOT_TOOL:-}" ] && [ "$TOOLS" = "dw tar cp rsync restic" ] && grep -q '<!-- snapshot_scale:begin -->' "$README"; then
	python3 - "$README" "$TABLE" <<'PY'
import sys
p, table = sys.argv[1], sys.argv[2]
s = open(p).read()
a = s.index("<!-- snapshot_scale:begin -->") + len("<!-- snapshot_scale:begin -->")
b = s.index("<!-- snapshot_scale:end -->")
open(p, "w").write(s[:a] + "\n" + table + "\n" + s[b:])
PY
fi
