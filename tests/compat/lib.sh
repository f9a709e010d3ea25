# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Helpers for the compatibility scripts (sourced, not run): TAP output, the real blossomd
# ($BLOSSOMD_BIN) on a free loopback port with its own temporary directory, stopped by PID,
# and a text-protocol connection over bash's /dev/tcp.
#
# $BLOSSOMD_WRAPPER, if set, is put in front of the binary (words split at spaces), as in the
# integration harness: BLOSSOMD_WRAPPER="valgrind -q --error-exitcode=99" meson test ...
#
# The daemon is started under `setpriv --pdeathsig KILL` (when setpriv exists) so it dies with
# the script whatever happens to it; an EXIT trap kills what is still running by PID and
# removes the temporary directory.

set -u

T_N=0
T_FAILED=0

# ok DESCRIPTION / not_ok DESCRIPTION [DIAGNOSTIC...]
ok() {
	T_N=$((T_N + 1))
	printf 'ok %d - %s\n' "$T_N" "$1"
}

not_ok() {
	T_N=$((T_N + 1))
	T_FAILED=$((T_FAILED + 1))
	printf 'not ok %d - %s\n' "$T_N" "$1"
	shift
	local line
	for line in "$@"; do
		printf '%s\n' "$line" | sed 's/^/#   /'
	done
}

# t_is DESCRIPTION EXPECTED ACTUAL: exact string comparison.
t_is() {
	if [[ "$3" == "$2" ]]; then
		ok "$1"
	else
		not_ok "$1" "expected:" "$2" "got:" "$3"
	fi
}

# t_true DESCRIPTION COMMAND...: passes when the command succeeds.
t_true() {
	local name=$1
	shift
	if "$@"; then
		ok "$name"
	else
		not_ok "$name" "failed: $*"
	fi
}

bail() {
	printf 'Bail out! %s\n' "$*"
	exit 1
}

# Print the plan (at the end, which TAP allows) and exit 1 if any case failed.
t_done() {
	printf '1..%d\n' "$T_N"
	if [[ $T_FAILED -ne 0 && -n "${BLOSSOMD_DIR:-}" && -f "$BLOSSOMD_DIR/daemon.log" ]]; then
		echo "# daemon log:"
		sed 's/^/#   /' "$BLOSSOMD_DIR/daemon.log"
	fi
	[[ $T_FAILED -eq 0 ]]
}

# need PROGRAM...: bail out (a failure, not a skip) when a client is missing.
need() {
	local p
	for p in "$@"; do
		command -v "$p" >/dev/null 2>&1 ||
			bail "$p not found (scripts/bootstrap installs redis-tools, python3-redis)"
	done
}

# The Python used for small helpers (Debian's, which has redis-py; any python3 will do here).
compat_python() {
	if [[ -x /usr/bin/python3 ]]; then
		echo /usr/bin/python3
	else
		echo python3
	fi
}

# A loopback TCP port that was free a moment ago (tests/ports.py says how it is drawn).
free_port() {
	"$(compat_python)" "$(dirname "${BASH_SOURCE[0]}")/../ports.py"
}

BLOSSOMD_PID=
BLOSSOMD_PORT=
BLOSSOMD_DIR=

# True while $1 is a live (not zombie) process.
pid_alive() {
	local state
	[[ -r /proc/$1/stat ]] || return 1
	state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[[ -n "$state" && "$state" != Z && "$state" != X ]]
}

_compat_cleanup() {
	if [[ -n "$BLOSSOMD_PID" ]]; then
		kill -KILL "$BLOSSOMD_PID" 2>/dev/null
		wait "$BLOSSOMD_PID" 2>/dev/null
		BLOSSOMD_PID=
	fi
	if [[ -n "$BLOSSOMD_DIR" && -d "$BLOSSOMD_DIR" ]]; then
		rm -rf "$BLOSSOMD_DIR"
	fi
}
trap _compat_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# daemon_start [EXTRA-ARGS...]: start blossomd on a free port (a few tries, in case another
# process took the port in between); wait up to 20 s until it accepts. Bails out on failure.
# shellcheck disable=SC2120 # the extra arguments are optional
daemon_start() {
	local bin=${BLOSSOMD_BIN:-}
	[[ -n "$bin" && -x "$bin" ]] || bail "BLOSSOMD_BIN is not set to an executable"
	BLOSSOMD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/blossomd-compat.XXXXXX") || bail "mktemp failed"
	mkdir "$BLOSSOMD_DIR/data" || bail "mkdir failed"

	local pre=() try i
	if command -v setpriv >/dev/null 2>&1; then
		pre=(setpriv --pdeathsig KILL --)
	fi
	# shellcheck disable=SC2206 # the wrapper is split at spaces on purpose
	local wrapper=(${BLOSSOMD_WRAPPER:-})
	for try in 1 2 3; do
		BLOSSOMD_PORT=$(free_port) || bail "no free port"
		"${pre[@]}" "${wrapper[@]}" "$bin" --port "$BLOSSOMD_PORT" --http-port 0 \
			--data-dir "$BLOSSOMD_DIR/data" "$@" \
			</dev/null >"$BLOSSOMD_DIR/daemon.log" 2>&1 &
		BLOSSOMD_PID=$!
		for ((i = 0; i < 400; i++)); do
			if ! pid_alive "$BLOSSOMD_PID"; then
				break
			fi
			if (exec 3<>"/dev/tcp/127.0.0.1/$BLOSSOMD_PORT") 2>/dev/null; then
				echo "# blossomd pid $BLOSSOMD_PID on 127.0.0.1:$BLOSSOMD_PORT"
				return 0
			fi
			sleep 0.05
		done
		if pid_alive "$BLOSSOMD_PID"; then
			kill -KILL "$BLOSSOMD_PID"
			wait "$BLOSSOMD_PID" 2>/dev/null
			BLOSSOMD_PID=
			sed 's/^/# /' "$BLOSSOMD_DIR/daemon.log"
			bail "blossomd did not accept connections within 20 s"
		fi
		wait "$BLOSSOMD_PID" 2>/dev/null
		BLOSSOMD_PID=
		echo "# blossomd exited during start-up (try $try):"
		sed 's/^/#   /' "$BLOSSOMD_DIR/daemon.log"
	done
	bail "blossomd did not start"
}

# daemon_stop_case: SIGTERM, wait up to 30 s, and report "exits 0 on SIGTERM" as a case.
daemon_stop_case() {
	local i status
	if [[ -z "$BLOSSOMD_PID" ]]; then
		not_ok "blossomd exits 0 on SIGTERM" "the daemon was not running"
		return
	fi
	kill -TERM "$BLOSSOMD_PID"
	for ((i = 0; i < 600; i++)); do
		pid_alive "$BLOSSOMD_PID" || break
		sleep 0.05
	done
	if pid_alive "$BLOSSOMD_PID"; then
		kill -KILL "$BLOSSOMD_PID"
		wait "$BLOSSOMD_PID" 2>/dev/null
		BLOSSOMD_PID=
		not_ok "blossomd exits 0 on SIGTERM" "still running 30 s after SIGTERM; killed"
		return
	fi
	wait "$BLOSSOMD_PID"
	status=$?
	BLOSSOMD_PID=
	if [[ $status -eq 0 ]]; then
		ok "blossomd exits 0 on SIGTERM"
	else
		not_ok "blossomd exits 0 on SIGTERM" "exit status $status" "$(cat "$BLOSSOMD_DIR/daemon.log")"
	fi
}

# ---- text protocol over /dev/tcp -------------------------------------------------------

TEXT_FD=

text_open() {
	exec {TEXT_FD}<>"/dev/tcp/127.0.0.1/$BLOSSOMD_PORT" || bail "text connection failed"
}

text_close() {
	[[ -n "$TEXT_FD" ]] && exec {TEXT_FD}>&-
	TEXT_FD=
}

# text_cmd LINE: send one line, print the reply: one line, or START ... END as several lines.
text_cmd() {
	local line
	printf '%s\n' "$1" >&"$TEXT_FD"
	IFS= read -r -t 10 line <&"$TEXT_FD" || {
		echo "<no reply>"
		return 1
	}
	printf '%s\n' "$line"
	if [[ "$line" == START ]]; then
		while IFS= read -r -t 10 line <&"$TEXT_FD"; do
			printf '%s\n' "$line"
			[[ "$line" == END ]] && break
		done
	fi
}
