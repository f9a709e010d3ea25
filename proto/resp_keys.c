/* SPDX-License-Identifier: MIT */
/*
 * RESP: what Redis users do with keys, done to filters: RENAME and RENAMENX, and the expiry
 * family (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with NX/XX/GT/LT, TTL, PTTL, EXPIRETIME,
 * PEXPIRETIME, PERSIST), with Redis 7.0.15's replies and errors. A name a filter may not have
 * (core/bf_registry.h) is refused with "ERR bad filter name", as BF.RESERVE refuses it.
 */
#include "proto/resp_cmd_impl.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

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

/* Redis's NX/XX/GT/LT of the EXPIRE family. */
enum { EXPIRE_NX = 1, EXPIRE_XX = 2, EXPIRE_GT = 4, EXPIRE_LT = 8 };

/* The options from argument 3 on into *flags, or an error replied: false. */
static bool expire_options(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out,
			   unsigned *flags)
{
	static const char *const words[] = {"nx", "xx", "gt", "lt"};

	*flags = 0;
	for (size_t j = 3; j < av->argc; j++) {
		size_t k = 0;

		while (k < 4 && !resp_arg_is(av, j, words[k]))
			k++;
		if (k == 4) {
			size_t n = strnlen(av->argv[j], av->argvlen[j]);

			c->errors++;
			proto_resp_error_fmt(out, "Unsupported option %.*s",
					     (int)(n > 128 ? 128 : n), av->argv[j]);
			return false;
		}
		*flags |= 1u << k;
	}
	if ((*flags & EXPIRE_NX) && (*flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT))) {
		resp_error(c, out,
			   "ERR NX and XX, GT or LT options at the same time are not "
			   "compatible");
		return false;
	}
	if ((*flags & EXPIRE_GT) && (*flags & EXPIRE_LT)) {
		resp_error(c, out, "ERR GT and LT options at the same time are not compatible");
		return false;
	}
	return true;
}

/* Whether the options allow replacing a filter's expiry `cur` (0: none) with `when`. */
static bool expire_allowed(unsigned flags, uint64_t cur, long long when)
{
	if ((flags & EXPIRE_NX) && cur)
		return false;
	if ((flags & EXPIRE_XX) && !cur)
		return false;
	/* No expiry counts as an infinite one. */
	if ((flags & EXPIRE_GT) && (!cur || when <= (long long)cur))
		return false;
	if ((flags & EXPIRE_LT) && cur && when >= (long long)cur)
		return false;
	return true;
}

/*
 * EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX|XX|GT|LT]: :1 set (or, for a time not
 * in the future, the filter dropped), :0 no such filter or the option said no. Redis's checks
 * in Redis's order: options, the integer, its overflow.
 */
void resp_keys_expire(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	bool ms = resp_arg_is(av, 0, "pexpire") || resp_arg_is(av, 0, "pexpireat");
	bool at = resp_arg_is(av, 0, "expireat") || resp_arg_is(av, 0, "pexpireat");
	long long when, base = at ? 0 : (long long)cmd_now_ms();
	struct bf_filter *f;
	unsigned flags;
	(void)s;

	if (!expire_options(c, av, out, &flags))
		return;
	if (!resp_arg_ll(av, 2, &when)) {
		resp_error(c, out, resp_err_not_int);
		return;
	}
	if (!ms) {
		if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
			goto invalid;
		when *= 1000;
	}
	if (when > LLONG_MAX - base)
		goto invalid;
	when += base;
	f = resp_arg_filter(c, av, 1);
	if (!f || !expire_allowed(flags, bf_filter_expire_ms(f), when)) {
		proto_resp_integer(out, 0);
		return;
	}
	/* A time not in the future: the filter goes now (cmd_set_expire drops it). */
	enum cmd_status st = cmd_set_expire(c, f, when <= 0 ? 1 : (uint64_t)when);
	if (st != CMD_OK)
		resp_error_status(c, out, st, NULL);
	else
		proto_resp_integer(out, 1);
	return;
invalid:;
	/* Redis names the command in lower case, whatever the client sent. */
	char name[16];
	size_t n = av->argvlen[0] < sizeof(name) ? av->argvlen[0] : sizeof(name) - 1;

	for (size_t i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)av->argv[0][i]);
	name[n] = '\0';
	c->errors++;
	proto_resp_error_fmt(out, "invalid expire time in '%s' command", name);
}

/* TTL / PTTL / EXPIRETIME / PEXPIRETIME key: -2 no such filter, -1 no expiry, else the time
 * left (TTL rounds to the nearest second) or the time it expires at. */
void resp_keys_ttl(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	bool ms = resp_arg_is(av, 0, "pttl") || resp_arg_is(av, 0, "pexpiretime");
	bool abs = resp_arg_is(av, 0, "expiretime") || resp_arg_is(av, 0, "pexpiretime");
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	long long ttl;
	(void)s;

	if (!f) {
		proto_resp_integer(out, -2);
		return;
	}
	if (!bf_filter_expire_ms(f)) {
		proto_resp_integer(out, -1);
		return;
	}
	ttl = abs ? (long long)bf_filter_expire_ms(f)
		  : (long long)bf_filter_expire_ms(f) - (long long)cmd_now_ms();
	if (ttl < 0)
		ttl = 0;
	/* Rounded to the nearest second without (ttl + 500), which overflows near the largest. */
	proto_resp_integer(out, ms ? ttl : ttl / 1000 + (ttl % 1000 >= 500));
}

/* PERSIST key: :1 the expiry was removed, :0 no such filter or none to remove. */
void resp_keys_persist(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	enum cmd_status st;
	(void)s;

	if (!f || !bf_filter_expire_ms(f)) {
		proto_resp_integer(out, 0);
		return;
	}
	st = cmd_set_expire(c, f, 0);
	if (st != CMD_OK)
		resp_error_status(c, out, st, NULL);
	else
		proto_resp_integer(out, 1);
}
