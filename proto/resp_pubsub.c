/* SPDX-License-Identifier: MIT */
/*
 * RESP: publish/subscribe and MONITOR with Redis 7.0.15's replies: SUBSCRIBE, UNSUBSCRIBE,
 * PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB CHANNELS|NUMSUB|NUMPAT|HELP, MONITOR and RESET.
 * The registry is proto/pubsub.c; delivery is the server's (cmd_hooks.push). In RESP2 the
 * confirmations and messages are arrays, in RESP3 pushes (">"); a RESP2 client with a
 * subscription may only send (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT and RESET
 * (resp_pubsub_allowed, checked by resp_cmd_exec), and its PING answers ["pong", arg].
 *
 * Differences from Redis 7.0, on purpose:
 *   - A channel or pattern longer than max_channel_bytes is refused ("ERR channel longer than
 *     max_channel_bytes (N)") in place of its confirmation, and PUBLISH to one is an error:
 *     matching a message's channel against every pattern must stay within the loop's budget.
 *   - UNSUBSCRIBE with no arguments leaves the channels in the order they were subscribed
 *     (Redis: its hash table's order). PUBSUB CHANNELS lists them oldest first.
 *   - SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB SHARD* (cluster shard channels) are not
 *     served (no cluster yet).
 */
#include "proto/resp_cmd_impl.h"

#include <errno.h>
#include <string.h>

#include "proto/glob.h"
#include "proto/pubsub.h"

/* A confirmation's or message's header: an array in RESP2, a push in RESP3. */
static void push_header(struct proto_buf *out, int resp, size_t n)
{
	proto_buf_append_char(out, resp >= 3 ? '>' : '*');
	proto_buf_append_u64(out, n);
	proto_buf_append(out, "\r\n", 2);
}

/* ["subscribe", name, count] and the like; name NULL: a null (nothing to leave). */
static void confirm(struct proto_buf *out, int resp, const char *kind, const char *name, size_t len,
		    size_t count)
{
	push_header(out, resp, 3);
	proto_resp_bulk_str(out, kind);
	if (name)
		proto_resp_bulk(out, name, len);
	else
		proto_resp_null(out, resp);
	proto_resp_integer(out, (int64_t)count);
}

static size_t sub_count(const struct cmd_session *s)
{
	return pubsub_session_count(s, false) + pubsub_session_count(s, true);
}

static void error_too_long(struct cmd_ctx *c, struct proto_buf *out)
{
	c->errors++;
	proto_resp_error_fmt(out, "channel longer than max_channel_bytes (%zu)",
			     c->max_channel_bytes);
}

/* SUBSCRIBE channel [channel ...], PSUBSCRIBE pattern [pattern ...] */
RESP_HANDLER(resp_pubsub_subscribe)
{
	bool pattern = resp_arg_is(av, 0, "psubscribe");

	if (!c->pubsub && pubsub_new(&c->pubsub)) {
		resp_error(c, out, resp_err_oom);
		return;
	}
	for (size_t i = 1; i < av->argc; i++) {
		int rc = 0;

		if (c->max_channel_bytes && av->argvlen[i] > c->max_channel_bytes) {
			error_too_long(c, out);
			continue;
		}
		rc = pubsub_subscribe(c->pubsub, s, pattern, av->argv[i], av->argvlen[i]);
		if (rc < 0) {
			resp_error(c, out, rc == -E2BIG ? resp_err_pattern_long : resp_err_oom);
			continue;
		}
		confirm(out, s->resp, pattern ? "psubscribe" : "subscribe", av->argv[i],
			av->argvlen[i], sub_count(s));
	}
}

struct unsub_all {
	struct proto_buf *out;
	int resp;
	const char *kind;
};

static void unsub_one(void *arg, const char *name, size_t len, size_t left)
{
	struct unsub_all *u = arg;

	confirm(u->out, u->resp, u->kind, name, len, left);
}

/* UNSUBSCRIBE [channel ...], PUNSUBSCRIBE [pattern ...] */
RESP_HANDLER(resp_pubsub_unsubscribe)
{
	bool pattern = resp_arg_is(av, 0, "punsubscribe");
	const char *kind = pattern ? "punsubscribe" : "unsubscribe";
	struct unsub_all u = {out, s->resp, kind};

	if (av->argc == 1) {
		/* None to leave: still one confirmation, with a null name. */
		if (!pubsub_unsubscribe_all(s, pattern, unsub_one, &u))
			confirm(out, s->resp, kind, NULL, 0, sub_count(s));
		return;
	}
	for (size_t i = 1; i < av->argc; i++) {
		if (c->pubsub)
			pubsub_unsubscribe(c->pubsub, s, pattern, av->argv[i], av->argvlen[i]);
		confirm(out, s->resp, kind, av->argv[i], av->argvlen[i], sub_count(s));
	}
}

/* PUBLISH channel message: the number of deliveries. */
RESP_HANDLER(resp_pubsub_publish)
{
	(void)s;
	if (c->max_channel_bytes && av->argvlen[1] > c->max_channel_bytes) {
		error_too_long(c, out);
		return;
	}
	proto_resp_integer(
	    out, (int64_t)cmd_publish(c, av->argv[1], av->argvlen[1], av->argv[2], av->argvlen[2]));
}

struct channel_list {
	struct proto_buf names;
	size_t n;
	const struct glob *g;
};

static void channel_one(void *arg, const char *name, size_t len)
{
	struct channel_list *l = arg;

	if (l->g && !glob_match(l->g, name, len))
		return;
	proto_resp_bulk(&l->names, name, len);
	l->n++;
}

/* PUBSUB CHANNELS [pattern] */
static void pubsub_channels(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out)
{
	struct channel_list l = {.n = 0};
	struct glob *g = NULL;

	if (av->argc == 3) {
		int rc = glob_compile(av->argv[2], av->argvlen[2], false, &g);
		if (rc) {
			resp_error(c, out, rc == -E2BIG ? resp_err_pattern_long : resp_err_oom);
			return;
		}
	}
	l.g = g;
	proto_buf_init(&l.names);
	pubsub_each_channel(c->pubsub, channel_one, &l);
	glob_free(g);
	if (l.names.failed) {
		proto_buf_free(&l.names);
		resp_error(c, out, resp_err_oom);
		return;
	}
	proto_resp_array(out, l.n);
	proto_buf_append(out, l.names.data, l.names.len);
	proto_buf_free(&l.names);
}

/* PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT | HELP */
RESP_HANDLER(resp_pubsub_pubsub)
{
	static const char *const help[] = {
	    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "CHANNELS [<pattern>]",
	    "    Return the currently active channels matching a <pattern> (default: '*').",
	    "NUMPAT",
	    "    Return number of subscriptions to patterns.",
	    "NUMSUB [<channel> ...]",
	    "    Return the number of subscribers for the specified channels, excluding",
	    "    pattern subscriptions(default: no channels).",
	    "SHARDCHANNELS [<pattern>]",
	    "    Return the currently active shard level channels matching a <pattern> (default: "
	    "'*').",
	    "SHARDNUMSUB [<shardchannel> ...]",
	    "    Return the number of subscribers for the specified shard level channel(s)",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};

	bool shard = resp_arg_is(av, 1, "shardchannels") || resp_arg_is(av, 1, "shardnumsub");

	s->last_cmd = "pubsub";
	if (resp_arg_is(av, 1, "help") || resp_arg_is(av, 1, "numpat")) {
		s->last_cmd = resp_arg_is(av, 1, "help") ? "pubsub|help" : "pubsub|numpat";
		if (av->argc != 2)
			resp_error_arity(c, out, s->last_cmd);
		else if (resp_arg_is(av, 1, "help"))
			resp_reply_help(out, help);
		else
			proto_resp_integer(out, (int64_t)pubsub_npatterns(c->pubsub));
	} else if (resp_arg_is(av, 1, "channels") || resp_arg_is(av, 1, "shardchannels")) {
		s->last_cmd = shard ? "pubsub|shardchannels" : "pubsub|channels";
		if (av->argc > 3) {
			c->errors++;
			proto_resp_error_fmt(out,
					     "unknown subcommand or wrong number of arguments for "
					     "'%.*s'. Try PUBSUB HELP.",
					     (int)strnlen(av->argv[1], av->argvlen[1]),
					     av->argv[1]);
		} else if (shard) {
			proto_resp_array(out, 0); /* no shard channels (no cluster) */
		} else {
			pubsub_channels(c, av, out);
		}
	} else if (resp_arg_is(av, 1, "numsub") || resp_arg_is(av, 1, "shardnumsub")) {
		s->last_cmd = shard ? "pubsub|shardnumsub" : "pubsub|numsub";
		proto_resp_array(out, (av->argc - 2) * 2);
		for (size_t i = 2; i < av->argc; i++) {
			proto_resp_bulk(out, av->argv[i], av->argvlen[i]);
			proto_resp_integer(out, shard
						    ? 0
						    : (int64_t)pubsub_numsub(c->pubsub, av->argv[i],
									     av->argvlen[i]));
		}
	} else {
		resp_error_unknown_sub(c, av, out, "PUBSUB");
	}
}

/* MONITOR: +OK, then every command any client runs (the server's cmd_hooks.monitor_feed). */
RESP_HANDLER(resp_pubsub_monitor)
{
	(void)av;
	if (c->in_exec) {
		resp_error(c, out, "ERR MONITOR isn't allowed for DENY BLOCKING client");
		return;
	}
	if (s->monitor || !c->hooks.monitor)
		return; /* Redis ignores a second MONITOR: no reply at all */
	c->hooks.monitor(c->hooks.arg, s, true);
	proto_resp_ok(out);
}

/* RESET: the connection as new (Redis's clearClientConnectionState): its transaction and
 * WATCHes, subscriptions and MONITOR gone, RESP2, no name, and (with a token) no longer
 * authenticated. */
RESP_HANDLER(resp_pubsub_reset)
{
	(void)av;
	cmd_multi_discard(s);
	pubsub_session_end(s);
	if (s->monitor && c->hooks.monitor)
		c->hooks.monitor(c->hooks.arg, s, false);
	s->resp = 2;
	s->name[0] = '\0';
	if (c->token)
		s->authed = false;
	proto_resp_simple(out, "RESET", 5);
}

bool resp_pubsub_allowed(const struct cmd_session *s, resp_handler run)
{
	if (s->resp >= 3 || !s->pubsub || !sub_count(s))
		return true;
	return run && (run == resp_server_ping || run == resp_pubsub_subscribe ||
		       run == resp_pubsub_unsubscribe || run == resp_server_quit ||
		       run == resp_pubsub_reset);
}

/* The arguments AUTH and HELLO ... AUTH user pass carry secrets in: MONITOR shows each as
 * "(redacted)", as Redis does. */
static bool redacted(const struct proto_argv *av, size_t i)
{
	if (resp_arg_is(av, 0, "auth"))
		return i >= 1;
	if (!resp_arg_is(av, 0, "hello"))
		return false;
	for (size_t k = 2; k < i && k < av->argc; k++)
		if (resp_arg_is(av, k, "auth") && i <= k + 2)
			return true;
	return false;
}

void resp_pubsub_feed(struct cmd_ctx *c, const struct cmd_session *s, const struct proto_argv *av)
{
	enum { MAX_REDACT = 16 };
	const char *argv[MAX_REDACT];
	size_t lens[MAX_REDACT];

	if (!(resp_arg_is(av, 0, "auth") || resp_arg_is(av, 0, "hello"))) {
		c->hooks.monitor_feed(c->hooks.arg, s, av->argc, av->argv, av->argvlen);
		return;
	}
	if (av->argc > MAX_REDACT)
		return; /* not shown rather than shown with its secret */
	for (size_t i = 0; i < av->argc; i++) {
		bool r = redacted(av, i);
		argv[i] = r ? "(redacted)" : av->argv[i];
		lens[i] = r ? 10 : av->argvlen[i];
	}
	c->hooks.monitor_feed(c->hooks.arg, s, av->argc, argv, lens);
}
