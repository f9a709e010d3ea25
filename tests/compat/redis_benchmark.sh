#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A short smoke run of Debian's redis-benchmark against the real blossomd: pipelined BF.ADD
# and BF.EXISTS with random items from 20 clients, then a few plain requests per client. Each
# run must exit 0, report a requests-per-second figure and cause no error reply; afterwards
# the filter holds items and the daemon still answers. Then redis-benchmark's default run.
# Prints TAP.
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

# redis-benchmark's default run (all its tests, -n small). PING_INLINE opens its connections
# with the inline "PING\r\n", which is RESP; both PING tests report a rate. The tests of data
# types blossomd lacks get "-ERR unknown command" (redis-benchmark exits 1 at a test's first
# error reply, by design: "we now immediately exit on error"), not a protocol error or a hang,
# so each is run on its own with -t as well.
out=$(timeout 60 redis-benchmark -p "$BLOSSOMD_PORT" -n 200 -c 5 -q 2>&1)
rc=$?
out=$(printf '%s\n' "$out" | tr '\r' '\n')
for t in PING_INLINE PING_MBULK; do
	if printf '%s\n' "$out" | grep -Eq "^$t: [0-9.]+ requests per second"; then
		ok "redis-benchmark default run: $t reports requests per second"
	else
		not_ok "redis-benchmark default run: $t reports requests per second" "$out"
	fi
done
t_is "redis-benchmark default run stops at SET's -ERR (exit 1, no hang)" 1 "$rc"
if printf '%s\n' "$out" | grep -q "^Error from server: ERR unknown command 'SET', with args beginning with: 'key:__rand_int__'" &&
	! printf '%s\n' "$out" | grep -qi 'protocol error'; then
	ok "redis-benchmark default run: SET is answered -ERR unknown command, no protocol error"
else
	not_ok "redis-benchmark default run: SET is answered -ERR unknown command" "$out"
fi
for t in get:GET incr:INCR lpush:LPUSH rpush:RPUSH lpop:LPOP rpop:RPOP sadd:SADD hset:HSET \
	spop:SPOP zadd:ZADD zpopmin:ZPOPMIN lrange_100:LPUSH lrange_600:LPUSH mset:MSET; do
	out=$(timeout 30 redis-benchmark -p "$BLOSSOMD_PORT" -n 50 -c 2 -q -t "${t%%:*}" 2>&1)
	rc=$?
	out=$(printf '%s\n' "$out" | tr '\r' '\n')
	if [[ $rc -eq 1 ]] && printf '%s\n' "$out" | grep -q "^Error from server: ERR unknown command '${t#*:}'" &&
		! printf '%s\n' "$out" | grep -qi 'protocol error'; then
		ok "redis-benchmark -t ${t%%:*}: -ERR unknown command '${t#*:}' (exit 1, no hang)"
	else
		not_ok "redis-benchmark -t ${t%%:*}: -ERR unknown command '${t#*:}'" "rc=$rc" "$out"
	fi
done
t_is "the daemon is alive after the default run (PING)" "PONG" "$(cli PING)"

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
