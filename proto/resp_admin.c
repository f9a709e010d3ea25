/* SPDX-License-Identifier: MIT */
/*
 * RESP: the administration commands Redis tools call, with Redis 7.0.15's replies: MODULE LIST
 * (blossomd answers as a Redis with RedisBloom loaded, name "bf", so clients and RedisInsight
 * find Bloom support the way they look for it; HELLO lists the same), OBJECT, WAIT and DEBUG
 * SLEEP.
 *
 * Differences from Redis 7.0, on purpose:
 *   - MODULE LOAD, LOADEX and UNLOAD are refused: the BF.* family is built in.
 *   - WAIT answers 0 at once: there are no replicas, and a reply is sent only once the changes
 *     it acknowledges are durable in the log (Redis would block until the timeout, or forever
 *     with timeout 0, when asked for more replicas than it has).
 *   - DEBUG has SLEEP and HELP only, and is allowed (Redis 7.0's enable-debug-command is "no"
 *     by default); DEBUG SLEEP blocks the whole server, as in Redis: it is for testing tools
 *     such as redis-cli --latency.
 *   - OBJECT IDLETIME is counted from the coarse once-a-second clock filters' use is stamped
 *     with (the one cold_interval pages out by).
 */
#include "proto/resp_cmd_impl.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/bf_filter.h"

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

/* WAIT numreplicas timeout: Redis's argument checks, then 0 replicas (there are none). */
void resp_admin_wait(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	long long n, timeout;
	(void)s;

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
	proto_resp_integer(out, 0);
}

/* DEBUG SLEEP seconds (a double, as Redis's strtod: 0 or less returns at once) and HELP. */
void resp_admin_debug(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	static const char *const help[] = {
	    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
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
