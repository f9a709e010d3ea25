/* SPDX-License-Identifier: MIT */
/*
 * RESP transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, with Redis 7.0.15's replies (the
 * queue and the WATCHes are the command layer's, proto/multi.c; resp_cmd_exec queues a command
 * while its session is in MULTI, and refuses at queue time what Redis refuses then).
 *
 * EXEC runs the whole queue in one call: no other client's command runs in between, and its
 * changes are one unit in the write-ahead log (cmd_hooks.txn). A filter a queued command needs
 * that is paged out is loaded first, before any of them runs (EXEC is then run again once it
 * is in memory). A multi-key command runs all of its slices inside EXEC: multi_max_bytes
 * bounds how long an EXEC holds the loop.
 */
#include "proto/resp_cmd_impl.h"

#include <errno.h>
#include <string.h>

/* The i-th queued command as an argument vector (its arrays are the queue's). */
static void queued_argv(const struct cmd_session *s, size_t i, struct proto_argv *av)
{
	const char *const *argv;
	const size_t *argvlen;

	proto_argv_init(av);
	cmd_multi_get(s, i, &av->argc, &argv, &argvlen);
	av->argv = (const char **)argv;
	av->argvlen = (size_t *)argvlen;
	av->maxlen2 = 0;
	for (size_t k = 2; k < av->argc; k++)
		if (argvlen[k] > av->maxlen2)
			av->maxlen2 = argvlen[k];
}

RESP_HANDLER(resp_multi_multi)
{
	(void)av;
	int rc = cmd_multi_begin(c, s);

	if (rc == -EEXIST)
		resp_error(c, out, "ERR MULTI calls can not be nested");
	else if (rc)
		resp_error_status(c, out, CMD_INTERNAL, NULL);
	else
		proto_resp_ok(out);
}

RESP_HANDLER(resp_multi_discard)
{
	(void)av;
	if (!cmd_multi_active(s)) {
		resp_error(c, out, "ERR DISCARD without MULTI");
		return;
	}
	cmd_multi_discard(s);
	proto_resp_ok(out);
}

RESP_HANDLER(resp_multi_watch)
{
	if (cmd_multi_active(s)) {
		resp_error(c, out, "ERR WATCH inside MULTI is not allowed");
		return;
	}
	for (size_t i = 1; i < av->argc; i++) {
		/* One whose time has come goes first: WATCH sees it missing, as Redis does. */
		cmd_lookup(c, av->argv[i], av->argvlen[i]);
		if (cmd_watch(c, s, av->argv[i], av->argvlen[i])) {
			resp_error_status(c, out, CMD_INTERNAL, NULL);
			return;
		}
	}
	proto_resp_ok(out);
}

RESP_HANDLER(resp_multi_unwatch)
{
	(void)c;
	(void)av;
	cmd_unwatch(s);
	proto_resp_ok(out);
}

/* Run one queued command whole (every slice of a multi-key one), its reply appended. */
static void exec_one(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	do {
		c->again = false;
		resp_cmd_exec(c, s, av, out);
	} while (c->again && !out->failed);
	if (c->paging || c->write_wait) {
		/* Not possible after the loads of resp_multi_exec; an error if it happens. */
		c->paging = NULL;
		c->write_wait = false;
		resp_error_status(c, out, CMD_PAGED_OUT, NULL);
	}
}

RESP_HANDLER(resp_multi_exec)
{
	struct proto_argv q;
	size_t n = cmd_multi_count(s);

	(void)av;
	if (!cmd_multi_active(s)) {
		resp_error(c, out, "ERR EXEC without MULTI");
		return;
	}
	if (cmd_multi_flagged(s)) {
		cmd_multi_discard(s);
		resp_error(c, out, "-EXECABORT Transaction discarded because of previous errors.");
		return;
	}
	/* Every filter in memory before anything runs: EXEC runs again once they are. */
	for (size_t i = 0; i < n; i++) {
		queued_argv(s, i, &q);
		if (resp_cmd_load(c, s, &q)) {
			c->commands--; /* counted when it runs */
			c->peer_commands[CMD_PEER_RESP]--;
			return;
		}
	}
	if (cmd_watch_changed(c, s)) {
		cmd_multi_discard(s);
		proto_resp_null_array(out, s->resp);
		return;
	}
	cmd_multi_running(s);
	if (c->hooks.log && c->hooks.txn)
		c->hooks.txn(c->hooks.arg, false);
	proto_resp_array(out, n);
	c->in_exec = true;
	for (size_t i = 0; i < n; i++) {
		queued_argv(s, i, &q);
		exec_one(c, s, &q, out);
	}
	c->in_exec = false;
	if (c->hooks.log && c->hooks.txn) {
		uint64_t lsn = c->hooks.txn(c->hooks.arg, true);

		/* The replies are acknowledged once the transaction's end is durable. */
		if (lsn > c->durable_lsn && lsn > c->wait_lsn)
			c->wait_lsn = lsn;
	}
	if (c->bgsave_after) {
		c->bgsave_after = false;
		c->hooks.bgsave(c->hooks.arg);
	}
	cmd_multi_discard(s);
}
