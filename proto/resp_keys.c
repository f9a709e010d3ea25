/* SPDX-License-Identifier: MIT */
/*
 * RESP: what Redis users do with keys, done to filters: RENAME and RENAMENX, with Redis
 * 7.0.15's replies and errors. A name a filter may not have (core/bf_registry.h) is refused with
 * "ERR bad filter name", as BF.RESERVE refuses it.
 */
#include "proto/resp_cmd_impl.h"

void resp_keys_rename(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	bool nx = av->argvlen[0] == 8; /* "renamenx" */
	enum cmd_status st;

	st = cmd_rename(c, av->argv[1], av->argvlen[1], av->argv[2], av->argvlen[2], nx);
	if (st == CMD_NOT_FOUND) {
		resp_error(c, out, "ERR no such key");
	} else if (st == CMD_EXISTS && nx) {
		proto_resp_integer(out, 0);
	} else if (st != CMD_OK) {
		resp_error_status(c, out, st, NULL);
	} else if (nx) {
		proto_resp_integer(out, 1);
	} else {
		proto_resp_ok(out);
	}
	(void)s;
}
