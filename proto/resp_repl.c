/* SPDX-License-Identifier: MIT */
/*
 * RESP's replication commands, in Redis 7.0's words (src/replication.c): REPLICAOF / SLAVEOF,
 * REPLCONF, PSYNC and ROLE; and DEBUG DIGEST-VALUE, with which replicas are compared. The work is
 * the server's (cmd_repl_ops, server/repl*.c); this file parses the arguments and words the
 * replies.
 */
#include <errno.h>
#include <string.h>

#include "proto/resp_cmd_impl.h"

static const struct cmd_repl_ops *ops(const struct cmd_ctx *c)
{
	return c->hooks.repl;
}

/* REPLICAOF host port | REPLICAOF NO ONE (SLAVEOF is the same command). */
void resp_repl_replicaof(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			 struct proto_buf *out)
{
	char err[256] = "", host[256];
	long long port;
	int rc;
	(void)s;

	if (resp_arg_is(av, 1, "no") && resp_arg_is(av, 2, "one")) {
		if (!ops(c))
			goto off;
		rc = ops(c)->replicaof(c->hooks.arg, NULL, 0, err, sizeof(err));
	} else {
		if (!resp_arg_ll(av, 2, &port) || port < 0 || port > 65535) {
			resp_error(c, out, "ERR Invalid master port");
			return;
		}
		if (av->argvlen[1] >= sizeof(host) || memchr(av->argv[1], 0, av->argvlen[1])) {
			resp_error(c, out, "ERR Invalid master host");
			return;
		}
		memcpy(host, av->argv[1], av->argvlen[1]);
		host[av->argvlen[1]] = 0;
		if (!ops(c))
			goto off;
		rc = ops(c)->replicaof(c->hooks.arg, host, port, err, sizeof(err));
	}
	if (rc == 1)
		proto_resp_simple(out, "OK Already connected to specified master", 40);
	else if (rc == 0)
		proto_resp_ok(out);
	else
		resp_error(c, out, err);
	return;
off:
	resp_error(c, out, "ERR replication is not available (the write-ahead log is off)");
}

/* REPLCONF option value [option value ...] (what a replica tells its primary). */
void resp_repl_replconf(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	char err[256] = "", key[32];
	bool reply = false;

	if (av->argc % 2 == 0) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	for (size_t j = 1; j + 1 < av->argc; j += 2) {
		size_t n = av->argvlen[j] < sizeof(key) - 1 ? av->argvlen[j] : sizeof(key) - 1;
		int rc = 0;

		for (size_t i = 0; i < n; i++)
			key[i] = (char)(av->argv[j][i] | 0x20);
		key[n] = 0;
		if (ops(c))
			rc = ops(c)->replconf(c->hooks.arg, s->id, key, av->argv[j + 1],
					      av->argvlen[j + 1], err, sizeof(err));
		else if (strcmp(key, "listening-port") && strcmp(key, "capa") &&
			 strcmp(key, "ip-address") && strcmp(key, "http-port"))
			rc = -EINVAL;
		if (rc < 0) {
			if (!err[0])
				proto_resp_error_fmt(out, "Unrecognized REPLCONF option: %.*s",
						     (int)av->argvlen[j], av->argv[j]);
			else
				proto_resp_error_str(out, err);
			c->errors++;
			return;
		}
		reply |= rc == 0;
	}
	if (reply)
		proto_resp_ok(out);
}

/* PSYNC replid offset: every sync is a full one in this release (+FULLRESYNC). */
void resp_repl_psync(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	char err[256] = "";
	long long off = -1;

	if (!resp_arg_ll(av, 2, &off)) {
		resp_error(c, out, resp_err_not_int);
		return;
	}
	if (!ops(c)) {
		resp_error(c, out, "ERR replication is not available (the write-ahead log is off)");
		return;
	}
	if (ops(c)->psync(c->hooks.arg, s->id, av->argv[1], av->argvlen[1], off, err, sizeof(err)))
		resp_error(c, out, err);
}

/* ROLE: master, offset, replicas; or slave, host, port, state, offset. */
void resp_repl_role(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	(void)av;
	if (ops(c)) {
		ops(c)->role(c->hooks.arg, out, s->resp);
		return;
	}
	proto_resp_array(out, 3);
	proto_resp_bulk_str(out, "master");
	proto_resp_integer(out, 0);
	proto_resp_array(out, 0);
}

void resp_repl_digest(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	static const char hex[] = "0123456789abcdef";
	(void)s;

	/* Paged-out filters are loaded first; the command runs again once they are. */
	for (size_t j = 2; j < av->argc; j++) {
		if (cmd_ready(c, av->argv[j], av->argvlen[j]) != CMD_OK) {
			resp_error_status(c, out, CMD_PAGED_OUT, NULL);
			return;
		}
		if (c->paging)
			return;
	}
	proto_resp_array(out, av->argc - 2);
	for (size_t j = 2; j < av->argc; j++) {
		unsigned char dg[BF_DIGEST_BYTES] = {0};
		char txt[2 * BF_DIGEST_BYTES];
		struct bf_filter *f = cmd_lookup(c, av->argv[j], av->argvlen[j]);

		if (f)
			bf_filter_digest(f, dg);
		for (int i = 0; i < BF_DIGEST_BYTES; i++) {
			txt[2 * i] = hex[dg[i] >> 4];
			txt[2 * i + 1] = hex[dg[i] & 15];
		}
		proto_resp_simple(out, txt, sizeof(txt));
	}
}
