/* SPDX-License-Identifier: MIT */
/*
 * RESP: the administration commands Redis tools call, with Redis 7.0.15's replies: MODULE LIST
 * (blossomd answers as a Redis with RedisBloom loaded, name "bf", so clients and RedisInsight
 * find Bloom support the way they look for it; HELLO lists the same), OBJECT, WAIT, DEBUG
 * SLEEP, CONFIG SET and SHUTDOWN.
 *
 * Differences from Redis 7.0, on purpose:
 *   - MODULE LOAD, LOADEX and UNLOAD are refused: the BF.* family is built in.
 *   - WAIT counts the replicas that acknowledged the primary's offset as of the WAIT (at least
 *     the client's last write; Redis takes that write's offset), blocking as Redis does; with
 *     the write-ahead log off (no replication) it answers 0 at once.
 *   - DEBUG has SLEEP, DIGEST-VALUE and HELP only, and is allowed (Redis 7.0's enable-debug-command
 * is "no" by default); DEBUG SLEEP blocks the whole server, as in Redis: it is for testing tools
 *     such as redis-cli --latency.
 *   - CONFIG SET takes the keys SIGHUP applies live, by Redis's names where Redis has them
 *     (maxmemory, maxclients, timeout, loglevel, save as "SECONDS 1" or "") or by blossomd's
 *     own (max_key_bytes, ...); the rest (port, bind, dir, appendonly, appendfsync,
 *     requirepass: blossomd's restart-only keys) are immutable. CONFIG REWRITE writes the
 *     live keys back into the config file (conf_rewrite: comments and layout kept).
 *   - OBJECT IDLETIME is counted from the coarse once-a-second clock filters' use is stamped
 *     with (the one cold_interval pages out by).
 */
#include "proto/resp_cmd_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/bf_filter.h"
#include "proto/pubsub.h"

/* MODULE LIST's entries, as Redis 7.0's addReplyLoadedModules: one map per module. */
void resp_admin_module_list(struct proto_buf *out, int resp)
{
	proto_resp_array(out, 1);
	proto_resp_map(out, resp, 4);
	proto_resp_bulk_str(out, "name");
	proto_resp_bulk_str(out, "bf");
	proto_resp_bulk_str(out, "ver");
	proto_resp_integer(out, RESP_BF_MODULE_VERSION);
	proto_resp_bulk_str(out, "path");
	proto_resp_bulk_str(out, "");
	proto_resp_bulk_str(out, "args");
	proto_resp_array(out, 0);
}

void resp_admin_module(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	static const char *const help[] = {
	    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "LIST",
	    "    Return a list of loaded modules.",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};

	if (resp_arg_is(av, 1, "help") && av->argc == 2)
		resp_reply_help(out, help);
	else if (resp_arg_is(av, 1, "list") && av->argc == 2)
		resp_admin_module_list(out, s->resp);
	else if (resp_arg_is(av, 1, "list"))
		resp_error_arity(c, out, "module|list");
	else if (resp_arg_is(av, 1, "load") || resp_arg_is(av, 1, "loadex") ||
		 resp_arg_is(av, 1, "unload"))
		resp_error(c, out,
			   "ERR blossomd does not load modules: the BF.* family is built in");
	else
		resp_error_unknown_sub(c, av, out, "MODULE");
}

/*
 * OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key: a filter is a module value to Redis, so its
 * encoding is "raw" and its reference count 1; FREQ needs an LFU policy, which blossomd (never
 * evicting) does not have, so it is Redis's error for that; a missing key is a null.
 */
void resp_admin_object(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	static const char *const help[] = {
	    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "ENCODING <key>",
	    "    Return the kind of internal representation used in order to store the value",
	    "    associated with a <key>.",
	    "FREQ <key>",
	    "    Return the access frequency index of the <key>. The returned integer is",
	    "    proportional to the logarithm of the recent access frequency of the key.",
	    "IDLETIME <key>",
	    "    Return the idle time of the <key>, that is the approximated number of",
	    "    seconds elapsed since the last access to the key.",
	    "REFCOUNT <key>",
	    "    Return the number of references of the value associated with the specified",
	    "    <key>.",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};
	static const char *const subs[] = {"encoding", "freq", "idletime", "refcount"};
	static const char *const arity[] = {"object|encoding", "object|freq", "object|idletime",
					    "object|refcount"};
	size_t k = 0;

	if (resp_arg_is(av, 1, "help") && av->argc == 2) {
		resp_reply_help(out, help);
		return;
	}
	while (k < 4 && !resp_arg_is(av, 1, subs[k]))
		k++;
	if (k == 4) {
		resp_error_unknown_sub(c, av, out, "OBJECT");
		return;
	}
	if (av->argc != 3) {
		resp_error_arity(c, out, arity[k]);
		return;
	}
	struct bf_filter *f = resp_arg_filter(c, av, 2);
	if (!f) {
		proto_resp_null(out, s->resp);
		return;
	}
	if (k == 0)
		proto_resp_bulk_str(out, "raw");
	else if (k == 1)
		resp_error(c, out,
			   "ERR An LFU maxmemory policy is not selected, access frequency not "
			   "tracked. Please note that when switching between policies at runtime "
			   "LRU and LFU data will take some time to adjust.");
	else if (k == 2)
		proto_resp_integer(out, c->now_s > f->used_s ? (int64_t)(c->now_s - f->used_s) : 0);
	else
		proto_resp_integer(out, 1);
}

/* WAIT numreplicas timeout: Redis's argument checks, then the replicas that acknowledged. */
void resp_admin_wait(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	long long n, timeout;

	if (!resp_arg_ll(av, 1, &n)) {
		resp_error(c, out, resp_err_not_int);
		return;
	}
	if (!resp_arg_ll(av, 2, &timeout)) {
		resp_error(c, out, "ERR timeout is not an integer or out of range");
		return;
	}
	if (timeout < 0) {
		resp_error(c, out, "ERR timeout is negative");
		return;
	}
	long long acked = 0;
	/* The replicas' acknowledgements (server/repl_primary.c); it waits without holding the
	 * loop: the command is held and run again (cmd_ctx.write_wait). */
	/* In a transaction it answers at once, as Redis's does: an EXEC is never held. */
	int rc = c->hooks.repl
		     ? c->hooks.repl->wait(c->hooks.arg, s->id, c->in_exec ? 0 : n, timeout, &acked)
		     : 1;
	if (rc == -ECONNRESET) {
		/* It was waiting when this process became a replica: Redis 7.0's words, and as
		 * its disconnectAllBlockedClients the connection is closed after the reply. */
		resp_error(c, out,
			   "-UNBLOCKED force unblock from blocking operation, instance state "
			   "changed (master -> replica?)");
		s->close_after = true;
		return;
	}
	if (rc < 0) {
		resp_error(
		    c, out,
		    "ERR WAIT cannot be used with replica instances. Please also note that "
		    "since Redis 4.0 if a replica is configured to be writable (which is not "
		    "the default) writes to replicas are just local and are not propagated.");
		return;
	}
	if (rc == 0) {
		c->write_wait = true;
		return;
	}
	proto_resp_integer(out, acked);
}

/* DEBUG SLEEP seconds (a double, as Redis's strtod: 0 or less returns at once), DIGEST-VALUE
 * (resp_repl.c) and HELP. */
void resp_admin_debug(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	static const char *const help[] = {
	    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "DIGEST-VALUE <key> [<key> ...]",
	    "    Output a hex signature of the values of all the specified keys.",
	    "SLEEP <seconds>",
	    "    Stop the server for <seconds>. Decimals allowed.",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};
	double secs;
	(void)s;

	if (resp_arg_is(av, 1, "help") && av->argc == 2) {
		resp_reply_help(out, help);
		return;
	}
	if (resp_arg_is(av, 1, "digest-value")) {
		resp_repl_digest(c, s, av, out);
		return;
	}
	if (!resp_arg_is(av, 1, "sleep") || av->argc != 3) {
		resp_error_unknown_sub(c, av, out, "DEBUG");
		return;
	}
	if (!resp_arg_double(av, 2, &secs) || !isfinite(secs) || secs > INT32_MAX) {
		resp_error(c, out, "ERR value is not a valid float");
		return;
	}
	if (secs > 0) {
		struct timespec ts = {.tv_sec = (time_t)secs};
		ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
			;
	}
	proto_resp_ok(out);
}

/* ---------------------------------------------------------------------------------------- */
/* CONFIG SET */

/* Redis's parameter names for blossomd's keys; any other name is taken as blossomd's own. */
static const struct {
	const char *redis, *ours;
} config_names[] = {
    {"maxmemory", "max_memory"},
    {"maxclients", "max_connections"},
    {"timeout", "idle_timeout"},
    {"loglevel", "log_level"},
    {"save", "snapshot_interval"},
    {"port", "port"},
    {"bind", "bind"},
    {"dir", "data_dir"},
    {"appendonly", "wal"},
    {"appendfsync", "wal_fsync"},
    {"requirepass", "auth_token_file"},
    {"notify-keyspace-events", "notify_keyspace_events"},
};

#define CONFIG_KEY_MAX	 64
#define CONFIG_VALUE_MAX 4096

/* One CONFIG SET pair, as the server's config takes it. */
struct config_pair {
	char key[CONFIG_KEY_MAX];
	char val[CONFIG_VALUE_MAX];
};

/* Redis's memory values (memtoull: b, k = 1000, kb = 1024, m, mb, g, gb, any case) as bytes. */
static bool config_memory(const char *v, char *out, size_t outlen)
{
	static const struct {
		const char *unit;
		unsigned long long mul;
	} units[] = {{"", 1},	     {"b", 1},	      {"k", 1000},	 {"kb", 1024},
		     {"m", 1000000}, {"mb", 1 << 20}, {"g", 1000000000}, {"gb", 1 << 30}};
	char *end;
	unsigned long long n;

	if (!isdigit((unsigned char)v[0]))
		return false;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno)
		return false;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].unit) == 0) {
			if (n > ULLONG_MAX / units[i].mul)
				return false;
			snprintf(out, outlen, "%llu", n * units[i].mul);
			return true;
		}
	}
	return false;
}

/*
 * A pair in blossomd's terms: the key's INI name, the value translated where Redis writes it
 * differently (save "N 1" or "": a checkpoint every N seconds after a change, or none; memory
 * units; loglevel verbose). NULL, or the error text after "- " when the value cannot be one.
 */
static const char *config_pair_of(const char *name, size_t nlen, const char *val, size_t vlen,
				  struct config_pair *p)
{
	size_t i = 0;

	for (size_t k = 0; k < nlen; k++)
		p->key[k] = (char)tolower((unsigned char)name[k]);
	p->key[nlen] = '\0';
	memcpy(p->val, val, vlen);
	p->val[vlen] = '\0';
	while (i < sizeof(config_names) / sizeof(config_names[0]) &&
	       strcmp(p->key, config_names[i].redis))
		i++;
	if (i == sizeof(config_names) / sizeof(config_names[0]))
		return NULL;
	snprintf(p->key, sizeof(p->key), "%s", config_names[i].ours);
	if (!strcmp(p->key, "snapshot_interval")) {
		unsigned long secs;
		char *end;
		if (!vlen) {
			strcpy(p->val, "0");
			return NULL;
		}
		if (!isdigit((unsigned char)val[0]))
			return "Invalid save parameters";
		secs = strtoul(p->val, &end, 10);
		if (strcmp(end, " 1"))
			return "Invalid save parameters (blossomd checkpoints after any change: "
			       "\"SECONDS 1\")";
		snprintf(p->val, sizeof(p->val), "%lu", secs);
	} else if (!strcmp(p->key, "max_memory")) {
		char bytes[32];
		if (!config_memory(p->val, bytes, sizeof(bytes)))
			return "argument must be a memory value";
		snprintf(p->val, sizeof(p->val), "%s", bytes);
	} else if (!strcmp(p->key, "notify_keyspace_events")) {
		if (pubsub_notify_parse(val, vlen) < 0)
			return "Invalid event class character. Use '" PUBSUB_NOTIFY_LETTERS "'.";
	} else if (!strcmp(p->key, "log_level") && !strcasecmp(p->val, "verbose")) {
		strcpy(p->val, "info");
	}
	return NULL;
}

static void config_set_error(struct cmd_ctx *c, struct proto_buf *out, const char *name,
			     size_t nlen, const char *why)
{
	c->errors++;
	proto_resp_error_fmt(out, "CONFIG SET failed (possibly related to argument '%.*s') - %s",
			     (int)strnlen(name, nlen), name, why);
}

/*
 * CONFIG SET name value [name value ...]: Redis's names for the keys blossomd shares with it
 * (maxmemory, maxclients, timeout, loglevel, save), or blossomd's own; every pair or none, as
 * the server applies SIGHUP's re-read file (the config file itself is not written).
 */
void resp_admin_config_set(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			   struct proto_buf *out)
{
	size_t n = (av->argc - 2) / 2, bad = 0;
	struct config_pair *pairs;
	const char **keys, **vals;
	char err[512] = "";
	int rc;
	(void)s;

	if (av->argc < 4 || av->argc % 2) {
		resp_error_arity(c, out, "config|set");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t nlen = av->argvlen[2 + 2 * i], vlen = av->argvlen[3 + 2 * i];
		if (nlen == 0 || nlen >= CONFIG_KEY_MAX || memchr(av->argv[2 + 2 * i], 0, nlen)) {
			c->errors++;
			proto_resp_error_fmt(
			    out, "Unknown option or number of arguments for CONFIG SET - '%.*s'",
			    (int)strnlen(av->argv[2 + 2 * i], nlen > 128 ? 128 : nlen),
			    av->argv[2 + 2 * i]);
			return;
		}
		if (vlen >= CONFIG_VALUE_MAX || memchr(av->argv[3 + 2 * i], 0, vlen)) {
			config_set_error(c, out, av->argv[2 + 2 * i], nlen, "argument too long");
			return;
		}
	}
	if (!c->hooks.config_set) {
		resp_error(c, out, "ERR CONFIG SET is not available");
		return;
	}
	pairs = malloc(n * sizeof(*pairs));
	keys = malloc(n * sizeof(*keys));
	vals = malloc(n * sizeof(*vals));
	if (!pairs || !keys || !vals) {
		resp_error(c, out, resp_err_oom);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = av->argv[2 + 2 * i], *why;
		size_t nlen = av->argvlen[2 + 2 * i];

		why = config_pair_of(name, nlen, av->argv[3 + 2 * i], av->argvlen[3 + 2 * i],
				     &pairs[i]);
		for (size_t j = 0; !why && j < i; j++)
			if (!strcmp(pairs[j].key, pairs[i].key))
				why = "duplicate parameter";
		if (why) {
			config_set_error(c, out, name, nlen, why);
			goto out;
		}
		keys[i] = pairs[i].key;
		vals[i] = pairs[i].val;
	}
	rc = c->hooks.config_set(c->hooks.arg, n, keys, vals, &bad, err, sizeof(err));
	if (rc == 0)
		proto_resp_ok(out);
	else if (rc == -ENOENT) {
		c->errors++;
		proto_resp_error_fmt(
		    out, "Unknown option or number of arguments for CONFIG SET - '%.*s'",
		    (int)strnlen(av->argv[2 + 2 * bad], av->argvlen[2 + 2 * bad]),
		    av->argv[2 + 2 * bad]);
	} else
		config_set_error(c, out, av->argv[2 + 2 * bad], av->argvlen[2 + 2 * bad],
				 rc == -EPERM ? "can't set immutable config" : err);
out:
	free(pairs);
	free(keys);
	free(vals);
}

/*
 * CONFIG REWRITE: the live keys written back into the config file, as Redis 7.0's
 * configRewriteCommand answers (its errors: no file; "Rewriting config file: <reason>", the
 * failing step and path in the server log).
 */
void resp_admin_config_rewrite(struct cmd_ctx *c, struct cmd_session *s,
			       const struct proto_argv *av, struct proto_buf *out)
{
	char err[512] = "";
	int rc;
	(void)s;

	if (av->argc != 2) {
		resp_error_arity(c, out, "config|rewrite");
		return;
	}
	rc = c->hooks.config_rewrite ? c->hooks.config_rewrite(c->hooks.arg, err, sizeof(err))
				     : -EBADF;
	if (rc == 0) {
		proto_resp_ok(out);
	} else if (rc == -EBADF) {
		resp_error(c, out, "ERR The server is running without a config file");
	} else {
		c->errors++;
		/* A value that would not read back says which key, rather than "Invalid
		 * argument". */
		proto_resp_error_fmt(out, "Rewriting config file: %s",
				     rc == -EINVAL && err[0] ? err : strerror(-rc));
	}
}

/*
 * SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: Redis's checks, then the daemon stops as on
 * SIGTERM and the connection closes with no reply, as Redis's does. Plain SHUTDOWN and SAVE
 * write the changed filters (the final checkpoint, which a stop always writes); NOSAVE skips
 * it, as Redis skips its RDB save: with the log on nothing acknowledged is lost (the next
 * start replays the log), with wal = off what the last checkpoint lacks is, as in a Redis
 * without AOF. NOW and FORCE change nothing: no shutdown waits (there are no replicas), so
 * ABORT finds none in progress, and a failed final checkpoint cannot stop a stop already
 * under way (the exit status says so).
 */
void resp_admin_shutdown(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			 struct proto_buf *out)
{
	bool save = false, nosave = false, other = false, abort_it = false;

	for (size_t i = 1; i < av->argc; i++) {
		if (resp_arg_is(av, i, "nosave"))
			nosave = true;
		else if (resp_arg_is(av, i, "save"))
			save = true;
		else if (resp_arg_is(av, i, "now") || resp_arg_is(av, i, "force"))
			other = true;
		else if (resp_arg_is(av, i, "abort"))
			abort_it = true;
		else {
			resp_error(c, out, resp_err_syntax);
			return;
		}
	}
	if ((abort_it && (save || nosave || other)) || (save && nosave)) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	if (abort_it) {
		resp_error(c, out, "ERR No shutdown in progress.");
		return;
	}
	if (!c->hooks.shutdown || c->hooks.shutdown(c->hooks.arg, nosave)) {
		resp_error(c, out, "ERR Errors trying to SHUTDOWN. Check logs.");
		return;
	}
	s->close_after = true;
}
