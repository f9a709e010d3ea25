# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Helpers for bench/serve-resp, bench/serve-text and bench/serve-http (sourced): a release
# build, servers on free loopback ports stopped by PID at exit, and a process's CPU time from
# /proc/PID/stat.

set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$BENCH_ROOT/build-bench}
CLK_TCK=$(getconf CLK_TCK)
BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/blossomd-bench.XXXXXX")
BENCH_PIDS=()

bench_cleanup() {
	local pid
	for pid in "${BENCH_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${BENCH_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

die() {
	echo "$(basename "$0"): $*" >&2
	exit 1
}

# Configure (release) and build $BUILD_DIR if needed; ninja makes a no-op build quick.
bench_build() {
	if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
		echo "# meson setup $BUILD_DIR -Dbuildtype=release" >&2
		meson setup "$BUILD_DIR" "$BENCH_ROOT" -Dbuildtype=release >/dev/null
	fi
	meson compile -C "$BUILD_DIR" >/dev/null || die "build failed in $BUILD_DIR"
	BLOSSOMD_BIN=$BUILD_DIR/server/blossomd
	[[ -x "$BLOSSOMD_BIN" ]] || die "$BLOSSOMD_BIN not built"
}

free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# wait_port PORT PID: until PORT accepts (10 s), or die if PID exits.
wait_port() {
	local i
	for ((i = 0; i < 200; i++)); do
		kill -0 "$2" 2>/dev/null || die "server pid $2 exited during start-up"
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	die "nothing accepts on port $1"
}

# start_blossomd: sets BLOSSOMD_PORT and BLOSSOMD_PID (text + RESP). HTTP is off unless
# $BENCH_HTTP is 1, which also sets BLOSSOMD_HTTP_PORT. $BENCH_PIN (e.g. "taskset -c 0") is
# put in front of the daemon; $BENCH_CONF (e.g. "wal = off") is its configuration file's body.
start_blossomd() {
	local http=0 pin conf=()
	read -r -a pin <<<"${BENCH_PIN:-}"
	if [[ -n ${BENCH_CONF:-} ]]; then
		printf '[blossomd]\n%s\n' "$BENCH_CONF" >"$BENCH_TMP/blossomd.conf"
		conf=(--config "$BENCH_TMP/blossomd.conf")
	fi
	mkdir -p "$BENCH_TMP/blossomd"
	BLOSSOMD_PORT=$(free_port)
	if [[ ${BENCH_HTTP:-0} == 1 ]]; then
		# The kernel may hand out the same free port twice in a row; the two must differ.
		BLOSSOMD_HTTP_PORT=$BLOSSOMD_PORT
		while [[ $BLOSSOMD_HTTP_PORT == "$BLOSSOMD_PORT" ]]; do
			BLOSSOMD_HTTP_PORT=$(free_port)
		done
		http=$BLOSSOMD_HTTP_PORT
	fi
	"${pin[@]}" "$BLOSSOMD_BIN" "${conf[@]}" --port "$BLOSSOMD_PORT" --http-port "$http" \
		--data-dir "$BENCH_TMP/blossomd" --log-level warning </dev/null \
		>"$BENCH_TMP/blossomd.log" 2>&1 &
	BLOSSOMD_PID=$!
	BENCH_PIDS+=("$BLOSSOMD_PID")
	wait_port "$BLOSSOMD_PORT" "$BLOSSOMD_PID"
	[[ $http == 0 ]] || wait_port "$http" "$BLOSSOMD_PID"
}

# start_redis: a plain redis-server without persistence; sets REDIS_PORT and REDIS_PID.
start_redis() {
	mkdir -p "$BENCH_TMP/redis"
	REDIS_PORT=$(free_port)
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --dir "$BENCH_TMP/redis" --logfile "$BENCH_TMP/redis.log" </dev/null &
	REDIS_PID=$!
	BENCH_PIDS+=("$REDIS_PID")
	wait_port "$REDIS_PORT" "$REDIS_PID"
}

# cpu_ticks PID: utime + stime of the whole process (all threads), in clock ticks.
cpu_ticks() {
	local rest
	rest=$(sed 's/^.*) //' "/proc/$1/stat")
	# After "pid (comm) ": field 1 is the state, so utime (14) and stime (15) are 12 and 13.
	awk '{ print $12 + $13 }' <<<"$rest"
}

# ticks_us TICKS COUNT: microseconds of CPU per item, 3 decimals.
ticks_us() {
	awk -v t="$1" -v n="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", t * 1e6 / hz / n }'
}

ticks_s() {
	awk -v t="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", t / hz }'
}

# machine_note: one line about where the figures come from.
machine_note() {
	local model
	model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
	echo "machine: $(nproc) CPUs ($model), load average $(cut -d' ' -f1-3 /proc/loadavg)," \
		"clock ticks $CLK_TCK/s (CPU resolution $((1000 / CLK_TCK)) ms per reading)"
}
