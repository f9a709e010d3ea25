#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The tools of Debian's redis-cli a Redis user runs against a server, against the real blossomd,
# each bounded in time: --stat (INFO's keys, memory, clients, requests, connections), --bigkeys,
# --memkeys, --scan, --latency; the CONFIG GET answers tools read (appendonly, save); MODULE LIST
# and TYPE, by which tools detect Bloom support. Prints TAP.
# shellcheck source=tests/compat/lib.sh
. "$(dirname "$0")/lib.sh"

need redis-cli timeout stdbuf
daemon_start

cli() {
	redis-cli -p "$BLOSSOMD_PORT" --raw "$@" 2>&1
}

t_is "BF.ADD a" 1 "$(cli BF.ADD a x)"
t_is "BF.MADD b" "$(printf '1\n1\n1')" "$(cli BF.MADD b x y z)"

# ---- --stat: two lines of real numbers ---------------------------------------------------
# stdout is a pipe: line-buffered, so what it printed before timeout stopped it is kept.
stat=$(timeout 3 stdbuf -oL redis-cli -p "$BLOSSOMD_PORT" --stat -i 0.5 2>&1)
# keys mem clients blocked requests (+delta) connections
lines=$(printf '%s\n' "$stat" |
	grep -E '^[0-9]+ +[0-9.]+[BKMGT] +[0-9]+ +[0-9]+ +[0-9]+ \(\+[0-9]+\) +[0-9]+ *$')
if [[ $(printf '%s\n' "$lines" | grep -c .) -ge 2 ]] && ! printf '%s\n' "$stat" | grep -q -- '-9223372036854775808'; then
	ok "redis-cli --stat prints lines of numbers"
else
	not_ok "redis-cli --stat prints lines of numbers" "$stat"
fi
read -r keys mem clients blocked requests delta conns <<<"$(printf '%s\n' "$lines" | sed -n 2p)"
t_is "--stat keys: the two filters" 2 "$keys"
t_is "--stat mem: used_memory" "$(cli INFO memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p')B" "$mem"
t_is "--stat clients: its own connection" 1 "$clients"
t_is "--stat blocked: none" 0 "$blocked"
t_is "--stat requests grow by its one INFO per line" "(+1)" "$delta"
if ((requests >= 4 && conns >= 3)); then
	ok "--stat requests ($requests) and connections ($conns) count what came before"
else
	not_ok "--stat requests and connections count what came before" "$stat"
fi

# ---- CONFIG GET and INFO persistence: the log and the checkpoints -------------------------
t_is "CONFIG GET appendonly: the log is on" "$(printf 'appendonly\nyes')" "$(cli CONFIG GET appendonly)"
t_is "CONFIG GET save: a checkpoint every 5 s after a change" "$(printf 'save\n5 1')" "$(cli CONFIG GET save)"
t_is "CONFIG GET appendfsync: wal_fsync" "$(printf 'appendfsync\nalways')" "$(cli CONFIG GET appendfsync)"
t_is "INFO persistence: aof_enabled:1" "aof_enabled:1" \
	"$(cli INFO persistence | tr -d '\r' | grep '^aof_enabled:')"
t_is "INFO replication: role:master" "role:master" \
	"$(cli INFO replication | tr -d '\r' | grep '^role:')"
t_is "INFO clients: blocked_clients:0" "blocked_clients:0" \
	"$(cli INFO clients | tr -d '\r' | grep '^blocked_clients:')"
if cli INFO cpu | tr -d '\r' | grep -Eq '^used_cpu_user:[0-9]+\.[0-9]{6}$'; then
	ok "INFO cpu: used_cpu_user in seconds"
else
	not_ok "INFO cpu: used_cpu_user in seconds" "$(cli INFO cpu)"
fi

# ---- --bigkeys, --memkeys, --scan, --latency ----------------------------------------------
big=$(timeout 20 redis-cli -p "$BLOSSOMD_PORT" --bigkeys 2>&1)
if printf '%s\n' "$big" | grep -q '^Sampled 2 keys in the keyspace!' &&
	printf '%s\n' "$big" | grep -q '^2 MBbloom--s with '; then
	ok "redis-cli --bigkeys samples both filters as MBbloom-- keys"
else
	not_ok "redis-cli --bigkeys samples both filters as MBbloom-- keys" "$big"
fi
mem=$(timeout 20 redis-cli -p "$BLOSSOMD_PORT" --memkeys 2>&1)
want=$(($(cli MEMORY USAGE a) + $(cli MEMORY USAGE b)))
if printf '%s\n' "$mem" | grep -q "^2 MBbloom--s with $want bytes"; then
	ok "redis-cli --memkeys sums MEMORY USAGE ($want bytes)"
else
	not_ok "redis-cli --memkeys sums MEMORY USAGE ($want bytes)" "$mem"
fi
t_is "redis-cli --scan lists the filters" "$(printf 'a\nb')" \
	"$(timeout 20 redis-cli -p "$BLOSSOMD_PORT" --scan 2>&1 | sort)"
t_is "redis-cli --scan --pattern" "b" \
	"$(timeout 20 redis-cli -p "$BLOSSOMD_PORT" --scan --pattern 'b*' 2>&1)"
# Not a terminal: --latency samples for about a second and prints "min max avg samples".
lat=$(timeout 20 redis-cli -p "$BLOSSOMD_PORT" --latency 2>&1)
if [[ "$lat" =~ ^[0-9]+\ [0-9]+\ [0-9.]+\ [1-9][0-9]*$ ]]; then
	ok "redis-cli --latency reports min max avg samples ($lat)"
else
	not_ok "redis-cli --latency reports min max avg samples" "$lat"
fi
# DEBUG SLEEP answers once the time has passed.
t_is "DEBUG SLEEP 0.2" OK "$(cli DEBUG SLEEP 0.2)"
t_is "MODULE LIST names RedisBloom's bf" "$(printf 'name\nbf\nver\n20612\npath\n\nargs')" \
	"$(cli MODULE LIST)"
t_is "TYPE of a filter is RedisBloom's" "MBbloom--" "$(cli TYPE a)"

# ---- MONITOR and SUBSCRIBE, bounded -------------------------------------------------------
mon_out=$(mktemp)
sub_out=$(mktemp)
timeout 4 stdbuf -oL redis-cli -p "$BLOSSOMD_PORT" monitor >"$mon_out" 2>&1 &
mon_pid=$!
timeout 4 stdbuf -oL redis-cli -p "$BLOSSOMD_PORT" subscribe ch >"$sub_out" 2>&1 &
sub_pid=$!
# Both registered (CLIENT LIST: flags=O and flags=P) before the commands they should see.
for _ in $(seq 100); do
	list=$(cli CLIENT LIST)
	[[ $list == *" flags=O "* && $list == *" flags=P "* ]] && break
	sleep 0.05
done
cli BF.ADD mon 'a "quoted" key' >/dev/null
text_open
text_cmd "set mon textkey" >/dev/null
text_close
cli CONFIG GET save >/dev/null # admin: not shown
t_is "PUBLISH reaches the redis-cli subscriber" 1 "$(cli PUBLISH ch hello)"
wait "$mon_pid" "$sub_pid"
mon=$(tr -d '\r' <"$mon_out")
if printf '%s\n' "$mon" | grep -Eq '^[0-9]+\.[0-9]{6} \[0 127\.0\.0\.1:[0-9]+\] "BF\.ADD" "mon" "a \\"quoted\\" key"$'; then
	ok "redis-cli monitor shows BF.ADD, quoted as Redis quotes it"
else
	not_ok "redis-cli monitor shows BF.ADD, quoted as Redis quotes it" "$mon"
fi
if printf '%s\n' "$mon" | grep -Eq '^[0-9]+\.[0-9]{6} \[0 127\.0\.0\.1:[0-9]+\] "set" "mon" "textkey"$'; then
	ok "redis-cli monitor shows a text-protocol command as its words"
else
	not_ok "redis-cli monitor shows a text-protocol command as its words" "$mon"
fi
t_is "redis-cli monitor: admin commands not shown" 0 "$(printf '%s\n' "$mon" | grep -c '"CONFIG"')"
t_is "redis-cli subscribe prints the message" \
	"$(printf 'subscribe\nch\n1\nmessage\nch\nhello')" "$(tr -d '\r' <"$sub_out")"
rm -f "$mon_out" "$sub_out"

# ---- CONFIG SET and RESETSTAT on the live daemon -----------------------------------------
t_is "CONFIG SET maxclients timeout save" OK "$(cli CONFIG SET maxclients 50 timeout 100 save '7 1')"
t_is "CONFIG GET shows them" "$(printf 'maxclients\n50\nsave\n7 1\ntimeout\n100')" \
	"$(cli CONFIG GET maxclients save timeout)"
t_is "CONFIG SET max_key_bytes 4 (blossomd's own key)" OK "$(cli CONFIG SET max_key_bytes 4)"
t_is "an item past it is refused" "ERR item too long" "$(cli BF.ADD a 12345)"
t_is "CONFIG SET max_key_bytes 64K" OK "$(cli CONFIG SET max_key_bytes 64K)"
t_is "the item fits again" 1 "$(cli BF.ADD a 12345)"
t_is "CONFIG SET port: restart only" \
	"ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config" \
	"$(cli CONFIG SET port 1)"
t_is "CONFIG SET of a bad pair changes nothing" \
	"ERR CONFIG SET failed (possibly related to argument 'maxclients') - bad value for max_connections: 'x' (expected a whole number)" \
	"$(cli CONFIG SET timeout 5 maxclients x)"
t_is "timeout kept" "$(printf 'timeout\n100')" "$(cli CONFIG GET timeout)"
t_is "CONFIG RESETSTAT" OK "$(cli CONFIG RESETSTAT)"
t_is "INFO stats after it: this INFO's connection and command only" \
	"$(printf 'total_connections_received:1\ntotal_commands_processed:1')" \
	"$(cli INFO stats | tr -d '\r' | grep -E '^total_(connections_received|commands_processed):')"

daemon_stop_case
t_done
