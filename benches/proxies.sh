# Sourced by the focused bench loops (compose_loop.sh, create_burst.sh): starts one dockwarden
# per binary in BINS in front of DAEMON, each with its own workspace and audit log under TMP,
# and fills SOCKS and NAMES (index 0: the daemon itself, "direct") and PIDS.
start_proxies() {
	SOCKS=("$DAEMON") NAMES=(direct)
	local k bin
	for k in $(seq 1 ${#BINS[@]}); do
		bin=${BINS[$((k - 1))]}
		mkdir -p "$TMP/ws$k"
		"$bin" proxy --listen "$TMP/p$k.sock" --upstream "$DAEMON" --workspace "$TMP/ws$k" \
			--audit-log "$TMP/audit$k.log" >"$TMP/p$k.log" 2>&1 &
		PIDS+=($!)
		for _ in $(seq 100); do [ -S "$TMP/p$k.sock" ] && break; sleep 0.05; done
		[ -S "$TMP/p$k.sock" ] || { echo "$bin did not start: $(tail -3 "$TMP/p$k.log")" >&2; return 1; }
		SOCKS+=("$TMP/p$k.sock") NAMES+=("$k:$bin")
	done
}
