#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A short smoke run of Debian's redis-benchmark against the real blossomd: pipelined BF.ADD
# and BF.EXISTS with random items from 20 clients, then a few plain requests per client. Each
# run must exit 0, report a requests-per-second figure and cause no error reply; afterwards
# the filter holds items and the daemon still answers. Prints TAP.
# shellcheck source=tests/compat/lib.sh
. "$(dirname "$0")/lib.sh"

need redis-cli redis-benchmark
daemon_start

cli() {
	redis-cli -p "$BLOSSOMD_PORT" --raw "$@" 2>&1
}

# The daemon's error-reply counter (INFO stats).
errors() {
	cli INFO stats | tr -d '\r' | sed -n 's/^total_error_replies://p'
}

# bench NAME REQUESTS PIPELINE COMMAND...: one run as a group of cases.
bench() {
	local name=$1 n=$2 pipe=$3 out rc rps before after
	shift 3
	before=$(errors)
	out=$(timeout 120 redis-benchmark -p "$BLOSSOMD_PORT" -n "$n" -c 20 -P "$pipe" -r 100000 -q \
		"$@" 2>&1)
	rc=$?
	after=$(errors)
	t_is "redis-benchmark $name exits 0" 0 "$rc"
	# -q prints "<command>: <N> requests per second, p50=... msec"
	rps=$(printf '%s\n' "$out" | tr '\r' '\n' | sed -n 's/^.*: \([0-9.]*\) requests per second.*$/\1/p' | tail -1)
	if [[ "$rps" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v r="$rps" 'BEGIN { exit !(r > 0) }'; then
		ok "redis-benchmark $name reports requests per second ($rps)"
	else
		not_ok "redis-benchmark $name reports requests per second" "$out"
	fi
	t_is "redis-benchmark $name causes no error reply" "$before" "$after"
}

bench "BF.ADD -P 16" 20000 16 BF.ADD f __rand_int__
bench "BF.EXISTS -P 16" 20000 16 BF.EXISTS f __rand_int__
bench "BF.MADD -P 16" 5000 16 BF.MADD f __rand_int__ __rand_int__ __rand_int__ __rand_int__
bench "BF.EXISTS without pipelining" 2000 1 BF.EXISTS f __rand_int__

card=$(cli BF.CARD f)
if [[ "$card" =~ ^[0-9]+$ ]] && ((card > 0 && card <= 40000)); then
	ok "BF.CARD f after the runs is in (0, 40000] ($card)"
else
	not_ok "BF.CARD f after the runs is in (0, 40000]" "got: $card"
fi
t_is "BF.INFO f ITEMS equals BF.CARD" "$card" "$(cli BF.INFO f ITEMS)"
t_is "the daemon is alive (PING)" "PONG" "$(cli PING)"

daemon_stop_case
t_done
