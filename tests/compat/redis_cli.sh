#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Debian's redis-cli against the real blossomd: the BF.* family and the connection basics with
# redis-cli's exact output (--no-raw, as on a terminal), and keys crossing between the text
# protocol and RESP on the one port. Prints TAP.
# shellcheck source=tests/compat/lib.sh
. "$(dirname "$0")/lib.sh"

need redis-cli
daemon_start

# cli ARGS...: redis-cli's formatted output (RESP2).
cli() {
	redis-cli -p "$BLOSSOMD_PORT" --no-raw "$@" 2>&1
}

# ---- connection basics ------------------------------------------------------------------

t_is "PING" "PONG" "$(cli PING)"
t_is "ECHO" '"hello"' "$(cli ECHO hello)"

# ---- BF.RESERVE / BF.ADD / BF.MADD ------------------------------------------------------

t_is "BF.RESERVE f 0.01 1000" "OK" "$(cli BF.RESERVE f 0.01 1000)"
t_is "BF.RESERVE on an existing name" "(error) ERR item exists" "$(cli BF.RESERVE f 0.01 1000)"
t_is "BF.ADD new item" "(integer) 1" "$(cli BF.ADD f a)"
t_is "BF.ADD same item again" "(integer) 0" "$(cli BF.ADD f a)"
t_is "BF.MADD" "1) (integer) 0
2) (integer) 1
3) (integer) 1" "$(cli BF.MADD f a b c)"

# ---- BF.EXISTS / BF.MEXISTS -------------------------------------------------------------

t_is "BF.EXISTS present" "(integer) 1" "$(cli BF.EXISTS f b)"
t_is "BF.EXISTS absent" "(integer) 0" "$(cli BF.EXISTS f never-added)"
t_is "BF.EXISTS on a missing filter" "(integer) 0" "$(cli BF.EXISTS missing x)"
t_is "BF.MEXISTS" "1) (integer) 1
2) (integer) 1
3) (integer) 0" "$(cli BF.MEXISTS f a c never-added)"
t_is "BF.MEXISTS on a missing filter" "1) (integer) 0
2) (integer) 0" "$(cli BF.MEXISTS missing x y)"
t_is "BF.EXISTS in RESP3 (redis-cli -3)" "(true)" "$(cli -3 BF.EXISTS f a)"

# ---- BF.INSERT ---------------------------------------------------------------------------

t_is "BF.INSERT creates with CAPACITY and ERROR" "1) (integer) 1
2) (integer) 1
3) (integer) 0" "$(cli BF.INSERT g CAPACITY 500 ERROR 0.001 ITEMS x y x)"
t_is "BF.INFO g CAPACITY after BF.INSERT" "1) (integer) 500" "$(cli BF.INFO g CAPACITY)"
t_is "BF.INSERT NOCREATE into an existing filter" "1) (integer) 0
2) (integer) 1" "$(cli BF.INSERT g NOCREATE ITEMS x z)"
t_is "BF.INSERT NOCREATE on a missing filter" "(error) ERR not found" \
	"$(cli BF.INSERT nope NOCREATE ITEMS x)"
t_is "BF.INSERT EXPANSION 4" "1) (integer) 1" "$(cli BF.INSERT h EXPANSION 4 ITEMS x)"
t_is "BF.INFO h EXPANSION" "1) (integer) 4" "$(cli BF.INFO h EXPANSION)"
t_is "BF.INSERT bad capacity" "(error) Bad capacity" "$(cli BF.INSERT bad CAPACITY 0 ITEMS a)"
t_is "BF.INSERT bad error rate" "(error) Bad error rate" "$(cli BF.INSERT bad ERROR 1.5 ITEMS a)"
t_is "BF.INSERT without ITEMS" "(error) ERR wrong number of arguments for 'bf.insert' command" \
	"$(cli BF.INSERT bad CAPACITY 10)"

# ---- BF.INFO / BF.CARD -------------------------------------------------------------------

# Size is the filter's bytes, the text protocol's "storage": compare the two.
storage=$(redis-cli -p "$BLOSSOMD_PORT" --raw BF.INFO f SIZE)
t_is "BF.INFO f" " 1) Capacity
 2) (integer) 1000
 3) Size
 4) (integer) $storage
 5) Number of filters
 6) (integer) 1
 7) Number of items inserted
 8) (integer) 3
 9) Expansion rate
10) (integer) 2" "$(cli BF.INFO f)"
t_is "BF.INFO f ITEMS" "1) (integer) 3" "$(cli BF.INFO f ITEMS)"
t_is "BF.INFO f FILTERS" "1) (integer) 1" "$(cli BF.INFO f FILTERS)"
t_is "BF.INFO in RESP3 is a map" "1# Capacity => (integer) 1000
2# Size => (integer) $storage
3# Number of filters => (integer) 1
4# Number of items inserted => (integer) 3
5# Expansion rate => (integer) 2" "$(cli -3 BF.INFO f)"
t_is "BF.INFO bad field" "(error) Invalid information value" "$(cli BF.INFO f COLOUR)"
t_is "BF.INFO on a missing filter" "(error) ERR not found" "$(cli BF.INFO missing)"
t_is "BF.CARD" "(integer) 3" "$(cli BF.CARD f)"
t_is "BF.CARD on a missing filter" "(integer) 0" "$(cli BF.CARD missing)"

# ---- non-scaling filters -----------------------------------------------------------------

t_is "BF.RESERVE NONSCALING" "OK" "$(cli BF.RESERVE n 0.01 2 NONSCALING)"
t_is "BF.MADD into a full non-scaling filter ends with the error" "1) (integer) 1
2) (integer) 1
3) (error) ERR non scaling filter is full" "$(cli BF.MADD n a b c d)"
t_is "BF.ADD into a full non-scaling filter" "(error) ERR non scaling filter is full" \
	"$(cli BF.ADD n e)"
t_is "BF.INFO of a non-scaling filter: Expansion rate is nil" " 1) Capacity
 2) (integer) 2
 3) Size
 4) (integer) $(redis-cli -p "$BLOSSOMD_PORT" --raw BF.INFO n SIZE)
 5) Number of filters
 6) (integer) 1
 7) Number of items inserted
 8) (integer) 2
 9) Expansion rate
10) (nil)" "$(cli BF.INFO n)"

# ---- errors ------------------------------------------------------------------------------

t_is "BF.ADD wrong arity" "(error) ERR wrong number of arguments for 'bf.add' command" \
	"$(cli BF.ADD f)"
t_is "BF.RESERVE bad error rate" "(error) ERR bad error rate" "$(cli BF.RESERVE e abc 100)"
t_is "BF.RESERVE error rate out of range" \
	"(error) ERR error rate must be in the range (0.000000, 1.000000)" \
	"$(cli BF.RESERVE e 1.5 100)"
t_is "BF.RESERVE bad capacity" "(error) ERR bad capacity" "$(cli BF.RESERVE e 0.01 lots)"
t_is "unknown command" "(error) ERR unknown command 'NOSUCH', with args beginning with: 'x' " \
	"$(cli NOSUCH x)"

# ---- keyspace commands -------------------------------------------------------------------

t_is "TYPE of a filter" "MBbloom--" "$(cli TYPE f)"
t_is "EXISTS" "(integer) 1" "$(cli EXISTS f)"
t_is "DBSIZE" "(integer) 4" "$(cli DBSIZE)"
t_is "KEYS (names sorted, as the registry lists them)" '1) "f"
2) "g"
3) "h"
4) "n"' "$(cli KEYS '*')"
t_is "DEL drops a filter" "(integer) 1" "$(cli DEL h)"
t_is "BF.EXISTS after DEL" "(integer) 0" "$(cli BF.EXISTS h x)"

# ---- text <-> RESP on the same port ------------------------------------------------------

text_open
t_is "text: create t" "Done" "$(text_cmd "create t capacity=1000 prob=0.01")"
t_is "text: set t k1" "Yes" "$(text_cmd "set t k1")"
t_is "text: bulk t k2 k3" "Yes Yes" "$(text_cmd "bulk t k2 k3")"
t_is "set over text, BF.EXISTS over redis-cli" "(integer) 1" "$(cli BF.EXISTS t k1)"
t_is "bulk over text, BF.MEXISTS over redis-cli" "1) (integer) 1
2) (integer) 1
3) (integer) 0" "$(cli BF.MEXISTS t k2 k3 k4)"
t_is "BF.CARD counts the text protocol's adds" "(integer) 3" "$(cli BF.CARD t)"
t_is "BF.ADD over text's filter, already present" "(integer) 0" "$(cli BF.ADD t k1)"

t_is "BF.ADD over redis-cli (creates r)" "(integer) 1" "$(cli BF.ADD r k9)"
t_is "BF.ADD over redis-cli, check over text" "Yes" "$(text_cmd "check r k9")"
t_is "text check of an absent key" "No" "$(text_cmd "check r k10")"
t_is "BF.MADD over redis-cli, multi over text" "1) (integer) 1
2) (integer) 1" "$(cli BF.MADD r k10 k11)"
t_is "text multi" "Yes Yes Yes No" "$(text_cmd "multi r k9 k10 k11 k12")"
t_is "text set of a key added over RESP" "No" "$(text_cmd "set r k11")"
t_is "a key with a space: BF.ADD, then text check (key is the rest of the line)" "Yes" \
	"$(cli BF.ADD r 'hello world' >/dev/null && text_cmd "check r hello world")"
t_is "text info sees RESP's items" "size 4" "$(text_cmd "info r" | grep '^size ')"
t_is "text storage equals BF.INFO Size" "storage $storage" "$(text_cmd "info f" | grep '^storage ')"
t_is "text list shows filters made over RESP" "START
f
g
n
r
t
END" "$(text_cmd "list" | cut -d' ' -f1)"
t_is "text drop, then BF.EXISTS" "Done
(integer) 0" "$(text_cmd "drop t"; cli BF.EXISTS t k1)"
text_close

# ---- FLUSHALL / FLUSHDB: how test suites start ----------------------------------------------

t_is "FLUSHALL" "OK" "$(cli FLUSHALL)"
t_is "DBSIZE after FLUSHALL" "(integer) 0" "$(cli DBSIZE)"
t_is "BF.ADD after FLUSHALL creates anew" "(integer) 1" "$(cli BF.ADD f x)"
t_is "FLUSHDB ASYNC" "OK" "$(cli FLUSHDB ASYNC)"
t_is "FLUSHALL with a bad argument" "(error) ERR syntax error" "$(cli FLUSHALL NOW)"
t_is "DBSIZE after FLUSHDB" "(integer) 0" "$(cli DBSIZE)"

# ---- redis-cli --pipe: mass insertion (Redis's documented way to load every user id) ------

# Keys per run: a million, fewer under valgrind (it runs the daemon 20-50 times slower).
pipe_n=1000000
case "${BLOSSOMD_WRAPPER:-}" in *valgrind*) pipe_n=20000 ;; esac
pipe_dir=$(mktemp -d)
# Plain lines (redis-cli sends them as they are: inline commands), and the RESP protocol.
awk -v n="$pipe_n" 'BEGIN { for (i = 0; i < n; i++) print "BF.ADD pipe-inline u" i }' \
	>"$pipe_dir/inline.txt"
awk -v n="$pipe_n" 'BEGIN { for (i = 0; i < n; i++) { k = "u" i;
	printf "*3\r\n$6\r\nBF.ADD\r\n$9\r\npipe-resp\r\n$%d\r\n%s\r\n", length(k), k } }' \
	>"$pipe_dir/resp.txt"
# Every key present: BF.MEXISTS of 1000 keys per line through plain redis-cli, one reply per
# line ("1" or "0", raw output), counted.
present() {
	awk -v n="$pipe_n" -v f="$1" 'BEGIN { for (i = 0; i < n; i += 1000) {
		printf "BF.MEXISTS %s", f
		for (j = i; j < i + 1000 && j < n; j++) printf " u%d", j
		print "" } }' | redis-cli -p "$BLOSSOMD_PORT" --raw 2>&1 | grep -c '^1$'
}
for kind in inline resp; do
	t_is "redis-cli --pipe, $kind input: $pipe_n keys, no error" \
		"errors: 0, replies: $pipe_n" \
		"$(redis-cli -p "$BLOSSOMD_PORT" --pipe <"$pipe_dir/$kind.txt" 2>&1 | tail -n 1)"
	t_is "every key of the $kind --pipe present" "$pipe_n" "$(present "pipe-$kind")"
done
rm -rf "$pipe_dir"

daemon_stop_case
t_done
