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
 *     as over the text and HTTP protocols. Expansion is limited to [0, 1024] (BF_MAX_EXPANSION)
 *     instead of [0, 32768], in RedisBloom's words with our bound.
 *   - Extensions: BF.RESERVE/BF.INSERT ... COUNTING makes a counting filter; BF.DEL key item
 *     deletes from one (":1" removed, ":0" absent; "ERR not a counting filter" on a plain
 *     filter). A filter that reached 32 sub-filters answers "ERR filter reached its maximum of
 *     32 sub-filters" where RedisBloom would grow without bound.
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
 * connect); client names are at most 63 bytes; COMMAND DOCS is an empty map; SCAN returns
 * every match in one reply with cursor 0; SAVE/BGSAVE report a failed snapshot as "ERR
 * snapshot failed, see the server log" rather than a bare "ERR". Without a token (cmd_ctx.token)
 * AUTH and HELLO ... AUTH answer as a Redis without requirepass does; with one, as a Redis with
 * requirepass: only AUTH, HELLO (with AUTH to authenticate), PING and QUIT before AUTH, others
 * "-NOAUTH Authentication required."; the connection closes after CMD_AUTH_MAX_FAILURES
 * failed attempts.
 */
#include "proto/command.h"
#include "proto/glob.h"
#include "bf_snapshot.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The Redis version clients are told: the one whose replies these are. */
#define RESP_REDIS_VERSION "7.0.15"

/* RedisBloom's module type name, as TYPE and SCAN ... TYPE report it. */
#define RESP_BF_TYPE "MBbloom--"

/* RedisBloom's bounds on a new filter's capacity. */
#define RESP_CAPACITY_MAX (INT64_C(1) << 30)

/* Most bytes of layer data in one BF.SCANDUMP reply (RedisBloom sends up to 16 MiB; a smaller
 * chunk keeps a client's output buffer and the loader's bulk limit comfortable). */
#define RESP_DUMP_CHUNK (1024 * 1024)

static const char err_not_found[] = "ERR not found";
static const char err_oom[] = "-OOM command not allowed when used memory > 'maxmemory'.";
static const char err_item_long[] = "ERR item too long";
static const char err_full[] = "ERR non scaling filter is full";
static const char err_syntax[] = "ERR syntax error";
static const char err_not_int[] = "ERR value is not an integer or out of range";
static const char err_bad_data[] = "ERR received bad data";
#define RESP_STR_(x) #x
#define RESP_STR(x)  RESP_STR_(x)
/* KEYS, SCAN ... MATCH and CONFIG GET with a pattern over GLOB_MAX_PATTERN bytes (ours:
 * Redis takes any length). */
static const char err_pattern_long[] =
    "ERR pattern longer than " RESP_STR(GLOB_MAX_PATTERN) " bytes";

typedef void (*resp_handler)(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			     struct proto_buf *out);

/* ---------------------------------------------------------------------------------------- */
/* Replies and argument helpers */

/* msg is the error as it goes out: "ERR not found" is sent as "-ERR not found"; a message
 * with a code of its own starts with '-' ("-Bad capacity", "-OOM ...") and is sent as is. */
static void reply_error(struct cmd_ctx *c, struct proto_buf *out, const char *msg)
{
	c->errors++;
	if (strncmp(msg, "ERR ", 4) == 0)
		msg += 4;
	proto_resp_error_str(out, msg);
}

/* Redis's arity error; name is the command's lower-case name (Redis prints its own name for
 * the command, not the client's spelling). */
static void reply_arity(struct cmd_ctx *c, struct proto_buf *out, const char *name)
{
	c->errors++;
	proto_resp_error_fmt(out, "wrong number of arguments for '%s' command", name);
}

static const char *status_text(enum cmd_status st, const struct bf_filter *f)
{
	switch (st) {
	case CMD_NOT_FOUND:
		return err_not_found;
	case CMD_EXISTS:
		return "ERR item exists";
	case CMD_BAD_NAME:
		return "ERR bad filter name";
	case CMD_BAD_ARGS:
		return "ERR bad arguments";
	case CMD_RATE_TOO_LOW:
		return "ERR error rate below 1e-12 is not supported";
	case CMD_KEY_TOO_LONG:
		return err_item_long;
	case CMD_FULL:
		if (f && f->params.expansion != 0)
			return "ERR filter reached its maximum of 32 sub-filters";
		return err_full;
	case CMD_NO_MEMORY:
		return err_oom;
	case CMD_NOT_COUNTING:
		return "ERR not a counting filter";
	case CMD_AMBIGUOUS:
		return "ERR item is in more than one sub-filter, not deleted";
	default:
		return "ERR internal error";
	}
}

static void reply_status(struct cmd_ctx *c, struct proto_buf *out, enum cmd_status st,
			 const struct bf_filter *f)
{
	reply_error(c, out, status_text(st, f));
}

/* Case-insensitive comparison of an argument with a lower- or upper-case word. */
static bool arg_is(const struct proto_argv *av, size_t i, const char *word)
{
	size_t n = strlen(word);
	return av->argvlen[i] == n && strncasecmp(av->argv[i], word, n) == 0;
}

static bool arg_ll(const struct proto_argv *av, size_t i, long long *out)
{
	return proto_resp_parse_ll(av->argv[i], av->argvlen[i], out);
}

/*
 * Redis's string2d: strtod over the whole argument, no leading space, no NaN, no overflow or
 * underflow to zero ("inf" parses; callers range-check). The argument is copied to a
 * NUL-terminated stack buffer; longer than 127 bytes is refused.
 */
static bool arg_double(const struct proto_argv *av, size_t i, double *out)
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
static bool items_fit(const struct cmd_ctx *c, const struct proto_argv *av, size_t first)
{
	return cmd_keys_fit(c, av->argc - first, av->argvlen + first);
}

/* The filter named by argument i, or NULL. */
static struct bf_filter *arg_filter(const struct cmd_ctx *c, const struct proto_argv *av, size_t i)
{
	return bf_registry_get(c->reg, av->argv[i], av->argvlen[i]);
}

/* Point the session's key scratch at av's arguments from `first` on. 0 or -ENOMEM. */
static int scratch_items(struct cmd_session *s, const struct proto_argv *av, size_t first)
{
	size_t n = av->argc - first;

	if (cmd_session_reserve(s, n))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		s->keys[i] = av->argv[first + i];
	return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* BF.* */

static const char err_capacity_range[] = "ERR capacity must be in the range [1, 1073741824]";

static bool expansion_ok(long long e)
{
	return e >= 0 && cmd_check_expansion((uint64_t)e) == CMD_OK;
}

static void bf_reserve(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	double error_rate;
	long long capacity, expansion = c->default_expansion;
	bool nonscaling = c->default_expansion == 0, nonscaling_opt = false, counting = false;
	size_t exp_at = 0;
	(void)s;

	if (!arg_double(av, 2, &error_rate)) {
		reply_error(c, out, "ERR bad error rate");
		return;
	}
	if (cmd_check_error_rate(error_rate) == CMD_BAD_ARGS) {
		reply_error(c, out, "ERR error rate must be in the range (0.000000, 1.000000)");
		return;
	}
	if (!arg_ll(av, 3, &capacity)) {
		reply_error(c, out, "ERR bad capacity");
		return;
	}
	if (capacity < 0 || cmd_check_capacity((uint64_t)capacity) || capacity > RESP_CAPACITY_MAX) {
		reply_error(c, out, err_capacity_range);
		return;
	}

	for (size_t i = 4; i < av->argc; i++) {
		if (arg_is(av, i, "nonscaling")) {
			nonscaling = nonscaling_opt = true;
		} else if (arg_is(av, i, "counting")) {
			counting = true;
		} else if (arg_is(av, i, "expansion")) {
			if (i + 1 == av->argc) {
				reply_error(c, out, "ERR no expansion");
				return;
			}
			exp_at = ++i;
		} else {
			reply_error(c, out, err_syntax);
			return;
		}
	}
	if (exp_at) {
		if (!arg_ll(av, exp_at, &expansion)) {
			reply_error(c, out, "ERR bad expansion");
			return;
		}
		if (expansion == 0) {
			nonscaling = true;
		} else if (nonscaling_opt) {
			reply_error(c, out, "-Nonscaling filters cannot expand");
			return;
		}
		if (!expansion_ok(expansion)) {
			reply_error(c, out, "ERR expansion must be in the range [0, 1024]");
			return;
		}
	}

	struct bf_params p = cmd_default_params(c);
	p.capacity = (uint64_t)capacity;
	p.error_rate = error_rate;
	p.type = counting ? BF_TYPE_COUNTING : BF_TYPE_BLOOM;
	p.expansion = nonscaling ? 0 : (uint32_t)expansion;
	enum cmd_status st = cmd_create(c, av->argv[1], av->argvlen[1], &p, NULL);
	if (st != CMD_OK) {
		reply_status(c, out, st, NULL);
		return;
	}
	proto_resp_ok(out);
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

	/* Everything that can refuse the whole command is checked before anything changes. */
	if (!items_fit(c, av, first)) {
		reply_error(c, out, err_item_long);
		return;
	}
	if (multi && scratch_items(s, av, first)) {
		reply_error(c, out, err_oom);
		return;
	}
	struct bf_filter *f = arg_filter(c, av, 1);
	if (!f) {
		if (!create) {
			reply_error(c, out, err_not_found);
			return;
		}
		enum cmd_status st = cmd_create(c, av->argv[1], av->argvlen[1], create, &f);
		if (st != CMD_OK) {
			reply_status(c, out, st, NULL);
			return;
		}
	}

	if (!multi) {
		const void *key = av->argv[first];
		enum cmd_status st = cmd_add(c, f, 1, &key, &av->argvlen[first], &one, &done);
		if (st != CMD_OK) {
			reply_status(c, out, st, f);
			return;
		}
		proto_resp_bool(out, s->resp, one > 0);
		return;
	}

	enum cmd_status st = cmd_add(c, f, n, s->keys, av->argvlen + first, s->results, &done);
	proto_resp_array(out, st == CMD_OK ? n : done + 1);
	for (size_t i = 0; i < done; i++)
		proto_resp_bool(out, s->resp, s->results[i] > 0);
	if (st != CMD_OK)
		reply_status(c, out, st, f);
}

static void bf_add(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c);
	add_items(c, s, av, 2, &p, false, out);
}

static void bf_madd(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c);
	add_items(c, s, av, 2, &p, true, out);
}

static void bf_insert(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	struct bf_params p = cmd_default_params(c);
	bool create = true, nonscaling = p.expansion == 0;
	size_t items = 0, i = 2;

	while (i < av->argc && !items) {
		if (arg_is(av, i, "items")) {
			items = ++i;
		} else if (arg_is(av, i, "error")) {
			double e;
			if (++i == av->argc) {
				reply_arity(c, out, "bf.insert");
				return;
			}
			if (!arg_double(av, i++, &e) || cmd_check_error_rate(e) == CMD_BAD_ARGS) {
				reply_error(c, out, "-Bad error rate");
				return;
			}
			p.error_rate = e;
		} else if (arg_is(av, i, "expansion")) {
			long long e;
			if (++i == av->argc) {
				reply_arity(c, out, "bf.insert");
				return;
			}
			if (!arg_ll(av, i++, &e) || !expansion_ok(e)) {
				reply_error(c, out, "-Bad expansion");
				return;
			}
			p.expansion = (uint32_t)e;
		} else if (arg_is(av, i, "capacity")) {
			long long cap;
			if (++i == av->argc) {
				reply_arity(c, out, "bf.insert");
				return;
			}
			if (!arg_ll(av, i++, &cap) || cap < 0 || cmd_check_capacity((uint64_t)cap) ||
			    cap > RESP_CAPACITY_MAX) {
				reply_error(c, out, "-Bad capacity");
				return;
			}
			p.capacity = (uint64_t)cap;
		} else if (arg_is(av, i, "nocreate")) {
			create = false;
			i++;
		} else if (arg_is(av, i, "nonscaling")) {
			nonscaling = true;
			i++;
		} else if (arg_is(av, i, "counting")) {
			p.type = BF_TYPE_COUNTING;
			i++;
		} else {
			reply_error(c, out, "-Unknown argument received");
			return;
		}
	}
	if (!items || items == av->argc) {
		reply_arity(c, out, "bf.insert");
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

	if (!items_fit(c, av, 2)) {
		reply_error(c, out, err_item_long);
		return;
	}
	struct bf_filter *f = arg_filter(c, av, 1);
	if (!multi) {
		if (f) {
			const void *key = av->argv[2];
			cmd_check(c, f, 1, &key, &av->argvlen[2], &one);
		}
		proto_resp_bool(out, s->resp, one > 0);
		return;
	}
	if (f) {
		if (scratch_items(s, av, 2)) {
			reply_error(c, out, err_oom);
			return;
		}
		cmd_check(c, f, n, s->keys, av->argvlen + 2, s->results);
	}
	proto_resp_array(out, n);
	for (size_t i = 0; i < n; i++)
		proto_resp_bool(out, s->resp, f && s->results[i] > 0);
}

static void bf_exists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	check_items(c, s, av, false, out);
}

static void bf_mexists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	check_items(c, s, av, true, out);
}

static void bf_del(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	int one = 0;

	if (!items_fit(c, av, 2)) {
		reply_error(c, out, err_item_long);
		return;
	}
	struct bf_filter *f = arg_filter(c, av, 1);
	if (!f) {
		reply_error(c, out, err_not_found);
		return;
	}
	const void *key = av->argv[2];
	size_t done;
	enum cmd_status st = cmd_delete(c, f, 1, &key, &av->argvlen[2], &one, &done);
	if (st != CMD_OK) {
		reply_status(c, out, st, f);
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
		proto_resp_integer(out, (int64_t)f->bytes);
		break;
	case INFO_FILTERS:
		proto_resp_integer(out, bf_filter_nlayers(f));
		break;
	case INFO_ITEMS:
		proto_resp_integer(out, (int64_t)f->items);
		break;
	default:
		if (f->params.expansion == 0)
			proto_resp_null(out, resp);
		else
			proto_resp_integer(out, f->params.expansion);
		break;
	}
}

static void bf_info(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	struct bf_filter *f = arg_filter(c, av, 1);

	if (!f) {
		reply_error(c, out, err_not_found);
		return;
	}
	if (av->argc == 3) {
		int field = 0;
		while (field < INFO_N && !arg_is(av, 2, info_fields[field].arg))
			field++;
		if (field == INFO_N) {
			reply_error(c, out, "-Invalid information value");
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

static void bf_card(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	struct bf_filter *f = arg_filter(c, av, 1);
	(void)s;

	proto_resp_integer(out, f ? (int64_t)f->items : 0);
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

static void bf_scandump(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	struct bf_filter *f = arg_filter(c, av, 1);
	long long iter;
	(void)s;

	if (!f) {
		reply_error(c, out, err_not_found);
		return;
	}
	if (!arg_ll(av, 2, &iter)) {
		reply_error(c, out, "-Second argument must be numeric");
		return;
	}
	proto_resp_array(out, 2);
	if (iter == 0) {
		unsigned char h[BF_SNAPSHOT_HEADER_LEN];
		bf_snapshot_header(f, 0, 0, h);
		proto_resp_integer(out, 1);
		proto_resp_bulk(out, h, sizeof(h));
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

/* A header chunk: a new filter named name, built and checked by core's snapshot decoder. */
static void dump_load_header(struct cmd_ctx *c, const struct proto_argv *av,
			     struct proto_buf *out)
{
	const char *name = av->argv[1];
	size_t nlen = av->argvlen[1];
	uint64_t limit = bf_registry_max_memory(c->reg), used = bf_registry_memory(c->reg);
	struct bf_snapshot_info info;
	struct bf_filter *f;

	if (!bf_name_valid(name, nlen)) {
		reply_status(c, out, CMD_BAD_NAME, NULL);
		return;
	}
	int rc = bf_snapshot_decode((const unsigned char *)av->argv[3], av->argvlen[3],
				    !limit ? UINT64_MAX : used < limit ? limit - used : 0, &f,
				    &info, NULL, 0);
	if (rc) {
		reply_error(c, out, rc == -ENOMEM ? err_oom : err_bad_data);
		return;
	}
	bf_filter_detach(f); /* a copy: a new filter here, with an id of this instance's */
	rc = bf_registry_adopt(c->reg, name, nlen, f);
	if (rc) {
		bf_filter_free(f);
		reply_status(c, out, cmd_status_from_errno(rc), NULL);
		return;
	}
	f->changes++;
	if (c->hooks.created)
		c->hooks.created(c->hooks.arg, f);
	proto_resp_ok(out);
}

static void bf_loadchunk(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			 struct proto_buf *out)
{
	const char *data = av->argv[3];
	size_t len = av->argvlen[3];
	long long iter;
	(void)s;

	if (!arg_ll(av, 2, &iter)) {
		reply_error(c, out, "ERR Second argument must be numeric");
		return;
	}
	struct bf_filter *f = arg_filter(c, av, 1);
	if (!f && iter == 1) {
		dump_load_header(c, av, out);
		return;
	}
	if (!f) {
		reply_error(c, out, err_not_found);
		return;
	}

	/* A data chunk ends at offset iter - 1 of the body. RedisBloom's checks, in its order:
	 * iter == len passes the first and starts before byte 0, so it has no layer. */
	if (iter < 1 || (uint64_t)iter < len) {
		reply_error(c, out, err_bad_data);
		return;
	}
	int rc = (uint64_t)iter - 1 >= len
			 ? bf_filter_body_write(f, (uint64_t)iter - 1 - len, data, len)
			 : -ERANGE;
	if (rc == -ERANGE)
		reply_error(c, out, "ERR invalid offset - no link found");
	else if (rc)
		reply_error(c, out, "ERR invalid chunk - Too big for current filter");
	else
		proto_resp_ok(out);
}

/* ---------------------------------------------------------------------------------------- */
/* Connection basics */

static void cmd_ping(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	(void)c;
	(void)s;
	if (av->argc == 2)
		proto_resp_bulk(out, av->argv[1], av->argvlen[1]);
	else
		proto_resp_simple(out, "PONG", 4);
}

static void cmd_echo(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	(void)c;
	(void)s;
	proto_resp_bulk(out, av->argv[1], av->argvlen[1]);
}

static void cmd_quit(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	(void)c;
	(void)av;
	s->close_after = true;
	proto_resp_ok(out);
}

static bool user_is_default(const struct proto_argv *av, size_t user)
{
	return av->argvlen[user] == 7 && memcmp(av->argv[user], "default", 7) == 0;
}

/*
 * Credentials of AUTH / HELLO ... AUTH: the password at argv[pass], the user at argv[user] (0:
 * none given, the default user). With no token configured, as Redis 7.0 without requirepass:
 * the default user takes any password. With one: only the default user, with the token
 * (compared in constant time); a failure counts towards the close (cmd_auth_check).
 */
static bool auth_ok(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    size_t user, size_t pass)
{
	if (!c->token)
		return user && user_is_default(av, user);
	if (user && !user_is_default(av, user)) {
		if (++s->auth_failures >= CMD_AUTH_MAX_FAILURES)
			s->close_after = true;
		return false;
	}
	return cmd_auth_check(c, s, av->argv[pass], av->argvlen[pass]);
}

static const char err_wrongpass[] =
    "-WRONGPASS invalid username-password pair or user is disabled.";
static const char err_noauth[] = "-NOAUTH Authentication required.";

static void cmd_auth(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	if (av->argc > 3) {
		reply_error(c, out, err_syntax);
		return;
	}
	if (av->argc == 2 && !c->token) {
		reply_error(c, out,
			    "ERR AUTH <password> called without any password configured for "
			    "the default user. Are you sure your configuration is correct?");
		return;
	}
	if (!auth_ok(c, s, av, av->argc == 3 ? 1 : 0, av->argc - 1)) {
		reply_error(c, out, err_wrongpass);
		return;
	}
	proto_resp_ok(out);
}

/* Redis's validateClientName: printable ASCII without spaces; ours also at most 63 bytes. */
static const char *client_name_error(const char *p, size_t n, size_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] < '!' || p[i] > '~')
			return "ERR Client names cannot contain spaces, newlines or special "
			       "characters.";
	if (n >= cap)
		return "ERR Client names longer than 63 bytes are not supported";
	return NULL;
}

static void set_client_name(struct cmd_session *s, const char *p, size_t n)
{
	memcpy(s->name, p, n);
	s->name[n] = '\0';
}

static void cmd_hello(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	long long ver = 0;
	size_t i = 1, name = 0, user = 0;

	if (av->argc >= 2) {
		if (!arg_ll(av, 1, &ver)) {
			reply_error(c, out,
				    "ERR Protocol version is not an integer or out of range");
			return;
		}
		if (ver < 2 || ver > 3) {
			reply_error(c, out, "-NOPROTO unsupported protocol version");
			return;
		}
		i = 2;
	}
	for (; i < av->argc; i++) {
		size_t more = av->argc - 1 - i;
		if (arg_is(av, i, "auth") && more >= 2) {
			user = i + 1;
			i += 2;
		} else if (arg_is(av, i, "setname") && more >= 1) {
			const char *err =
			    client_name_error(av->argv[i + 1], av->argvlen[i + 1], sizeof(s->name));
			if (err) {
				reply_error(c, out, err);
				return;
			}
			name = ++i;
		} else {
			c->errors++;
			proto_resp_error_fmt(out, "Syntax error in HELLO option '%.*s'",
					     (int)strnlen(av->argv[i], av->argvlen[i]),
					     av->argv[i]);
			return;
		}
	}
	/* As Redis: options are all checked before the credentials. */
	if (user && !auth_ok(c, s, av, user, user + 1)) {
		reply_error(c, out, err_wrongpass);
		return;
	}
	if (!cmd_session_authed(c, s)) {
		reply_error(c, out,
			    "-NOAUTH HELLO must be called with the client already authenticated, "
			    "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
			    "authenticate the client and select the RESP protocol version at the "
			    "same time");
		return;
	}
	if (name)
		set_client_name(s, av->argv[name], av->argvlen[name]);
	if (ver)
		s->resp = (int)ver;

	proto_resp_map(out, s->resp, 7);
	proto_resp_bulk_str(out, "server");
	proto_resp_bulk_str(out, "redis");
	proto_resp_bulk_str(out, "version");
	proto_resp_bulk_str(out, RESP_REDIS_VERSION);
	proto_resp_bulk_str(out, "proto");
	proto_resp_integer(out, s->resp);
	proto_resp_bulk_str(out, "id");
	proto_resp_integer(out, (int64_t)s->id);
	proto_resp_bulk_str(out, "mode");
	proto_resp_bulk_str(out, "standalone");
	proto_resp_bulk_str(out, "role");
	proto_resp_bulk_str(out, "master");
	proto_resp_bulk_str(out, "modules");
	proto_resp_array(out, 0);
}

static void cmd_select(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	long long db;
	(void)s;

	if (!arg_ll(av, 1, &db)) {
		reply_error(c, out, err_not_int);
		return;
	}
	if (db != 0) {
		reply_error(c, out, "ERR DB index is out of range");
		return;
	}
	proto_resp_ok(out);
}

/* "ERR unknown subcommand 'x'. Try CMD HELP." with the subcommand as the client typed it. */
static void reply_unknown_sub(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out,
			      const char *upper)
{
	size_t n = strnlen(av->argv[1], av->argvlen[1]);

	c->errors++;
	proto_resp_error_fmt(out, "unknown subcommand '%.*s'. Try %s HELP.",
			     (int)(n > 128 ? 128 : n), av->argv[1], upper);
}

static void reply_help(struct proto_buf *out, const char *const *lines)
{
	size_t n = 0;

	while (lines[n])
		n++;
	proto_resp_array(out, n);
	for (size_t i = 0; i < n; i++)
		proto_resp_simple(out, lines[i], strlen(lines[i]));
}

static void cmd_client(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	static const char *const help[] = {
	    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GETNAME",
	    "    Return the name of the current connection.",
	    "ID",
	    "    Return the ID of the current connection.",
	    "SETINFO <LIB-NAME|LIB-VER> <value>",
	    "    Accepted and ignored.",
	    "SETNAME <name>",
	    "    Assign the name <name> to the current connection.",
	    "HELP",
	    "    Print this help.",
	    NULL,
	};

	if (arg_is(av, 1, "setname")) {
		if (av->argc != 3) {
			reply_arity(c, out, "client|setname");
			return;
		}
		const char *err = client_name_error(av->argv[2], av->argvlen[2], sizeof(s->name));
		if (err) {
			reply_error(c, out, err);
			return;
		}
		set_client_name(s, av->argv[2], av->argvlen[2]);
		proto_resp_ok(out);
	} else if (arg_is(av, 1, "getname")) {
		if (av->argc != 2) {
			reply_arity(c, out, "client|getname");
			return;
		}
		if (s->name[0])
			proto_resp_bulk_str(out, s->name);
		else
			proto_resp_null(out, s->resp);
	} else if (arg_is(av, 1, "id")) {
		if (av->argc != 2) {
			reply_arity(c, out, "client|id");
			return;
		}
		proto_resp_integer(out, (int64_t)s->id);
	} else if (arg_is(av, 1, "setinfo")) {
		if (av->argc != 4) {
			reply_arity(c, out, "client|setinfo");
			return;
		}
		if (!arg_is(av, 2, "lib-name") && !arg_is(av, 2, "lib-ver")) {
			c->errors++;
			size_t n = strnlen(av->argv[2], av->argvlen[2]);
			proto_resp_error_fmt(out, "Unrecognized option '%.*s'",
					     (int)(n > 128 ? 128 : n), av->argv[2]);
			return;
		}
		proto_resp_ok(out);
	} else if (arg_is(av, 1, "help") && av->argc == 2) {
		reply_help(out, help);
	} else {
		reply_unknown_sub(c, av, out, "CLIENT");
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Keyspace: filters seen as Redis keys */

static void cmd_dbsize(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	(void)s;
	(void)av;
	proto_resp_integer(out, (int64_t)bf_registry_count(c->reg));
}

static void cmd_exists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	int64_t n = 0;
	(void)s;

	for (size_t i = 1; i < av->argc; i++)
		n += arg_filter(c, av, i) != NULL;
	proto_resp_integer(out, n);
}

static void cmd_del(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out)
{
	int64_t n = 0;
	(void)s;

	for (size_t i = 1; i < av->argc; i++)
		n += cmd_drop(c, av->argv[i], av->argvlen[i], true) == CMD_OK;
	proto_resp_integer(out, n);
}

static void cmd_type(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	(void)s;
	if (arg_filter(c, av, 1))
		proto_resp_simple(out, RESP_BF_TYPE, sizeof(RESP_BF_TYPE) - 1);
	else
		proto_resp_simple(out, "none", 4);
}

/* Compile a KEYS, SCAN or CONFIG GET pattern, or reply why not. NULL after the reply. */
static struct glob *pattern(struct cmd_ctx *c, struct proto_buf *out, const char *p, size_t plen,
			    bool nocase)
{
	struct glob *g;
	int rc = glob_compile(p, plen, nocase, &g);

	if (rc) {
		reply_error(c, out, rc == -E2BIG ? err_pattern_long : err_oom);
		return NULL;
	}
	return g;
}

/* Reply the names matching g (NULL: all) as an array. */
static void reply_names(struct cmd_ctx *c, struct proto_buf *out, const struct glob *g)
{
	struct bf_filter **list;
	size_t n, k = 0;

	if (bf_registry_list(c->reg, "", 0, &list, &n)) {
		reply_error(c, out, err_oom);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!g || glob_match(g, list[i]->name, list[i]->name_len))
			list[k++] = list[i];
	proto_resp_array(out, k);
	for (size_t i = 0; i < k; i++)
		proto_resp_bulk(out, list[i]->name, list[i]->name_len);
	free(list);
}

static void cmd_keys(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	struct glob *g = pattern(c, out, av->argv[1], av->argvlen[1], false);
	(void)s;

	if (g)
		reply_names(c, out, g);
	glob_free(g);
}

/* Redis 7.0's SCAN cursor: strtoul over the whole argument, no leading space ("" is 0). */
static bool scan_cursor_ok(const char *p, size_t n)
{
	char buf[64];
	char *end;

	if (n >= sizeof(buf) || (n && isspace((unsigned char)p[0])))
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	(void)strtoull(buf, &end, 10);
	return (size_t)(end - buf) == n && errno != ERANGE;
}

static void cmd_scan(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	size_t match = 0, type = 0;
	(void)s;

	if (!scan_cursor_ok(av->argv[1], av->argvlen[1])) {
		reply_error(c, out, "ERR invalid cursor");
		return;
	}
	for (size_t i = 2; i < av->argc; i += 2) {
		if (i + 1 == av->argc) {
			reply_error(c, out, err_syntax);
			return;
		}
		if (arg_is(av, i, "count")) {
			long long n;
			if (!arg_ll(av, i + 1, &n)) {
				reply_error(c, out, err_not_int);
				return;
			}
			if (n < 1) {
				reply_error(c, out, err_syntax);
				return;
			}
		} else if (arg_is(av, i, "match")) {
			match = i + 1;
		} else if (arg_is(av, i, "type")) {
			type = i + 1;
		} else {
			reply_error(c, out, err_syntax);
			return;
		}
	}
	struct glob *g = NULL;
	if (match && !(g = pattern(c, out, av->argv[match], av->argvlen[match], false)))
		return;
	/* One pass returns everything: the next cursor is always 0. */
	proto_resp_array(out, 2);
	proto_resp_bulk(out, "0", 1);
	if (type && !arg_is(av, type, RESP_BF_TYPE))
		proto_resp_array(out, 0);
	else
		reply_names(c, out, g);
	glob_free(g);
}

/* ---------------------------------------------------------------------------------------- */
/* Server */

static void cmd_save(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	(void)s;
	bool background = arg_is(av, 0, "bgsave");

	if (background && av->argc == 2 && !arg_is(av, 1, "schedule")) {
		reply_error(c, out, err_syntax);
		return;
	}
	if (cmd_flush(c, NULL) != CMD_OK) {
		reply_error(c, out, "ERR snapshot failed, see the server log");
		return;
	}
	if (background)
		proto_resp_simple(out, "Background saving started", 25);
	else
		proto_resp_ok(out);
}

static void cmd_lastsave(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			 struct proto_buf *out)
{
	(void)s;
	(void)av;
	proto_resp_integer(out, (int64_t)c->last_save_unix);
}

enum info_section {
	SEC_SERVER = 1 << 0,
	SEC_MEMORY = 1 << 1,
	SEC_PERSISTENCE = 1 << 2,
	SEC_STATS = 1 << 3,
	SEC_REPLICATION = 1 << 4,
	SEC_KEYSPACE = 1 << 5,
	SEC_ALL = (1 << 6) - 1,
};

static void info_line(struct proto_buf *b, const char *key, uint64_t v)
{
	proto_buf_append_str(b, key);
	proto_buf_append_char(b, ':');
	proto_buf_append_u64(b, v);
	proto_buf_append(b, "\r\n", 2);
}

static void info_section(struct proto_buf *b, const char *title)
{
	if (b->len)
		proto_buf_append(b, "\r\n", 2);
	proto_buf_append_str(b, "# ");
	proto_buf_append_str(b, title);
	proto_buf_append(b, "\r\n", 2);
}

static void cmd_info(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	static const struct {
		const char *name;
		unsigned bits;
	} names[] = {
	    {"server", SEC_SERVER},
	    {"memory", SEC_MEMORY},
	    {"persistence", SEC_PERSISTENCE},
	    {"stats", SEC_STATS},
	    {"replication", SEC_REPLICATION},
	    {"keyspace", SEC_KEYSPACE},
	    {"default", SEC_ALL},
	    {"all", SEC_ALL},
	    {"everything", SEC_ALL},
	};
	unsigned want = av->argc == 1 ? SEC_ALL : 0;
	struct proto_buf b;

	for (size_t i = 1; i < av->argc; i++)
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (arg_is(av, i, names[k].name))
				want |= names[k].bits;

	proto_buf_init(&b);
	if (want & SEC_SERVER) {
		uint64_t now = (uint64_t)time(NULL);
		uint64_t up = c->started_unix && now > c->started_unix ? now - c->started_unix : 0;
		info_section(&b, "Server");
		proto_buf_append_str(&b, "redis_version:" RESP_REDIS_VERSION "\r\n"
					 "redis_mode:standalone\r\n"
					 "blossomd_version:");
		proto_buf_append_str(&b, c->version ? c->version : "unknown");
		proto_buf_append_str(&b, "\r\narch_bits:64\r\n");
		info_line(&b, "uptime_in_seconds", up);
		info_line(&b, "uptime_in_days", up / 86400);
	}
	if (want & SEC_MEMORY) {
		info_section(&b, "Memory");
		info_line(&b, "used_memory", bf_registry_memory(c->reg));
		info_line(&b, "maxmemory", bf_registry_max_memory(c->reg));
		proto_buf_append_str(&b, "maxmemory_policy:noeviction\r\n");
	}
	if (want & SEC_PERSISTENCE) {
		info_section(&b, "Persistence");
		proto_buf_append_str(&b, "loading:0\r\n");
		info_line(&b, "rdb_last_save_time", c->last_save_unix);
	}
	if (want & SEC_STATS) {
		info_section(&b, "Stats");
		info_line(&b, "total_commands_processed", c->commands);
		info_line(&b, "total_error_replies", c->errors);
	}
	if (want & SEC_REPLICATION) {
		info_section(&b, "Replication");
		proto_buf_append_str(&b, "role:master\r\nconnected_slaves:0\r\n");
	}
	if (want & SEC_KEYSPACE) {
		size_t n = bf_registry_count(c->reg);
		info_section(&b, "Keyspace");
		if (n) {
			proto_buf_append_str(&b, "db0:keys=");
			proto_buf_append_u64(&b, n);
			proto_buf_append_str(&b, ",expires=0,avg_ttl=0\r\n");
		}
	}
	if (b.failed)
		reply_error(c, out, err_oom);
	else
		proto_resp_verbatim(out, s->resp, "txt", b.data ? b.data : "", b.len);
	proto_buf_free(&b);
}

/* CONFIG GET answers the few parameters clients read on connect (redis-benchmark: save,
 * appendonly). */
static void cmd_config(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	static const char *const help[] = {
	    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GET <pattern>",
	    "    Return parameters matching the glob-like <pattern> and their values.",
	    "HELP",
	    "    Print this help.",
	    NULL,
	};
	static const char *const params[] = {"appendonly", "databases", "maxmemory", "save"};
	enum { NPARAMS = sizeof(params) / sizeof(params[0]) };
	bool hit[NPARAMS] = {false};
	size_t n = 0;

	if (arg_is(av, 1, "help") && av->argc == 2) {
		reply_help(out, help);
		return;
	}
	if (!arg_is(av, 1, "get")) {
		reply_unknown_sub(c, av, out, "CONFIG");
		return;
	}
	if (av->argc < 3) {
		reply_arity(c, out, "config|get");
		return;
	}
	for (size_t i = 2; i < av->argc; i++) {
		struct glob *g = pattern(c, out, av->argv[i], av->argvlen[i], true);
		if (!g)
			return;
		for (size_t k = 0; k < NPARAMS; k++)
			hit[k] = hit[k] || glob_match(g, params[k], strlen(params[k]));
		glob_free(g);
	}
	for (size_t k = 0; k < NPARAMS; k++)
		n += hit[k];
	proto_resp_map(out, s->resp, n);
	for (size_t k = 0; k < NPARAMS; k++) {
		if (!hit[k])
			continue;
		proto_resp_bulk_str(out, params[k]);
		if (k == 0)
			proto_resp_bulk_str(out, "no");
		else if (k == 1)
			proto_resp_bulk_str(out, "1");
		else if (k == 2) {
			char num[24];
			int len = snprintf(num, sizeof(num), "%llu",
					   (unsigned long long)bf_registry_max_memory(c->reg));
			proto_resp_bulk(out, num, (size_t)len);
		} else
			proto_resp_bulk_str(out, "");
	}
}

/* ---------------------------------------------------------------------------------------- */
/* The command table */

struct resp_cmd {
	const char *name; /* lower case, as Redis names it in errors and COMMAND */
	size_t len;
	resp_handler run;
	unsigned min, max; /* argc bounds (command name included); max 0: no upper bound */
	const char *flags; /* COMMAND's flags, space separated */
	int first, last, step;
};

static void cmd_command(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out);

/* Hottest first: lookups scan the table in order. */
static const struct resp_cmd commands[] = {
    {"bf.add", 6, bf_add, 3, 3, "write denyoom", 1, 1, 1},
    {"bf.exists", 9, bf_exists, 3, 3, "readonly fast", 1, 1, 1},
    {"bf.madd", 7, bf_madd, 3, 0, "write denyoom", 1, 1, 1},
    {"bf.mexists", 10, bf_mexists, 3, 0, "readonly fast", 1, 1, 1},
    {"bf.insert", 9, bf_insert, 4, 0, "write denyoom", 1, 1, 1},
    {"bf.reserve", 10, bf_reserve, 4, 8, "write denyoom fast", 1, 1, 1},
    {"bf.info", 7, bf_info, 2, 3, "readonly fast", 1, 1, 1},
    {"bf.card", 7, bf_card, 2, 2, "readonly fast", 1, 1, 1},
    {"bf.del", 6, bf_del, 3, 3, "write fast", 1, 1, 1},
    {"bf.scandump", 11, bf_scandump, 3, 3, "readonly", 1, 1, 1},
    {"bf.loadchunk", 12, bf_loadchunk, 4, 4, "write denyoom", 1, 1, 1},
    {"ping", 4, cmd_ping, 1, 2, "fast", 0, 0, 0},
    {"echo", 4, cmd_echo, 2, 2, "fast", 0, 0, 0},
    {"quit", 4, cmd_quit, 1, 0, "noscript loading stale fast no_auth allow_busy", 0, 0, 0},
    {"hello", 5, cmd_hello, 1, 0, "noscript loading stale fast no_auth allow_busy", 0, 0, 0},
    {"auth", 4, cmd_auth, 2, 0, "noscript loading stale fast no_auth allow_busy", 0, 0, 0},
    {"select", 6, cmd_select, 2, 2, "loading stale fast", 0, 0, 0},
    {"client", 6, cmd_client, 2, 0, "", 0, 0, 0},
    {"command", 7, cmd_command, 1, 0, "loading stale", 0, 0, 0},
    {"config", 6, cmd_config, 2, 0, "", 0, 0, 0},
    {"info", 4, cmd_info, 1, 0, "loading stale", 0, 0, 0},
    {"dbsize", 6, cmd_dbsize, 1, 1, "readonly fast", 0, 0, 0},
    {"exists", 6, cmd_exists, 2, 0, "readonly fast", 1, -1, 1},
    {"del", 3, cmd_del, 2, 0, "write", 1, -1, 1},
    {"unlink", 6, cmd_del, 2, 0, "write fast", 1, -1, 1},
    {"type", 4, cmd_type, 2, 2, "readonly fast", 1, 1, 1},
    {"keys", 4, cmd_keys, 2, 2, "readonly", 0, 0, 0},
    {"scan", 4, cmd_scan, 2, 0, "readonly", 0, 0, 0},
    {"save", 4, cmd_save, 1, 1, "admin noscript", 0, 0, 0},
    {"bgsave", 6, cmd_save, 1, 2, "admin noscript", 0, 0, 0},
    {"lastsave", 8, cmd_lastsave, 1, 1, "loading stale fast", 0, 0, 0},
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

static long long cmd_arity(const struct resp_cmd *e)
{
	return e->min == e->max ? (long long)e->min : -(long long)e->min;
}

/* One entry of COMMAND / COMMAND INFO, in Redis 7.0's ten-field form. */
static void command_entry(struct proto_buf *out, int resp, const struct resp_cmd *e)
{
	size_t nflags = 0;
	const char *p = e->flags;

	for (const char *q = p; *q;) {
		while (*q == ' ')
			q++;
		if (!*q)
			break;
		nflags++;
		while (*q && *q != ' ')
			q++;
	}
	proto_resp_array(out, 10);
	proto_resp_bulk_str(out, e->name);
	proto_resp_integer(out, cmd_arity(e));
	proto_resp_set(out, resp, nflags);
	while (*p) {
		while (*p == ' ')
			p++;
		const char *start = p;
		while (*p && *p != ' ')
			p++;
		if (p > start)
			proto_resp_simple(out, start, (size_t)(p - start));
	}
	proto_resp_integer(out, e->first);
	proto_resp_integer(out, e->last);
	proto_resp_integer(out, e->step);
	proto_resp_set(out, resp, 0); /* ACL categories */
	proto_resp_set(out, resp, 0); /* tips */
	proto_resp_array(out, 0);     /* key specs */
	proto_resp_array(out, 0);     /* subcommands */
}

static void cmd_command(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	static const char *const help[] = {
	    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "(no subcommand)",
	    "    Return details about all commands.",
	    "COUNT",
	    "    Return the total number of commands in this server.",
	    "LIST",
	    "    Return a list of all commands in this server.",
	    "INFO [<command-name> ...]",
	    "    Return details about multiple commands.",
	    "DOCS [<command-name> ...]",
	    "    Return an empty map (no documentation is kept).",
	    "HELP",
	    "    Print this help.",
	    NULL,
	};

	if (av->argc == 1) {
		proto_resp_array(out, NCOMMANDS);
		for (size_t i = 0; i < NCOMMANDS; i++)
			command_entry(out, s->resp, &commands[i]);
	} else if (arg_is(av, 1, "count")) {
		if (av->argc != 2) {
			reply_arity(c, out, "command|count");
			return;
		}
		proto_resp_integer(out, NCOMMANDS);
	} else if (arg_is(av, 1, "list")) {
		if (av->argc != 2) {
			reply_error(c, out, err_syntax);
			return;
		}
		proto_resp_array(out, NCOMMANDS);
		for (size_t i = 0; i < NCOMMANDS; i++)
			proto_resp_bulk_str(out, commands[i].name);
	} else if (arg_is(av, 1, "info")) {
		if (av->argc == 2) {
			proto_resp_array(out, NCOMMANDS);
			for (size_t i = 0; i < NCOMMANDS; i++)
				command_entry(out, s->resp, &commands[i]);
			return;
		}
		proto_resp_array(out, av->argc - 2);
		for (size_t i = 2; i < av->argc; i++) {
			const struct resp_cmd *e = lookup(av->argv[i], av->argvlen[i]);
			if (e)
				command_entry(out, s->resp, e);
			else
				proto_resp_null(out, s->resp);
		}
	} else if (arg_is(av, 1, "docs")) {
		proto_resp_map(out, s->resp, 0);
	} else if (arg_is(av, 1, "help") && av->argc == 2) {
		reply_help(out, help);
	} else {
		reply_unknown_sub(c, av, out, "COMMAND");
	}
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

void cmd_resp_exec(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out)
{
	if (av->argc == 0)
		return;
	c->commands++;
	const struct resp_cmd *e = lookup(av->argv[0], av->argvlen[0]);
	if (!cmd_session_authed(c, s) && (!e || (e->run != cmd_auth && e->run != cmd_hello &&
						 e->run != cmd_ping && e->run != cmd_quit))) {
		reply_error(c, out, err_noauth);
		return;
	}
	if (!e) {
		reply_unknown(c, av, out);
		return;
	}
	if (av->argc < e->min || (e->max && av->argc > e->max)) {
		reply_arity(c, out, e->name);
		return;
	}
	e->run(c, s, av, out);
}
