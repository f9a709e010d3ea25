/* SPDX-License-Identifier: MIT */
/* The shared command layer: the operations every front end calls, and their error kinds. */
#include "proto/command.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cmd_session_init(struct cmd_session *s, uint64_t id)
{
	memset(s, 0, sizeof(*s));
	s->resp = 2;
	s->id = id;
}

void cmd_session_free(struct cmd_session *s)
{
	free(s->keys);
	free(s->lens);
	free(s->results);
	s->keys = NULL;
	s->lens = NULL;
	s->results = NULL;
	s->scratch_cap = 0;
}

int cmd_session_reserve(struct cmd_session *s, size_t n)
{
	if (n <= s->scratch_cap)
		return 0;
	size_t cap = s->scratch_cap ? s->scratch_cap : 64;
	while (cap < n)
		cap *= 2;
	const void **k = realloc(s->keys, cap * sizeof(*k));
	if (!k)
		return -ENOMEM;
	s->keys = k;
	size_t *l = realloc(s->lens, cap * sizeof(*l));
	if (!l)
		return -ENOMEM;
	s->lens = l;
	int *r = realloc(s->results, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	s->results = r;
	s->scratch_cap = cap;
	return 0;
}

bool cmd_token_equal(const void *token, size_t token_len, const void *p, size_t n)
{
	const unsigned char *a = token, *b = p;
	size_t max = n > token_len ? n : token_len;
	volatile unsigned char diff = (unsigned char)(n != token_len);

	for (size_t i = 0; i < max; i++) {
		unsigned char x = i < token_len ? a[i] : 0, y = i < n ? b[i] : 0;
		diff |= (unsigned char)(x ^ y);
	}
	return diff == 0;
}

bool cmd_auth_check(const struct cmd_ctx *c, struct cmd_session *s, const void *p, size_t n)
{
	if (!c->token)
		return false;
	if (cmd_token_equal(c->token, c->token_len, p, n)) {
		s->authed = true;
		return true;
	}
	if (++s->auth_failures >= CMD_AUTH_MAX_FAILURES)
		s->close_after = true;
	return false;
}

enum cmd_status cmd_status_from_errno(int rc)
{
	switch (rc) {
	case 0:
		return CMD_OK;
	case -ENOENT:
		return CMD_NOT_FOUND;
	case -EEXIST:
		return CMD_EXISTS;
	case -EINVAL:
		return CMD_BAD_ARGS;
	case -EDOM:
		return CMD_RATE_TOO_LOW;
	case -ENOSPC:
		return CMD_FULL;
	case -ENOMEM:
	case -E2BIG:
		return CMD_NO_MEMORY;
	case -ENOTSUP:
		return CMD_NOT_COUNTING;
	case -ENOTUNIQ:
		return CMD_AMBIGUOUS;
	default:
		return CMD_INTERNAL;
	}
}

struct bf_params cmd_default_params(const struct cmd_ctx *c)
{
	return (struct bf_params){
	    .capacity = c->default_capacity,
	    .error_rate = c->default_error_rate,
	    .type = BF_TYPE_BLOOM,
	    .expansion = c->default_expansion,
	    .persist = true,
	};
}

enum cmd_status cmd_create(struct cmd_ctx *c, const char *name, size_t len,
			   const struct bf_params *p, struct bf_filter **out)
{
	c->ops[CMD_OP_CREATE]++;
	if (!bf_name_valid(name, len))
		return CMD_BAD_NAME;
	uint64_t seed = c->hooks.seed ? c->hooks.seed(c->hooks.arg) : 0;
	struct bf_filter *f;
	int rc = bf_registry_create(c->reg, name, len, p, seed, &f);
	if (rc)
		return cmd_status_from_errno(rc);
	if (c->hooks.created)
		c->hooks.created(c->hooks.arg, f);
	if (out)
		*out = f;
	return CMD_OK;
}

enum cmd_status cmd_drop(struct cmd_ctx *c, const char *name, size_t len, bool remove_file)
{
	c->ops[CMD_OP_DROP]++;
	struct bf_filter *f = bf_registry_get(c->reg, name, len);
	if (!f)
		return CMD_NOT_FOUND;
	if (c->hooks.dropping)
		c->hooks.dropping(c->hooks.arg, f, remove_file);
	return cmd_status_from_errno(bf_registry_drop(c->reg, name, len));
}

enum cmd_status cmd_check_capacity(uint64_t capacity)
{
	return capacity >= 1 ? CMD_OK : CMD_BAD_ARGS;
}

enum cmd_status cmd_check_error_rate(double error_rate)
{
	if (!(error_rate > 0 && error_rate < 1))
		return CMD_BAD_ARGS;
	return error_rate < BF_MIN_ERROR_RATE ? CMD_RATE_TOO_LOW : CMD_OK;
}

enum cmd_status cmd_check_expansion(uint64_t expansion)
{
	return expansion <= BF_MAX_EXPANSION ? CMD_OK : CMD_BAD_ARGS;
}

bool cmd_keys_fit(const struct cmd_ctx *c, size_t n, const size_t *lens)
{
	for (size_t i = 0; i < n; i++)
		if (lens[i] > c->max_key_bytes)
			return false;
	return true;
}

enum cmd_status cmd_add(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			const size_t *lens, int *out, size_t *done)
{
	*done = 0;
	c->ops[CMD_OP_ADD]++;
	c->keys[CMD_OP_ADD] += n;
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	if (n == 0)
		return CMD_OK;
	size_t k = n == 1 ? (out[0] = bf_filter_add(f, keys[0], lens[0]), 1)
			  : bf_filter_add_batch(f, n, keys, lens, out, NULL);
	if (out[k - 1] < 0) {
		*done = k - 1;
		return cmd_status_from_errno(out[k - 1]);
	}
	*done = n;
	return CMD_OK;
}

enum cmd_status cmd_check(struct cmd_ctx *c, struct bf_filter *f, size_t n, const void *const *keys,
			  const size_t *lens, int *out)
{
	c->ops[CMD_OP_CHECK]++;
	c->keys[CMD_OP_CHECK] += n;
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	if (n == 1)
		out[0] = bf_filter_check(f, keys[0], lens[0]);
	else
		bf_filter_check_batch(f, n, keys, lens, out);
	return CMD_OK;
}

enum cmd_status cmd_delete(struct cmd_ctx *c, struct bf_filter *f, size_t n,
			   const void *const *keys, const size_t *lens, int *out, size_t *done)
{
	*done = 0;
	c->ops[CMD_OP_DELETE]++;
	c->keys[CMD_OP_DELETE] += n;
	if (f->params.type != BF_TYPE_COUNTING)
		return CMD_NOT_COUNTING;
	if (!cmd_keys_fit(c, n, lens))
		return CMD_KEY_TOO_LONG;
	for (size_t i = 0; i < n; i++) {
		out[i] = bf_filter_delete(f, keys[i], lens[i]);
		if (out[i] < 0) {
			*done = i;
			return cmd_status_from_errno(out[i]);
		}
	}
	*done = n;
	return CMD_OK;
}

enum cmd_status cmd_run_keys(struct cmd_ctx *c, struct cmd_session *s, struct bf_filter *f,
			     enum cmd_key_op op, size_t n, size_t *done)
{
	enum cmd_status st;

	switch (op) {
	case CMD_KEYS_ADD:
		return cmd_add(c, f, n, s->keys, s->lens, s->results, done);
	case CMD_KEYS_CHECK:
		st = cmd_check(c, f, n, s->keys, s->lens, s->results);
		*done = st == CMD_OK ? n : 0;
		return st;
	default:
		return cmd_delete(c, f, n, s->keys, s->lens, s->results, done);
	}
}

enum cmd_status cmd_flush(struct cmd_ctx *c, struct bf_filter *f)
{
	c->ops[CMD_OP_FLUSH]++;
	if (!c->hooks.flush)
		return CMD_OK;
	return c->hooks.flush(c->hooks.arg, f) == 0 ? CMD_OK : CMD_INTERNAL;
}
