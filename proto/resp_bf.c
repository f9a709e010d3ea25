/* SPDX-License-Identifier: MIT */
/*
 * RESP: RedisBloom's BF.* family (and the BF.DEL extension), over the shared command layer.
 * What differs from RedisBloom, and why, is listed at the top of resp_cmd.c.
 */
#include "proto/resp_cmd_impl.h"
#include "core/bf_snapshot.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------- */
/* BF.* */

static const char err_capacity_range[] = "ERR capacity must be in the range [1, 1073741824]";

static bool expansion_ok(long long e)
{
	return e >= 0 && cmd_check_expansion((uint64_t)e) == CMD_OK;
}

void resp_bf_reserve(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	double error_rate;
	long long capacity, expansion = c->default_expansion;
	bool nonscaling = c->default_expansion == 0, nonscaling_opt = false, counting = false;
	size_t exp_at = 0;
	(void)s;

	if (!resp_arg_double(av, 2, &error_rate)) {
		resp_error(c, out, "ERR bad error rate");
		return;
	}
	if (cmd_check_error_rate(error_rate) == CMD_BAD_ARGS) {
		resp_error(c, out, "ERR error rate must be in the range (0.000000, 1.000000)");
		return;
	}
	if (!resp_arg_ll(av, 3, &capacity)) {
		resp_error(c, out, "ERR bad capacity");
		return;
	}
	if (capacity < 0 || cmd_check_capacity((uint64_t)capacity) ||
	    capacity > RESP_CAPACITY_MAX) {
		resp_error(c, out, err_capacity_range);
		return;
	}

	for (size_t i = 4; i < av->argc; i++) {
		if (resp_arg_is(av, i, "nonscaling")) {
			nonscaling = nonscaling_opt = true;
		} else if (resp_arg_is(av, i, "counting")) {
			counting = true;
		} else if (resp_arg_is(av, i, "expansion")) {
			if (i + 1 == av->argc) {
				resp_error(c, out, "ERR no expansion");
				return;
			}
			exp_at = ++i;
		} else {
			resp_error(c, out, resp_err_syntax);
			return;
		}
	}
	if (exp_at) {
		if (!resp_arg_ll(av, exp_at, &expansion)) {
			resp_error(c, out, "ERR bad expansion");
			return;
		}
		if (expansion == 0) {
			nonscaling = true;
		} else if (nonscaling_opt) {
			resp_error(c, out, "-Nonscaling filters cannot expand");
			return;
		}
		if (!expansion_ok(expansion)) {
			resp_error(c, out, "ERR expansion must be in the range [0, 32768]");
			return;
		}
	}

	struct bf_params p = cmd_default_params(c, CMD_PEER_RESP);
	p.capacity = (uint64_t)capacity;
	p.error_rate = error_rate;
	p.type = counting ? BF_TYPE_COUNTING : BF_TYPE_BLOOM;
	p.expansion = nonscaling ? 0 : (uint32_t)expansion;
	enum cmd_status st = cmd_create(c, av->argv[1], av->argvlen[1], &p, NULL);
	if (st != CMD_OK) {
		resp_error_status(c, out, st, NULL);
		return;
	}
	proto_resp_ok(out);
}

/*
 * One call's share of a multi-key command over av's arguments from `first` on (struct
 * cmd_slice): its keys, then its reply, an array with one element per key answered; a key
 * that stops it ends the array with its error, as RedisBloom does. f: its filter, or NULL.
 */
static void slice_keys(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       size_t first, struct bf_filter *f, enum cmd_key_op op, struct proto_buf *out)
{
	struct cmd_slice *sl = &s->slice;
	size_t n = av->argc - first, from, to;

	if (!sl->answered) {
		/* The arguments may have moved since the last call: this share's keys only. */
		to = sl->done + (n - sl->done < CMD_KEY_STEP ? n - sl->done : CMD_KEY_STEP);
		for (size_t i = sl->done; i < to; i++)
			s->keys[i] = av->argv[first + i];
		if (!cmd_slice_keys(c, s, f, op, n, s->keys, av->argvlen + first))
			return;
	}
	int part = cmd_slice_replies(c, s, &from, &to);
	if (part < 0) {
		if (from == 0)
			resp_error_status(c, out, CMD_LOG_FAILED, NULL);
		cmd_slice_end(s);
		return;
	}
	if (from == 0)
		proto_resp_array(out, sl->st == CMD_OK ? n : sl->done + 1);
	for (size_t i = from; i < to; i++)
		proto_resp_bool(out, s->resp, s->results[i] > 0);
	if (!part)
		return;
	if (sl->st == CMD_NOT_FOUND)
		resp_error(c, out, resp_err_not_found);
	else if (sl->st != CMD_OK)
		resp_error_status(c, out, sl->st, f);
	cmd_slice_end(s);
}

/*
 * Add av's arguments from `first` on to the filter named by argv[1], creating it with
 * `create` when it is missing (NULL: "ERR not found"). multi: reply an array with one element
 * per item answered; a failing item ends the array with its error, as RedisBloom does.
 */
static void add_items(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      size_t first, const struct bf_params *create, bool multi,
		      struct proto_buf *out)
{
	size_t n = av->argc - first, done;
	int one;

	/* A multi-key command under way goes on (its checks were made at its first call); one
	 * whose filter went away between two calls stops with "not found". */
	if (multi && s->slice.active) {
		slice_keys(c, s, av, first, resp_arg_filter(c, av, 1), CMD_KEYS_ADD, out);
		return;
	}
	/* Everything that can refuse the whole command is checked before anything changes. */
	if (!resp_items_fit(c, av, first)) {
		resp_error(c, out, resp_err_item_long);
		return;
	}
	if (multi && cmd_session_reserve(s, n)) {
		resp_error(c, out, resp_err_oom);
		return;
	}
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	if (!f) {
		if (!create) {
			resp_error(c, out, resp_err_not_found);
			return;
		}
		enum cmd_status st = cmd_create(c, av->argv[1], av->argvlen[1], create, &f);
		if (st != CMD_OK) {
			resp_error_status(c, out, st, NULL);
			return;
		}
	}

	if (!multi) {
		const void *key = av->argv[first];
		enum cmd_status st = cmd_add(c, f, 1, &key, &av->argvlen[first], &one, &done);
		if (st != CMD_OK) {
			resp_error_status(c, out, st, f);
			return;
		}
		proto_resp_bool(out, s->resp, one > 0);
		return;
	}

	slice_keys(c, s, av, first, f, CMD_KEYS_ADD, out);
}

void resp_bf_add(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		 struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c, CMD_PEER_RESP);
	add_items(c, s, av, 2, &p, false, out);
}

void resp_bf_madd(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		  struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c, CMD_PEER_RESP);
	add_items(c, s, av, 2, &p, true, out);
}

void resp_bf_insert(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c, CMD_PEER_RESP);
	bool create = true, nonscaling = p.expansion == 0;
	size_t items = 0, i = 2;

	while (i < av->argc && !items) {
		if (resp_arg_is(av, i, "items")) {
			items = ++i;
		} else if (resp_arg_is(av, i, "error")) {
			double e;
			if (++i == av->argc) {
				resp_error_arity(c, out, "bf.insert");
				return;
			}
			if (!resp_arg_double(av, i++, &e) ||
			    cmd_check_error_rate(e) == CMD_BAD_ARGS) {
				resp_error(c, out, "-Bad error rate");
				return;
			}
			p.error_rate = e;
		} else if (resp_arg_is(av, i, "expansion")) {
			long long e;
			if (++i == av->argc) {
				resp_error_arity(c, out, "bf.insert");
				return;
			}
			if (!resp_arg_ll(av, i++, &e) || !expansion_ok(e)) {
				resp_error(c, out, "-Bad expansion");
				return;
			}
			p.expansion = (uint32_t)e;
		} else if (resp_arg_is(av, i, "capacity")) {
			long long cap;
			if (++i == av->argc) {
				resp_error_arity(c, out, "bf.insert");
				return;
			}
			if (!resp_arg_ll(av, i++, &cap) || cap < 0 ||
			    cmd_check_capacity((uint64_t)cap) || cap > RESP_CAPACITY_MAX) {
				resp_error(c, out, "-Bad capacity");
				return;
			}
			p.capacity = (uint64_t)cap;
		} else if (resp_arg_is(av, i, "nocreate")) {
			create = false;
			i++;
		} else if (resp_arg_is(av, i, "nonscaling")) {
			nonscaling = true;
			i++;
		} else if (resp_arg_is(av, i, "counting")) {
			p.type = BF_TYPE_COUNTING;
			i++;
		} else {
			resp_error(c, out, "-Unknown argument received");
			return;
		}
	}
	if (!items || items == av->argc) {
		resp_error_arity(c, out, "bf.insert");
		return;
	}
	if (nonscaling)
		p.expansion = 0;
	add_items(c, s, av, items, create ? &p : NULL, true, out);
}

static void check_items(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			bool multi, struct proto_buf *out)
{
	size_t n = av->argc - 2;
	int one = 0;

	if (multi && s->slice.active) {
		slice_keys(c, s, av, 2, resp_arg_filter(c, av, 1), CMD_KEYS_CHECK, out);
		return;
	}
	if (!resp_items_fit(c, av, 2)) {
		resp_error(c, out, resp_err_item_long);
		return;
	}
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	if (!multi) {
		if (f) {
			const void *key = av->argv[2];
			cmd_check(c, f, 1, &key, &av->argvlen[2], &one);
		}
		proto_resp_bool(out, s->resp, one > 0);
		return;
	}
	if (cmd_session_reserve(s, n)) {
		resp_error(c, out, resp_err_oom);
		return;
	}
	slice_keys(c, s, av, 2, f, CMD_KEYS_CHECK, out);
}

void resp_bf_exists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	check_items(c, s, av, false, out);
}

void resp_bf_mexists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	check_items(c, s, av, true, out);
}

void resp_bf_del(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		 struct proto_buf *out)
{
	int one = 0;

	if (!resp_items_fit(c, av, 2)) {
		resp_error(c, out, resp_err_item_long);
		return;
	}
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	if (!f) {
		resp_error(c, out, resp_err_not_found);
		return;
	}
	const void *key = av->argv[2];
	size_t done;
	enum cmd_status st = cmd_delete(c, f, 1, &key, &av->argvlen[2], &one, &done);
	if (st != CMD_OK) {
		resp_error_status(c, out, st, f);
		return;
	}
	proto_resp_bool(out, s->resp, one > 0);
}

/* BF.INFO fields, in RedisBloom's order. */
enum info_field { INFO_CAPACITY, INFO_SIZE, INFO_FILTERS, INFO_ITEMS, INFO_EXPANSION, INFO_N };

static const struct {
	const char *arg, *title;
} info_fields[INFO_N] = {
    {"capacity", "Capacity"},	      {"size", "Size"},
    {"filters", "Number of filters"}, {"items", "Number of items inserted"},
    {"expansion", "Expansion rate"},
};

static void info_value(struct proto_buf *out, int resp, const struct bf_filter *f, int field)
{
	switch (field) {
	case INFO_CAPACITY:
		proto_resp_integer(out, (int64_t)bf_filter_capacity(f));
		break;
	case INFO_SIZE:
		proto_resp_integer(out, (int64_t)bf_filter_bytes(f));
		break;
	case INFO_FILTERS:
		proto_resp_integer(out, bf_filter_nlayers(f));
		break;
	case INFO_ITEMS:
		proto_resp_integer(out, (int64_t)bf_filter_items(f));
		break;
	default:
		if (f->params->expansion == 0)
			proto_resp_null(out, resp);
		else
			proto_resp_integer(out, f->params->expansion);
		break;
	}
}

void resp_bf_info(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		  struct proto_buf *out)
{
	struct bf_filter *f = resp_arg_filter(c, av, 1);

	if (!f) {
		resp_error(c, out, resp_err_not_found);
		return;
	}
	if (av->argc == 3) {
		int field = 0;
		while (field < INFO_N && !resp_arg_is(av, 2, info_fields[field].arg))
			field++;
		if (field == INFO_N) {
			resp_error(c, out, "-Invalid information value");
			return;
		}
		/* RedisBloom: a one-element array in RESP2, a one-pair map in RESP3. */
		if (s->resp >= 3) {
			proto_resp_map(out, s->resp, 1);
			proto_resp_simple(out, info_fields[field].title,
					  strlen(info_fields[field].title));
		} else {
			proto_resp_array(out, 1);
		}
		info_value(out, s->resp, f, field);
		return;
	}
	proto_resp_map(out, s->resp, INFO_N);
	for (int field = 0; field < INFO_N; field++) {
		proto_resp_simple(out, info_fields[field].title, strlen(info_fields[field].title));
		info_value(out, s->resp, f, field);
	}
}

void resp_bf_card(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		  struct proto_buf *out)
{
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	(void)s;

	proto_resp_integer(out, f ? (int64_t)bf_filter_items(f) : 0);
}

/*
 * BF.DEBUG key: RedisBloom's lines, "size:<items>" then one per layer, oldest first:
 * "bytes:B bits:N hashes:K hashwidth:128 capacity:C size:S ratio:E". bits is the layer's
 * positions (a counting layer's four-bit counters), hashes the positions a key sets (8 words
 * of b), hashwidth the hash's (XXH3-128), ratio the layer's error target, printed as %g as
 * RedisBloom prints it.
 */
void resp_bf_debug(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	char line[256];
	int len;
	(void)s;

	if (!f) {
		resp_error(c, out, resp_err_not_found);
		return;
	}
	proto_resp_array(out, 1 + (size_t)f->nlayers);
	len = snprintf(line, sizeof(line), "size:%" PRIu64, bf_filter_items(f));
	proto_resp_bulk(out, line, (size_t)len);
	for (unsigned i = 0; i < f->nlayers; i++) {
		const struct bf_layer *l = &bf_filter_layers(f)[i];
		uint64_t cap, bytes = bf_layer_bytes(l);
		double err;

		bf_filter_layer_target(f->params, i, &cap, &err);
		len = snprintf(line, sizeof(line),
			       "bytes:%" PRIu64 " bits:%" PRIu64 " hashes:%u hashwidth:128"
			       " capacity:%" PRIu64 " size:%" PRIu64 " ratio:%g",
			       bytes, l->counting ? bytes * 2 : bytes * 8,
			       (unsigned)(BF_BLOCK_WORDS * l->b), cap, l->items, err);
		proto_resp_bulk(out, line, (size_t)len);
	}
}

/* ---------------------------------------------------------------------------------------- */
/*
 * BF.SCANDUMP / BF.LOADCHUNK.
 *
 * A dump is a header chunk (iterator 1) followed by the filter's body (its layers' blocks in
 * layer order), cut into chunks of at most RESP_DUMP_CHUNK bytes that never span two layers. A
 * data chunk's iterator is 1 + the offset of its end in the body, as in RedisBloom, so
 * LOADCHUNK finds where a chunk goes from its iterator and length alone.
 *
 * The header chunk is the filter's snapshot header (core/bf_snapshot.h, body checksum 0), and
 * LOADCHUNK judges it with the snapshot reader's own rules (bf_snapshot_decode): what loads here
 * also loads at the next start.
 */

void resp_bf_scandump(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	long long iter;
	(void)s;

	if (!f) {
		resp_error(c, out, resp_err_not_found);
		return;
	}
	if (!resp_arg_ll(av, 2, &iter)) {
		resp_error(c, out, "-Second argument must be numeric");
		return;
	}
	proto_resp_array(out, 2);
	if (iter == 0) {
		size_t hlen = bf_snapshot_header_len(f);
		unsigned char *h = malloc(hlen);

		if (!h) {
			resp_error(c, out, resp_err_oom);
			return;
		}
		bf_snapshot_header(f, 0, 0, h);
		proto_resp_integer(out, 1);
		proto_resp_bulk(out, h, hlen);
		free(h);
		return;
	}
	uint64_t len = 0;
	const void *p = iter > 0 ? bf_filter_body_at(f, (uint64_t)iter - 1, &len) : NULL;
	if (!p) {
		proto_resp_integer(out, 0);
		proto_resp_bulk(out, NULL, 0);
		return;
	}
	if (len > RESP_DUMP_CHUNK)
		len = RESP_DUMP_CHUNK;
	proto_resp_integer(out, iter + (long long)len);
	proto_resp_bulk(out, p, (size_t)len);
}

void resp_bf_loadchunk(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	const char *data = av->argv[3];
	size_t len = av->argvlen[3];
	long long iter;
	(void)s;

	if (!resp_arg_ll(av, 2, &iter)) {
		resp_error(c, out, "ERR Second argument must be numeric");
		return;
	}
	struct bf_filter *f = resp_arg_filter(c, av, 1);
	if (!f && iter == 1) {
		enum cmd_status st = cmd_load_header(c, av->argv[1], av->argvlen[1],
						     (const unsigned char *)data, len);
		if (st == CMD_OK)
			proto_resp_ok(out);
		else if (st == CMD_BAD_ARGS)
			resp_error(c, out, resp_err_bad_data);
		else
			resp_error_status(c, out, st, NULL);
		return;
	}
	if (!f) {
		resp_error(c, out, resp_err_not_found);
		return;
	}

	/* A data chunk ends at offset iter - 1 of the body. RedisBloom's checks, in its order:
	 * iter == len passes the first and starts before byte 0, so it has no layer. */
	if (iter < 1 || (uint64_t)iter < len) {
		resp_error(c, out, resp_err_bad_data);
		return;
	}
	int rc = (uint64_t)iter - 1 >= len
		     ? cmd_load_body(c, f, (uint64_t)iter - 1 - len, data, len)
		     : -ERANGE;
	if (rc == -ERANGE)
		resp_error(c, out, "ERR invalid offset - no link found");
	else if (rc == -EMSGSIZE)
		resp_error(c, out, "ERR invalid chunk - Too big for current filter");
	else if (rc)
		resp_error_status(c, out, cmd_status_from_errno(rc), f);
	else
		proto_resp_ok(out);
}
