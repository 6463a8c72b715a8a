#!/usr/bin/env bash
# Fork of a T2-size worktree (issue 16): `create --from` through the real service, with
# worktrees on their own XFS images (`[disk] images = "on"`) and the state directory on an
# XFS that can reflink, so the fork clones the snapshot's whole image; against a fork of the
# same tree from a snapshot without an image clone (today's restore, then the copy into a
# new image and a baseline capture). Alternating, ROUNDS times.
#
#   benches/fork_image.sh [DOCKWARDEN]     # SCALE_FILES=150000 (default), ROUNDS=3, WORK=...
#                                          # RESTORE=0: image forks only (no restore forks)
#
# Needs root (loop mounts, workspace uids). The tree is built by benches/snapshot_scale.sh's
# generator (read out of that script, so both build the same tree). Prints one line per
# fork (`fork <kind> <round> <wall s> <host MiB written> <load>`) and a summary; the
# numbers go into benches/README.md by hand. Everything is unmounted and removed after.
set -euo pipefail
cd "$(dirname "$0")/.."
DW=$(realpath "${1:-target/release/dockwarden}")
FILES=${SCALE_FILES:-150000}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$(mktemp -d /var/tmp/forkimage.XXXXXX)}
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (loop mounts)"; exit 0; }
for t in mkfs.xfs fsfreeze curl; do
	command -v $t >/dev/null || { echo "skipped: \`$t\` is missing"; exit 0; }
done
mkdir -p "$WORK/xfs"
STATE=$WORK/xfs/state
SOCK=$WORK/svc.sock
PID=
cleanup() {
	[ -n "$PID" ] && { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
	for m in $(findmnt -rn -o TARGET | grep "^$WORK/xfs/" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
	mountpoint -q "$WORK/xfs" && { umount "$WORK/xfs" || umount -l "$WORK/xfs"; }
	[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "building a $FILES-file tree" >&2
sed -n '/^python3 - "\$TREE" "\$FILES" <<.PY.$/,/^PY$/p' benches/snapshot_scale.sh | sed '1d;$d' >"$WORK/gen.py"
[ -s "$WORK/gen.py" ] || { echo "the generator was not found in benches/snapshot_scale.sh" >&2; exit 1; }
python3 "$WORK/gen.py" "$WORK/tree" "$FILES"

truncate -s 16G "$WORK/xfs.img"
mkfs.xfs -q -m reflink=1 "$WORK/xfs.img"
mount -o loop "$WORK/xfs.img" "$WORK/xfs"
printf '[defaults]\ndisk = "4GiB"\n[disk]\nimages = "on"\n' >"$WORK/resources.toml"
"$DW" serve --socket "$SOCK" --state-dir "$STATE" --uid-base 47100 --uid-count 20 \
	--no-docker --resources "$WORK/resources.toml" 2>"$WORK/svc.log" &
PID=$!
api() { curl -sf --unix-socket "$SOCK" -X "$1" "http://ws$2" ${3:+-H 'content-type: application/json' -d "$3"}; }
for _ in $(seq 100); do api GET /v1/health >/dev/null 2>&1 && break; sleep 0.1; done
jf() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

api POST /v1/workspaces '{"id":"big"}' >/dev/null
WT=$STATE/workspaces/big/worktree
mountpoint -q "$WT" || { echo "the worktree is not on its own image" >&2; exit 1; }
UID_BIG=$(api GET /v1/workspaces/big | jf 'd["uid"]')
cp -a "$WORK/tree/." "$WT/"
chown -R "$UID_BIG:$UID_BIG" "$WT"
sleep 1
t0=$(date +%s.%N)
S1=$(api POST /v1/workspaces/big/snapshot)
t1=$(date +%s.%N)
echo "first snapshot: $(echo "$t1 - $t0" | bc) s: $(echo "$S1" | jf '(d["files"], d["bytes"], d["image_clone"])')" >&2
SID=$(echo "$S1" | jf 'd["id"]')
# The same tree without an image clone: forks of it restore.
S2=$(api POST /v1/workspaces/big/snapshot)
echo "unchanged incremental: $(echo "$S2" | jf '(d["hashed"], d["image_clone"])')" >&2
RID=$(echo "$S2" | jf 'd["id"]')
rm "$STATE/disks/snapshots/$RID.img"

used() { df -B1M --output=used "$WORK/xfs" | tail -1 | tr -d ' '; }
fork() { # kind round snapshot
	local id=$1$2 before after t0 t1 out
	sync
	before=$(used)
	t0=$(date +%s.%N)
	out=$(api POST /v1/workspaces "{\"id\":\"$id\",\"from\":\"$3\"}")
	t1=$(date +%s.%N)
	sync
	after=$(used)
	local base
	base=$(api GET "/v1/workspaces/$id/snapshots" | jf '(d[0]["reason"], d[0]["hashed"], d[0]["image_clone"])')
	echo "fork $1 $2 $(echo "$t1 - $t0" | bc) $((after - before)) $(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /) baseline=$base"
	api DELETE "/v1/workspaces/$id" >/dev/null
}
for r in $(seq "$ROUNDS"); do
	if [ "${RESTORE:-1}" = 0 ]; then
		fork image "$r" "$SID"
	elif [ $((r % 2)) = 1 ]; then
		fork image "$r" "$SID"
		fork restore "$r" "$RID"
	else
		fork restore "$r" "$RID"
		fork image "$r" "$SID"
	fi
done
grep -o '"forked from the snapshot.s image clone".*' "$WORK/svc.log" | head -3 >&2 || true
grep 'forked from' "$WORK/svc.log" | sed 's/.*fork\.files/fork.files/' >&2 || true
grep 'image fork steps' "$WORK/svc.log" | sed 's/.*fork\.clone_ms/fork.clone_ms/' >&2 || true
