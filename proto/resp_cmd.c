/* SPDX-License-Identifier: MIT */
/*
 * The RESP front end: RedisBloom's BF.* family and the connection basics Redis clients send,
 * mapped onto the shared command layer. Replies and error texts are RedisBloom's (the 8.x
 * sources: rebloom.c, sb.c) and Redis 7.0.15's, byte for byte, except where noted below.
 *
 * Differences from RedisBloom, on purpose:
 *   - BF.RESERVE refuses an unknown option with "ERR syntax error"; RedisBloom ignores it, so
 *     a typo such as NONSCALLING silently made a scaling filter. BF.INSERT matches whole option
 *     words; RedisBloom looks at one or two letters (any word starting with 'i' meant ITEMS).
 *   - Error rates above 0.25 are not capped to 0.25: the filter is sized for what was asked,
 *     as over the text and HTTP protocols. Expansion is [0, 32768] (BF_MAX_EXPANSION), as
 *     RedisBloom's.
 *   - Extensions: BF.RESERVE/BF.INSERT ... COUNTING makes a counting filter; BF.DEL key item
 *     deletes from one (":1" removed, ":0" absent; "ERR not a counting filter" on a plain
 *     filter). A filter that reached 1024 sub-filters (BF_MAX_LAYERS) answers "ERR filter
 *     reached its maximum of 1024 sub-filters" where RedisBloom would grow without bound (with
 *     expansion 2, max_memory comes first by far).
 *   - Names follow bf_name_valid() (1..200 printable bytes, no spaces): a create with another
 *     name is "ERR bad filter name"; a lookup of one simply finds nothing.
 *   - An item longer than max_key_bytes is refused with "ERR item too long" before anything
 *     changes (RedisBloom calls them items; "key" would read as the filter's name).
 *   - The memory limit (max_memory) is reported as Redis reports maxmemory, "-OOM command not
 *     allowed when used memory > 'maxmemory'.", which clients map to a typed error. Nothing
 *     changes: a create is not made, a growing add is not done.
 *   - BF.INFO "Size" is the bytes of the filter's layers, as charged against max_memory.
 *   - BF.SCANDUMP/BF.LOADCHUNK keep RedisBloom's iterator protocol (iterator 0 returns
 *     [1, header]; a data chunk's iterator is 1 + its end offset in the layers' bytes; [0, ""]
 *     ends the dump) with blossomd's own header, so a dump loads only into blossomd (see the
 *     dump section below). Chunks are at most 1 MiB (RedisBloom: 16 MiB). A header that does
 *     not fit max_memory is refused with the OOM error above before anything is allocated.
 *
 * As RedisBloom 2.4+: in RESP3 the answers of BF.ADD/MADD/INSERT/EXISTS/MEXISTS (and BF.DEL)
 * are booleans and BF.INFO is a map; a nonscaling filter's "Expansion rate" is null.
 *
 * Differences from Redis 7.0: CLIENT SETINFO is answered +OK (it is 7.2's; clients send it on
 * connect); client names are at most 63 bytes; SAVE/BGSAVE report a
 * failed snapshot as "ERR snapshot failed, see the server log" rather than a bare "ERR". Without a
 * token (cmd_ctx.token) AUTH and HELLO ... AUTH answer as a Redis without requirepass does; with
 * one, as a Redis with requirepass: only AUTH, HELLO (with AUTH to authenticate), PING and QUIT
 * before AUTH, others
 * "-NOAUTH Authentication required."; the connection closes after CMD_AUTH_MAX_FAILURES
 * failed attempts.
 */
#include "proto/resp_cmd_impl.h"
#include "proto/glob.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RESP_STR_(x) #x
#define RESP_STR(x)  RESP_STR_(x)

const char resp_err_not_found[] = "ERR not found";
const char resp_err_noauth[] = "-NOAUTH Authentication required.";
const char resp_err_oom[] = "-OOM command not allowed when used memory > 'maxmemory'.";
const char resp_err_item_long[] = "ERR item too long";
const char resp_err_full[] = "ERR non scaling filter is full";
const char resp_err_syntax[] = "ERR syntax error";
const char resp_err_not_int[] = "ERR value is not an integer or out of range";
const char resp_err_bad_data[] = "ERR received bad data";
/* KEYS, SCAN ... MATCH and CONFIG GET with a pattern over GLOB_MAX_PATTERN bytes (ours:
 * Redis takes any length). */
const char resp_err_pattern_long[] = "ERR pattern longer than " RESP_STR(GLOB_MAX_PATTERN) " bytes";

/* ---------------------------------------------------------------------------------------- */
/* Replies and argument helpers */

/* msg is the error as it goes out: "ERR not found" is sent as "-ERR not found"; a message
 * with a code of its own starts with '-' ("-Bad capacity", "-OOM ...") and is sent as is. */
void resp_error(struct cmd_ctx *c, struct proto_buf *out, const char *msg)
{
	c->errors++;
	if (strncmp(msg, "ERR ", 4) == 0)
		msg += 4;
	proto_resp_error_str(out, msg);
}

/* Redis's arity error; name is the command's lower-case name (Redis prints its own name for
 * the command, not the client's spelling). */
void resp_error_arity(struct cmd_ctx *c, struct proto_buf *out, const char *name)
{
	c->errors++;
	proto_resp_error_fmt(out, "wrong number of arguments for '%s' command", name);
}

static const char *resp_status_text(enum cmd_status st, const struct bf_filter *f)
{
	switch (st) {
	case CMD_NOT_FOUND:
		return resp_err_not_found;
	case CMD_EXISTS:
		return "ERR item exists";
	case CMD_BAD_NAME:
		return "ERR bad filter name";
	case CMD_BAD_ARGS:
		return "ERR bad arguments";
	case CMD_RATE_TOO_LOW:
		return "ERR error rate below 1e-12 is not supported";
	case CMD_KEY_TOO_LONG:
		return resp_err_item_long;
	case CMD_FULL:
		if (f && f->params->expansion != 0)
			return "ERR filter reached its maximum of " RESP_STR(
			    BF_MAX_LAYERS) " sub-filters";
		return resp_err_full;
	case CMD_NO_MEMORY:
		return resp_err_oom;
	case CMD_NOT_COUNTING:
		return "ERR not a counting filter";
	case CMD_LOG_FAILED:
		return "-MISCONF blossomd cannot write its write-ahead log; commands that change "
		       "filters are refused until it can (see the server log)";
	case CMD_AMBIGUOUS:
		return "ERR item is in more than one sub-filter, not deleted";
	case CMD_PAGED_OUT:
		return "ERR filter is paged out and could not be loaded (see the server log)";
	default:
		return "ERR internal error";
	}
}

void resp_error_status(struct cmd_ctx *c, struct proto_buf *out, enum cmd_status st,
		       const struct bf_filter *f)
{
	resp_error(c, out, resp_status_text(st, f));
}

void resp_cmd_log_failed(struct proto_buf *out)
{
	proto_resp_error_str(out, resp_status_text(CMD_LOG_FAILED, NULL));
}

/* Case-insensitive comparison of an argument with a lower- or upper-case word. */
bool resp_arg_is(const struct proto_argv *av, size_t i, const char *word)
{
	size_t n = strlen(word);
	return av->argvlen[i] == n && strncasecmp(av->argv[i], word, n) == 0;
}

bool resp_arg_ll(const struct proto_argv *av, size_t i, long long *out)
{
	return proto_resp_parse_ll(av->argv[i], av->argvlen[i], out);
}

/*
 * Redis's string2d: strtod over the whole argument, no leading space, no NaN, no overflow or
 * underflow to zero ("inf" parses; callers range-check). The argument is copied to a
 * NUL-terminated stack buffer; longer than 127 bytes is refused.
 */
bool resp_arg_double(const struct proto_argv *av, size_t i, double *out)
{
	char buf[128];
	size_t n = av->argvlen[i];
	char *end;

	if (n == 0 || n >= sizeof(buf) || isspace((unsigned char)av->argv[i][0]))
		return false;
	memcpy(buf, av->argv[i], n);
	buf[n] = '\0';
	errno = 0;
	double d = strtod(buf, &end);
	if ((size_t)(end - buf) != n || isnan(d))
		return false;
	if (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO))
		return false;
	*out = d;
	return true;
}

/* All of av's arguments from `first` on fit max_key_bytes. */
bool resp_items_fit(const struct cmd_ctx *c, const struct proto_argv *av, size_t first)
{
	/* The longest from the third on bounds them: no pass over a million keys if it fits. */
	if (first >= 2 && av->maxlen2 <= c->max_key_bytes)
		return true;
	return cmd_keys_fit(c, av->argc - first, av->argvlen + first);
}

/* The filter named by argument i, or NULL. */
struct bf_filter *resp_arg_filter(struct cmd_ctx *c, const struct proto_argv *av, size_t i)
{
	return cmd_lookup(c, av->argv[i], av->argvlen[i]);
}

/* "ERR unknown subcommand 'x'. Try CMD HELP." with the subcommand as the client typed it. */
void resp_error_unknown_sub(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out,
			    const char *upper)
{
	size_t n = strnlen(av->argv[1], av->argvlen[1]);

	c->errors++;
	proto_resp_error_fmt(out, "unknown subcommand '%.*s'. Try %s HELP.",
			     (int)(n > 128 ? 128 : n), av->argv[1], upper);
}

void resp_reply_help(struct proto_buf *out, const char *const *lines)
{
	size_t n = 0;

	while (lines[n])
		n++;
	proto_resp_array(out, n);
	for (size_t i = 0; i < n; i++)
		proto_resp_simple(out, lines[i], strlen(lines[i]));
}

/* ---------------------------------------------------------------------------------------- */
/* The command table */

struct resp_cmd {
	const char *name; /* lower case, as Redis names it in errors and COMMAND */
	size_t len;
	resp_handler run;
	unsigned min, max; /* argc bounds (command name included); max 0: no upper bound */
	/* The filter names it takes (COMMAND INFO's legacy range: proto/commands.json). */
	int first, last, step;
};

/* Hottest first: lookups scan the table in order. */
static const struct resp_cmd commands[] = {
    {"bf.add", 6, resp_bf_add, 3, 3, 1, 1, 1},
    {"bf.exists", 9, resp_bf_exists, 3, 3, 1, 1, 1},
    {"bf.madd", 7, resp_bf_madd, 3, 0, 1, 1, 1},
    {"bf.mexists", 10, resp_bf_mexists, 3, 0, 1, 1, 1},
    {"bf.insert", 9, resp_bf_insert, 4, 0, 1, 1, 1},
    {"bf.reserve", 10, resp_bf_reserve, 4, 8, 1, 1, 1},
    {"bf.info", 7, resp_bf_info, 2, 3, 1, 1, 1},
    {"bf.card", 7, resp_bf_card, 2, 2, 1, 1, 1},
    {"bf.del", 6, resp_bf_del, 3, 3, 1, 1, 1},
    {"bf.scandump", 11, resp_bf_scandump, 3, 3, 1, 1, 1},
    {"bf.loadchunk", 12, resp_bf_loadchunk, 4, 4, 1, 1, 1},
    {"ping", 4, resp_server_ping, 1, 2, 0, 0, 0},
    {"echo", 4, resp_server_echo, 2, 2, 0, 0, 0},
    {"quit", 4, resp_server_quit, 1, 0, 0, 0, 0},
    {"hello", 5, resp_server_hello, 1, 0, 0, 0, 0},
    {"auth", 4, resp_server_auth, 2, 0, 0, 0, 0},
    {"select", 6, resp_server_select, 2, 2, 0, 0, 0},
    {"client", 6, resp_server_client, 2, 0, 0, 0, 0},
    {"command", 7, resp_command, 1, 0, 0, 0, 0},
    {"config", 6, resp_server_config, 2, 0, 0, 0, 0},
    {"info", 4, resp_server_info, 1, 0, 0, 0, 0},
    {"dbsize", 6, resp_server_dbsize, 1, 1, 0, 0, 0},
    {"exists", 6, resp_server_exists, 2, 0, 1, -1, 1},
    {"del", 3, resp_server_del, 2, 0, 1, -1, 1},
    {"unlink", 6, resp_server_del, 2, 0, 1, -1, 1},
    {"type", 4, resp_server_type, 2, 2, 1, 1, 1},
    {"keys", 4, resp_server_keys, 2, 2, 0, 0, 0},
    {"scan", 4, resp_server_scan, 2, 0, 0, 0, 0},
    {"save", 4, resp_server_save, 1, 1, 0, 0, 0},
    {"bgsave", 6, resp_server_save, 1, 2, 0, 0, 0},
    {"lastsave", 8, resp_server_lastsave, 1, 1, 0, 0, 0},
    {"flushall", 8, resp_server_flushall, 1, 0, 0, 0, 0},
    {"flushdb", 7, resp_server_flushall, 1, 0, 0, 0, 0},
    {"memory", 6, resp_server_memory, 2, 0, 0, 0, 0},
    {"rename", 6, resp_keys_rename, 3, 3, 1, 2, 1},
    {"renamenx", 8, resp_keys_rename, 3, 3, 1, 2, 1},
    {"expire", 6, resp_keys_expire, 3, 0, 1, 1, 1},
    {"pexpire", 7, resp_keys_expire, 3, 0, 1, 1, 1},
    {"expireat", 8, resp_keys_expire, 3, 0, 1, 1, 1},
    {"pexpireat", 9, resp_keys_expire, 3, 0, 1, 1, 1},
    {"ttl", 3, resp_keys_ttl, 2, 2, 1, 1, 1},
    {"pttl", 4, resp_keys_ttl, 2, 2, 1, 1, 1},
    {"expiretime", 10, resp_keys_ttl, 2, 2, 1, 1, 1},
    {"pexpiretime", 11, resp_keys_ttl, 2, 2, 1, 1, 1},
    {"persist", 7, resp_keys_persist, 2, 2, 1, 1, 1},
    {"multi", 5, resp_multi_multi, 1, 1, 0, 0, 0},
    {"exec", 4, resp_multi_exec, 1, 1, 0, 0, 0},
    {"discard", 7, resp_multi_discard, 1, 1, 0, 0, 0},
    {"watch", 5, resp_multi_watch, 2, 0, 1, -1, 1},
    {"unwatch", 7, resp_multi_unwatch, 1, 1, 0, 0, 0},
    {"bf.debug", 8, resp_bf_debug, 2, 2, 1, 1, 1},
    {"module", 6, resp_admin_module, 2, 0, 0, 0, 0},
    {"object", 6, resp_admin_object, 2, 0, 0, 0, 0},
    {"wait", 4, resp_admin_wait, 3, 3, 0, 0, 0},
    {"debug", 5, resp_admin_debug, 2, 0, 0, 0, 0},
    {"shutdown", 8, resp_admin_shutdown, 1, 0, 0, 0, 0},
    {"subscribe", 9, resp_pubsub_subscribe, 2, 0, 0, 0, 0},
    {"unsubscribe", 11, resp_pubsub_unsubscribe, 1, 0, 0, 0, 0},
    {"psubscribe", 10, resp_pubsub_subscribe, 2, 0, 0, 0, 0},
    {"punsubscribe", 12, resp_pubsub_unsubscribe, 1, 0, 0, 0, 0},
    {"publish", 7, resp_pubsub_publish, 3, 3, 0, 0, 0},
    {"pubsub", 6, resp_pubsub_pubsub, 2, 0, 0, 0, 0},
    {"monitor", 7, resp_pubsub_monitor, 1, 1, 0, 0, 0},
    {"reset", 5, resp_pubsub_reset, 1, 1, 0, 0, 0},
    {"replicaof", 9, resp_repl_replicaof, 3, 3, 0, 0, 0},
    {"slaveof", 7, resp_repl_replicaof, 3, 3, 0, 0, 0},
    {"replconf", 8, resp_repl_replconf, 1, 0, 0, 0, 0},
    {"psync", 5, resp_repl_psync, 3, 3, 0, 0, 0},
    {"role", 4, resp_repl_role, 1, 1, 0, 0, 0},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The longest command name in the table, plus one. */
#define NAME_MAX_LEN 16

static const struct resp_cmd *lookup(const char *p, size_t n)
{
	char low[NAME_MAX_LEN];

	if (n >= NAME_MAX_LEN)
		return NULL;
	for (size_t i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)p[i]);
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (commands[i].len == n && memcmp(commands[i].name, low, n) == 0)
			return &commands[i];
	return NULL;
}

/* Redis 7.0.15's top-level command names (COMMAND LIST less subcommands), sorted. */
static const char *const redis_names[] = {
    "acl",
    "append",
    "asking",
    "auth",
    "bgrewriteaof",
    "bgsave",
    "bitcount",
    "bitfield",
    "bitfield_ro",
    "bitop",
    "bitpos",
    "blmove",
    "blmpop",
    "blpop",
    "brpop",
    "brpoplpush",
    "bzmpop",
    "bzpopmax",
    "bzpopmin",
    "client",
    "cluster",
    "command",
    "config",
    "copy",
    "dbsize",
    "debug",
    "decr",
    "decrby",
    "del",
    "discard",
    "dump",
    "echo",
    "eval",
    "eval_ro",
    "evalsha",
    "evalsha_ro",
    "exec",
    "exists",
    "expire",
    "expireat",
    "expiretime",
    "failover",
    "fcall",
    "fcall_ro",
    "flushall",
    "flushdb",
    "function",
    "geoadd",
    "geodist",
    "geohash",
    "geopos",
    "georadius",
    "georadius_ro",
    "georadiusbymember",
    "georadiusbymember_ro",
    "geosearch",
    "geosearchstore",
    "get",
    "getbit",
    "getdel",
    "getex",
    "getrange",
    "getset",
    "hdel",
    "hello",
    "hexists",
    "hget",
    "hgetall",
    "hincrby",
    "hincrbyfloat",
    "hkeys",
    "hlen",
    "hmget",
    "hmset",
    "hrandfield",
    "hscan",
    "hset",
    "hsetnx",
    "hstrlen",
    "hvals",
    "incr",
    "incrby",
    "incrbyfloat",
    "info",
    "keys",
    "lastsave",
    "latency",
    "lcs",
    "lindex",
    "linsert",
    "llen",
    "lmove",
    "lmpop",
    "lolwut",
    "lpop",
    "lpos",
    "lpush",
    "lpushx",
    "lrange",
    "lrem",
    "lset",
    "ltrim",
    "memory",
    "mget",
    "migrate",
    "module",
    "monitor",
    "move",
    "mset",
    "msetnx",
    "multi",
    "object",
    "persist",
    "pexpire",
    "pexpireat",
    "pexpiretime",
    "pfadd",
    "pfcount",
    "pfdebug",
    "pfmerge",
    "pfselftest",
    "ping",
    "psetex",
    "psubscribe",
    "psync",
    "pttl",
    "publish",
    "pubsub",
    "punsubscribe",
    "quit",
    "randomkey",
    "readonly",
    "readwrite",
    "rename",
    "renamenx",
    "replconf",
    "replicaof",
    "reset",
    "restore",
    "restore-asking",
    "role",
    "rpop",
    "rpoplpush",
    "rpush",
    "rpushx",
    "sadd",
    "save",
    "scan",
    "scard",
    "script",
    "sdiff",
    "sdiffstore",
    "select",
    "set",
    "setbit",
    "setex",
    "setnx",
    "setrange",
    "shutdown",
    "sinter",
    "sintercard",
    "sinterstore",
    "sismember",
    "slaveof",
    "slowlog",
    "smembers",
    "smismember",
    "smove",
    "sort",
    "sort_ro",
    "spop",
    "spublish",
    "srandmember",
    "srem",
    "sscan",
    "ssubscribe",
    "strlen",
    "subscribe",
    "substr",
    "sunion",
    "sunionstore",
    "sunsubscribe",
    "swapdb",
    "sync",
    "time",
    "touch",
    "ttl",
    "type",
    "unlink",
    "unsubscribe",
    "unwatch",
    "wait",
    "watch",
    "xack",
    "xadd",
    "xautoclaim",
    "xclaim",
    "xdel",
    "xgroup",
    "xinfo",
    "xlen",
    "xpending",
    "xrange",
    "xread",
    "xreadgroup",
    "xrevrange",
    "xsetid",
    "xtrim",
    "zadd",
    "zcard",
    "zcount",
    "zdiff",
    "zdiffstore",
    "zincrby",
    "zinter",
    "zintercard",
    "zinterstore",
    "zlexcount",
    "zmpop",
    "zmscore",
    "zpopmax",
    "zpopmin",
    "zrandmember",
    "zrange",
    "zrangebylex",
    "zrangebyscore",
    "zrangestore",
    "zrank",
    "zrem",
    "zremrangebylex",
    "zremrangebyrank",
    "zremrangebyscore",
    "zrevrange",
    "zrevrangebylex",
    "zrevrangebyscore",
    "zrevrank",
    "zscan",
    "zscore",
    "zunion",
    "zunionstore",
};

struct name_key {
	const char *p;
	size_t n;
};

static int name_cmp(const void *key, const void *elem)
{
	const struct name_key *k = key;
	const char *name = *(const char *const *)elem;
	size_t len = strlen(name);
	int r = strncasecmp(k->p, name, k->n < len ? k->n : len);

	if (r)
		return r;
	return k->n < len ? -1 : k->n > len ? 1 : 0;
}

/* Module families whose commands a Redis with RedisBloom has ("BF.FOO" is still Redis's). */
static bool module_prefix(const char *p, size_t n)
{
	static const char *const prefixes[] = {"bf.", "cf.", "cms.", "topk.", "tdigest."};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t len = strlen(prefixes[i]);
		if (n > len && strncasecmp(p, prefixes[i], len) == 0)
			return true;
	}
	return false;
}

const char *resp_cmd_name_at(size_t i)
{
	return i < NCOMMANDS ? commands[i].name : NULL;
}

bool resp_cmd_known(const char *p, size_t n)
{
	struct name_key key = {p, n};

	if (lookup(p, n) || module_prefix(p, n))
		return true;
	return bsearch(&key, redis_names, sizeof(redis_names) / sizeof(redis_names[0]),
		       sizeof(redis_names[0]), name_cmp) != NULL;
}

/* Redis 7.0's unknown-command error: the name and up to ~128 bytes of quoted arguments, each
 * cut at its first NUL as Redis's "%s" does. */
static void reply_unknown(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out)
{
	char msg[512];
	size_t len = 0, args = 0;
	size_t n0 = strnlen(av->argv[0], av->argvlen[0]);

	if (n0 > 128)
		n0 = 128;
	memcpy(msg + len, "unknown command '", 17);
	len += 17;
	memcpy(msg + len, av->argv[0], n0);
	len += n0;
	memcpy(msg + len, "', with args beginning with: ", 29);
	len += 29;
	for (size_t i = 1; i < av->argc && args < 128; i++) {
		size_t n = strnlen(av->argv[i], av->argvlen[i]);
		if (n > 128 - args)
			n = 128 - args;
		msg[len++] = '\'';
		memcpy(msg + len, av->argv[i], n);
		len += n;
		msg[len++] = '\'';
		msg[len++] = ' ';
		args += n + 3;
	}
	c->errors++;
	proto_resp_error(out, msg, len);
}

/* Whether e reads or changes its filters' keys or layers: a paged-out filter is loaded first. */
static bool loads_filters(const struct resp_cmd *e)
{
	return strncmp(e->name, "bf.", 3) == 0 || e->run == resp_keys_rename ||
	       e->run == resp_keys_expire || e->run == resp_keys_persist;
}

/* Start loading e's paged-out filters: CMD_OK (c->paging set if one is loading), or
 * CMD_PAGED_OUT if one cannot be loaded. */
static enum cmd_status load_filters(struct cmd_ctx *c, const struct resp_cmd *e,
				    const struct proto_argv *av)
{
	size_t last = e->last < 0 ? av->argc - 1 : (size_t)e->last;

	for (size_t k = (size_t)e->first; k <= last && k < av->argc; k += (size_t)e->step) {
		if (cmd_ready(c, av->argv[k], av->argvlen[k]) != CMD_OK)
			return CMD_PAGED_OUT;
		if (c->paging)
			break;
	}
	return CMD_OK;
}

bool resp_cmd_load(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av)
{
	const struct resp_cmd *e = lookup(av->argv[0], av->argvlen[0]);

	/* One that cannot be loaded is left to the command's own run, which answers its error. */
	if (e && loads_filters(e) && cmd_session_authed(c, s) && e->first > 0)
		load_filters(c, e, av);
	return c->paging != NULL;
}

/* Redis's fullname of the command av runs: "client|list" for a container's subcommand. */
static void full_name(const struct resp_cmd *e, const struct proto_argv *av, char *buf, size_t n)
{
	static const char *const containers[] = {"client", "command", "config", "memory",
						 "module", "object",  "pubsub"};
	size_t k = 0;

	while (k < sizeof(containers) / sizeof(containers[0]) && strcmp(containers[k], e->name))
		k++;
	if (k == sizeof(containers) / sizeof(containers[0]) || av->argc < 2) {
		snprintf(buf, n, "%s", e->name);
		return;
	}
	size_t len = (size_t)snprintf(buf, n, "%s|", e->name);
	for (size_t i = 0; i < av->argvlen[1] && len + 1 < n; i++)
		buf[len++] = (char)tolower((unsigned char)av->argv[1][i]);
	buf[len] = '\0';
}

/* A RESP2 subscriber's command other than those it may send, as Redis refuses it. */
static void reply_pubsub_context(struct cmd_ctx *c, struct cmd_session *s, const char *name,
				 struct proto_buf *out)
{
	c->errors++;
	proto_resp_error_fmt(out,
			     "Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
			     "QUIT / RESET are allowed in this context",
			     name);
	cmd_multi_flag(s);
}

/* Redis's processCommand under MULTI for a command e that passed the checks: run at once
 * (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET), refused (SAVE: "no-multi"), or queued. */
static bool multi_queued(struct cmd_ctx *c, struct cmd_session *s, const struct resp_cmd *e,
			 const struct proto_argv *av, struct proto_buf *out)
{
	if (!cmd_multi_active(s) || e->run == resp_multi_exec || e->run == resp_multi_discard ||
	    e->run == resp_multi_multi || e->run == resp_multi_watch ||
	    e->run == resp_server_quit || e->run == resp_pubsub_reset)
		return false;
	if (e->run == resp_server_save && !resp_arg_is(av, 0, "bgsave")) {
		resp_error(c, out, "ERR Command not allowed inside a transaction");
		cmd_multi_flag(s);
		return true;
	}
	int rc = cmd_multi_queue(c, s, av->argc, av->argv, av->argvlen);
	if (rc == 0) {
		/* Counted when EXEC runs it, as Redis counts it. */
		c->commands--;
		c->peer_commands[CMD_PEER_RESP]--;
		proto_resp_simple(out, "QUEUED", 6);
		return true;
	}
	if (rc == -E2BIG)
		proto_resp_error_fmt(out, "MULTI queue is full (multi_max_commands is %zu)",
				     c->multi_max_commands);
	else if (rc == -EMSGSIZE)
		proto_resp_error_fmt(out, "MULTI queue is full (multi_max_bytes is %zu)",
				     c->multi_max_bytes);
	else
		proto_resp_error_str(out, "internal error");
	c->errors++;
	cmd_multi_flag(s);
	return true;
}

/* A command refused before it runs: as Redis's rejectCommand, an EXEC so refused aborts the
 * transaction with the reason; under MULTI, the transaction is flagged (EXEC aborts). */
static void reply_arity(struct cmd_ctx *c, struct cmd_session *s, const struct resp_cmd *e,
			struct proto_buf *out)
{
	if (e->run == resp_multi_exec) {
		c->errors++;
		proto_resp_error_fmt(out,
				     "-EXECABORT Transaction discarded because of: wrong number of "
				     "arguments for '%s' command",
				     e->name);
		cmd_multi_discard(s);
		return;
	}
	resp_error_arity(c, out, e->name);
	cmd_multi_flag(s);
}

void resp_cmd_exec(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	if (av->argc == 0)
		return;
	const struct resp_cmd *e = lookup(av->argv[0], av->argvlen[0]);
	/* Its filters in memory first; if one is loading, the command runs again later. Not for
	 * one that is queued: EXEC loads them. */
	if (e && loads_filters(e) && cmd_session_authed(c, s) && e->first > 0 &&
	    !cmd_multi_active(s)) {
		if (load_filters(c, e, av) != CMD_OK) {
			c->commands++;
			c->peer_commands[CMD_PEER_RESP]++;
			resp_error_status(c, out, CMD_PAGED_OUT, NULL);
			return;
		}
		if (c->paging)
			return;
	}
	c->commands++;
	c->peer_commands[CMD_PEER_RESP]++;
	s->last_cmd = e ? e->name : NULL; /* as Redis's lastcmd: before the checks below */
	if (!cmd_session_authed(c, s) &&
	    (!e || (e->run != resp_server_auth && e->run != resp_server_hello &&
		    e->run != resp_server_ping && e->run != resp_server_quit &&
		    e->run != resp_pubsub_reset))) {
		resp_error(c, out, resp_err_noauth);
		cmd_multi_flag(s);
		return;
	}
	if (!e && !resp_pubsub_allowed(s, NULL) && resp_cmd_known(av->argv[0], av->argvlen[0])) {
		/* A Redis command blossomd lacks: Redis would refuse it for the context. */
		char name[NAME_MAX_LEN + 32];
		size_t n = av->argvlen[0] < sizeof(name) - 1 ? av->argvlen[0] : sizeof(name) - 1;

		for (size_t i = 0; i < n; i++)
			name[i] = (char)tolower((unsigned char)av->argv[0][i]);
		name[n] = '\0';
		reply_pubsub_context(c, s, name, out);
		return;
	}
	if (!e) {
		reply_unknown(c, av, out);
		cmd_multi_flag(s);
		return;
	}
	if (av->argc < e->min || (e->max && av->argc > e->max)) {
		reply_arity(c, s, e, out);
		return;
	}
	if (!resp_pubsub_allowed(s, e->run)) {
		char name[64];

		full_name(e, av, name, sizeof(name));
		reply_pubsub_context(c, s, name, out);
		return;
	}
	/* As Redis's processCommand: a replica refuses clients' writes (queued ones too). */
	if (c->replica && resp_command_flagged(av, "write")) {
		resp_error(c, out, "-READONLY You can't write against a read only replica.");
		cmd_multi_flag(s);
		return;
	}
	if (multi_queued(c, s, e, av, out))
		return;
	e->run(c, s, av, out);
	/* Shown once it has run to its end (not while it waits for a load or a write, or has
	 * replied in part), as Redis's call() shows it after its run. */
	if (c->monitors && c->hooks.monitor_feed && !c->paging && !c->write_wait && !c->again &&
	    !resp_command_flagged(av, "admin"))
		resp_pubsub_feed(c, s, av);
}
