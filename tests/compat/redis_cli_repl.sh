#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Replication driven by Debian's redis-cli, as a Redis user does it (doc/replication.md): two
# real daemons, `redis-cli replicaof`, `redis-cli role` on both, adds on the primary confirmed
# by `redis-cli wait 1 1000` and read on the replica, a write to the replica refused, `replicaof
# no one`. Prints TAP.
# shellcheck source=tests/compat/lib.sh
. "$(dirname "$0")/lib.sh"

need redis-cli

# The primary: started first, its PID and directory kept apart (daemon_start's globals then
# belong to the replica); killed by PID at exit whatever happens.
daemon_start
P_PID=$BLOSSOMD_PID P_PORT=$BLOSSOMD_PORT P_DIR=$BLOSSOMD_DIR
_repl_cleanup() {
	kill -KILL "$P_PID" 2>/dev/null
	wait "$P_PID" 2>/dev/null
	rm -rf "$P_DIR"
	_compat_cleanup
}
trap _repl_cleanup EXIT
BLOSSOMD_PID='' BLOSSOMD_DIR=''
daemon_start
R_PORT=$BLOSSOMD_PORT

p() { redis-cli -p "$P_PORT" "$@" 2>&1; }
r() { redis-cli -p "$R_PORT" "$@" 2>&1; }

t_is "BF.ADD on the primary" 1 "$(p BF.ADD visitors alice)"
t_is "replicaof" OK "$(r replicaof 127.0.0.1 "$P_PORT")"
t_is "replicaof again" "OK Already connected to specified master" "$(r replicaof 127.0.0.1 "$P_PORT")"
t_is "wait 1 10000: the replica has synced" 1 "$(p wait 1 10000)"
t_is "the image reached the replica" 1 "$(r BF.EXISTS visitors alice)"
t_is "BF.MADD on the primary" "$(printf '1\n1')" "$(p BF.MADD visitors bob carol)"
t_is "wait 1 1000" 1 "$(p wait 1 1000)"
t_is "the adds reached the replica" "$(printf '1\n1\n0')" "$(r BF.MEXISTS visitors bob carol dave)"
off=$(p INFO replication | tr -d '\r' | sed -n 's/^master_repl_offset://p')
t_is "role on the replica" "$(printf 'slave\n127.0.0.1\n%s\nconnected\n%s' "$P_PORT" "$off")" "$(r role)"
t_is "role on the primary" "$(printf 'master\n%s\n127.0.0.1\n%s\n%s' "$off" "$R_PORT" "$off")" "$(p role)"
t_is "a write to the replica" "READONLY You can't write against a read only replica." \
	"$(r BF.ADD visitors eve)"
t_is "info replication: link up" "master_link_status:up" \
	"$(r INFO replication | tr -d '\r' | grep '^master_link_status')"
t_is "replicaof no one" OK "$(r replicaof no one)"
t_is "promoted: it takes writes" 1 "$(r BF.ADD visitors eve)"
t_is "the primary has no replica left" 0 "$(p wait 1 100)"
daemon_stop_case
BLOSSOMD_PID=$P_PID BLOSSOMD_DIR=$P_DIR
P_PID=''
daemon_stop_case
t_done
