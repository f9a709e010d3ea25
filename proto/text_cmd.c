/* SPDX-License-Identifier: MIT */
/*
 * The text protocol front end (bloomd's dialect, DESIGN.md §4.1): one line in, one reply out.
 * bloomd's clients rely on its exact words, so every reply string lives in this file.
 */
#include "proto/command.h"
#include "proto/text.h"
#include "proto/text_cmd.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CLIENT_ERR(s) "Client Error: " s "\n"

static const char *const status_reply[] = {
    [CMD_OK] = "Done\n",
    [CMD_NOT_FOUND] = "Filter does not exist\n",
    [CMD_EXISTS] = "Exists\n",
    [CMD_BAD_NAME] = CLIENT_ERR("Bad filter name"),
    [CMD_BAD_ARGS] = CLIENT_ERR("Bad arguments"),
    [CMD_RATE_TOO_LOW] = CLIENT_ERR("Error rate below 1e-12 is not supported"),
    [CMD_KEY_TOO_LONG] = CLIENT_ERR("Key too long"),
    [CMD_FULL] = CLIENT_ERR("Filter is full"),
    [CMD_NO_MEMORY] = CLIENT_ERR("Not enough memory"),
    [CMD_NOT_COUNTING] = CLIENT_ERR("Not a counting filter"),
    [CMD_AMBIGUOUS] = CLIENT_ERR("Key is in more than one layer, not deleted"),
    [CMD_LOG_FAILED] = "Internal Error\n",
    [CMD_PAGED_OUT] = "Internal Error\n",
    [CMD_INTERNAL] = "Internal Error\n",
};

void text_cmd_log_failed(struct proto_buf *out)
{
	proto_buf_append_str(out, status_reply[CMD_LOG_FAILED]);
}

static void reply(struct cmd_ctx *c, struct proto_buf *out, enum cmd_status st)
{
	if (st != CMD_OK && st != CMD_EXISTS)
		c->errors++;
	proto_buf_append_str(out, status_reply[st]);
}

static void client_error(struct cmd_ctx *c, struct proto_buf *out, const char *msg)
{
	c->errors++;
	proto_buf_append_str(out, msg);
}

/* A span of the line. */
struct span {
	const char *p;
	size_t n;
};

/* Cut the first word (proto/text.h's words) off *rest; *rest then starts after it. */
static bool next_word(struct span *rest, struct span *word)
{
	return proto_text_next_word(&rest->p, &rest->n, &word->p, &word->n);
}

static bool word_is(struct span w, const char *s)
{
	size_t n = strlen(s);
	return w.n == n && memcmp(w.p, s, n) == 0;
}

/* The commands blossomd adds to bloomd's (auth, ping, quit, d/delete) in any case, as a user
 * who types AUTH after reading about Redis expects; bloomd's own stay as bloomd has them. */
static bool ext_is(struct span w, const char *s)
{
	size_t n = strlen(s);
	return w.n == n && strncasecmp(w.p, s, n) == 0;
}

/* The filter named by the first word of args, or a reply saying why not. */
static struct bf_filter *lookup(struct cmd_ctx *c, struct span name, struct proto_buf *out)
{
	struct bf_filter *f = cmd_lookup(c, name.p, name.n);
	if (!f)
		reply(c, out, CMD_NOT_FOUND);
	return f;
}

/* Parse a decimal unsigned integer filling the whole span. */
static bool parse_u64(struct span s, uint64_t *v)
{
	if (s.n == 0 || s.n > 20)
		return false;
	uint64_t x = 0;
	for (size_t i = 0; i < s.n; i++) {
		unsigned d = (unsigned char)s.p[i] - '0';
		if (d > 9 || x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*v = x;
	return true;
}

/* Parse a finite decimal number filling the whole span. */
static bool parse_double(struct span s, double *v)
{
	char buf[64];
	if (s.n == 0 || s.n >= sizeof(buf))
		return false;
	memcpy(buf, s.p, s.n);
	buf[s.n] = '\0';
	char *end;
	errno = 0;
	double x = strtod(buf, &end);
	if (end != buf + s.n || errno || !isfinite(x))
		return false;
	*v = x;
	return true;
}

/* "key=value" or a bare "key" (which means key=1, as bloomd's tests send "in_memory"). */
static bool option(struct span w, const char *key, struct span *value)
{
	size_t n = strlen(key);
	if (w.n < n || memcmp(w.p, key, n) != 0)
		return false;
	if (w.n == n) {
		*value = (struct span){"1", 1};
		return true;
	}
	if (w.p[n] != '=')
		return false;
	*value = (struct span){w.p + n + 1, w.n - n - 1};
	return true;
}

static bool parse_flag(struct span v, bool *flag)
{
	if (word_is(v, "0") || word_is(v, "1")) {
		*flag = v.p[0] == '1';
		return true;
	}
	return false;
}

/* create NAME [capacity=N] [prob=P] [in_memory[=0|1]] [type=bloom|counting] [expansion=N]
 * [nonscaling[=0|1]] */
static void do_create(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name, w, v;
	if (!next_word(&args, &name)) {
		client_error(c, out, CLIENT_ERR("Must provide filter name"));
		return;
	}
	if (!bf_name_valid(name.p, name.n)) {
		reply(c, out, CMD_BAD_NAME);
		return;
	}
	struct bf_params p = cmd_default_params(c, CMD_PEER_TEXT);
	bool in_memory = false, nonscaling = false, expands = false;
	enum cmd_status st = CMD_OK;
	while (st == CMD_OK && next_word(&args, &w)) {
		uint64_t u = 0;
		if (option(w, "capacity", &v))
			st = parse_u64(v, &p.capacity) ? cmd_check_capacity(p.capacity)
						       : CMD_BAD_ARGS;
		else if (option(w, "prob", &v))
			st = parse_double(v, &p.error_rate) ? cmd_check_error_rate(p.error_rate)
							    : CMD_BAD_ARGS;
		else if (option(w, "in_memory", &v))
			st = parse_flag(v, &in_memory) ? CMD_OK : CMD_BAD_ARGS;
		else if (option(w, "nonscaling", &v))
			st = parse_flag(v, &nonscaling) ? CMD_OK : CMD_BAD_ARGS;
		else if (option(w, "expansion", &v))
			st = parse_u64(v, &u) ? cmd_check_expansion(u) : CMD_BAD_ARGS;
		else if (word_is(w, "type=bloom"))
			p.type = BF_TYPE_BLOOM;
		else if (word_is(w, "type=counting"))
			p.type = BF_TYPE_COUNTING;
		else
			st = CMD_BAD_ARGS;
		if (st == CMD_OK && option(w, "expansion", &v)) {
			p.expansion = (uint32_t)u;
			expands = u != 0;
		}
	}
	/* expansion=0 is non-scaling (as on RESP and HTTP); a growth factor for a filter that
	 * never grows is a contradiction, refused as RESP and HTTP refuse it. */
	if (st == CMD_OK && nonscaling && expands)
		st = CMD_BAD_ARGS;
	if (st != CMD_OK) {
		reply(c, out, st);
		return;
	}
	p.persist = !in_memory;
	if (nonscaling)
		p.expansion = 0;
	reply(c, out, cmd_create(c, name.p, name.n, &p, NULL));
}

struct list_out {
	struct proto_buf *out;
	uint64_t now;
	const struct bf_filter *last; /* the last filter looked at */
};

static void list_line(void *arg, struct bf_filter *f)
{
	struct list_out *a = arg;

	a->last = f;
	if (cmd_expired(f, a->now))
		return;
	proto_buf_append(a->out, bf_filter_name(f), f->name_len);
	proto_buf_append_fmt(a->out, " %f %llu %llu %llu\n", f->params->error_rate,
			     (unsigned long long)bf_filter_bytes(f),
			     (unsigned long long)bf_filter_capacity(f),
			     (unsigned long long)bf_filter_items(f));
}

/*
 * list [PREFIX]: START, "NAME PROB BYTES CAPACITY SIZE" per filter in name order, END. A long
 * list goes out CMD_LIST_STEP filters per call (cmd_ctx.again), from just after the last name
 * of the call before: a filter created or dropped meanwhile is listed if it comes later.
 */
static void do_list(struct cmd_ctx *c, struct cmd_session *s, struct span args,
		    struct proto_buf *out)
{
	struct span prefix = {"", 0}, extra;
	next_word(&args, &prefix);
	if (next_word(&args, &extra)) {
		client_error(c, out, CLIENT_ERR("Unexpected arguments"));
		return;
	}
	struct cmd_listing *l = s->listing;
	struct list_out a = {out, cmd_now_ms(), NULL};
	if (!l)
		proto_buf_append_str(out, "START\n");
	bool more = bf_registry_walk(c->reg, prefix.p, prefix.n, l ? l->after : "", l ? l->alen : 0,
				     CMD_LIST_STEP, list_line, &a);
	/* With no memory to go on later, it goes on now. */
	while (more && !l && !(l = s->listing = calloc(1, sizeof(*l))))
		more = bf_registry_walk(c->reg, prefix.p, prefix.n, bf_filter_name(a.last),
					a.last->name_len, CMD_LIST_STEP, list_line, &a);
	if (more) {
		memcpy(l->after, bf_filter_name(a.last), a.last->name_len);
		l->alen = a.last->name_len;
		c->again = true;
		return;
	}
	proto_buf_append_str(out, "END\n");
	cmd_session_end_listing(s);
}

/* The one filter name of drop/close/clear/info/flush, or a reply saying why not. */
static bool only_name(struct cmd_ctx *c, struct span args, struct span *name, struct proto_buf *out)
{
	struct span extra;
	if (!next_word(&args, name)) {
		client_error(c, out, CLIENT_ERR("Must provide filter name"));
		return false;
	}
	if (next_word(&args, &extra)) {
		client_error(c, out, CLIENT_ERR("Unexpected arguments"));
		return false;
	}
	return true;
}

static void do_drop(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name;
	if (only_name(c, args, &name, out))
		reply(c, out, cmd_drop(c, name.p, name.n, true));
}

/* close: as bloomd's, the filter is written out and leaves memory (a memory-only one stays);
 * it stays listed and is loaded again on its next use. */
static void do_close(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name;
	struct bf_filter *f;
	int rc;

	if (!only_name(c, args, &name, out) || !(f = lookup(c, name, out)))
		return;
	rc = c->hooks.page_out ? c->hooks.page_out(c->hooks.arg, f) : -ENOTSUP;
	if (rc == -EINPROGRESS) {
		c->paging = f; /* written in the background: this command runs again after */
		c->commands--; /* and is counted then */
		return;
	}
	reply(c, out, rc && rc != -ENOTSUP ? CMD_INTERNAL : CMD_OK);
}

/* clear: as bloomd's, only a closed filter is forgotten (its files stay: a restart loads it
 * again); one in memory is refused with bloomd's exact line, which has no "Client Error: "
 * (bloomd's integration suite checks it). */
static void do_clear(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name;
	struct bf_filter *f;

	if (!only_name(c, args, &name, out) || !(f = lookup(c, name, out)))
		return;
	if (!f->paged) {
		client_error(c, out, "Filter is not proxied. Close it first.\n");
		return;
	}
	reply(c, out, cmd_drop(c, name.p, name.n, false));
}

/* Extension: expires NAME SECONDS: the filter expires in SECONDS (0: never), as Redis's EXPIRE
 * and PERSIST. */
static void do_expire(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name, secs, extra;
	struct bf_filter *f;
	uint64_t n;

	if (!next_word(&args, &name) || !next_word(&args, &secs)) {
		client_error(c, out, CLIENT_ERR("Must provide filter name and seconds"));
		return;
	}
	if (next_word(&args, &extra)) {
		client_error(c, out, CLIENT_ERR("Unexpected arguments"));
		return;
	}
	/* As Redis's "invalid expire time": the time must fit a signed 64-bit count of ms. */
	if (!parse_u64(secs, &n) || n > ((uint64_t)INT64_MAX - cmd_now_ms()) / 1000) {
		client_error(c, out, CLIENT_ERR("Bad arguments"));
		return;
	}
	if (!(f = lookup(c, name, out)))
		return;
	reply(c, out, cmd_set_expire(c, f, n ? cmd_now_ms() + n * 1000 : 0));
}

static void do_flush(struct cmd_ctx *c, struct cmd_session *s, struct span args,
		     struct proto_buf *out)
{
	struct span name, probe = args;
	struct bf_filter *f = NULL;
	enum cmd_status st;

	if (next_word(&probe, &name)) {
		if (!only_name(c, args, &name, out) || !(f = lookup(c, name, out)))
			return;
	}
	st = cmd_flush(c, f, &s->flush_ticket);
	if (c->write_wait) {
		c->commands--; /* written in the background: runs again after, counted then */
		c->peer_commands[CMD_PEER_TEXT]--;
		return;
	}
	reply(c, out, st);
}

static void append_u64_field(struct proto_buf *out, const char *key, uint64_t v)
{
	proto_buf_append_str(out, key);
	proto_buf_append_char(out, ' ');
	proto_buf_append_u64(out, v);
	proto_buf_append_char(out, '\n');
}

static void do_info(struct cmd_ctx *c, struct span args, struct proto_buf *out)
{
	struct span name;
	struct bf_filter *f;
	if (!only_name(c, args, &name, out) || !(f = lookup(c, name, out)))
		return;
	proto_buf_append_str(out, "START\n");
	/* bloomd's thirteen fields, in its order. */
	append_u64_field(out, "capacity", bf_filter_capacity(f));
	append_u64_field(out, "checks", bf_filter_checks(f));
	append_u64_field(out, "check_hits", bf_filter_stat(f, BF_STAT_CHECK_HITS));
	append_u64_field(out, "check_misses", bf_filter_stat(f, BF_STAT_CHECK_MISSES));
	append_u64_field(out, "in_memory", !f->paged);
	append_u64_field(out, "page_ins", bf_filter_page_ins(f));
	append_u64_field(out, "page_outs", bf_filter_page_outs(f));
	proto_buf_append_fmt(out, "probability %f\n", f->params->error_rate);
	append_u64_field(out, "sets", bf_filter_sets(f));
	append_u64_field(out, "set_hits", bf_filter_stat(f, BF_STAT_SET_HITS));
	append_u64_field(out, "set_misses", bf_filter_stat(f, BF_STAT_SET_MISSES));
	append_u64_field(out, "size", bf_filter_items(f));
	append_u64_field(out, "storage", bf_filter_bytes(f));
	/* Then blossomd's own. */
	proto_buf_append_fmt(out, "type %s\n",
			     f->params->type == BF_TYPE_COUNTING ? "counting" : "bloom");
	append_u64_field(out, "persist", f->params->persist);
	append_u64_field(out, "initial_capacity", f->params->capacity);
	append_u64_field(out, "expansion", f->params->expansion);
	append_u64_field(out, "layers", bf_filter_nlayers(f));
	proto_buf_append_fmt(out, "fpr_estimate %.6g\n", bf_filter_fpr(f));
	append_u64_field(out, "deletes", bf_filter_deletes(f));
	append_u64_field(out, "delete_hits", bf_filter_delete_hits(f));
	append_u64_field(out, "delete_misses", bf_filter_delete_misses(f));
	/* Seconds left, rounded as Redis's TTL; -1: never expires. */
	uint64_t now = cmd_now_ms();
	if (bf_filter_expire_ms(f))
		append_u64_field(
		    out, "ttl",
		    bf_filter_expire_ms(f) > now ? (bf_filter_expire_ms(f) - now + 500) / 1000 : 0);
	else
		proto_buf_append_str(out, "ttl -1\n");
	proto_buf_append_str(out, "END\n");
}

static void append_yes_no(struct proto_buf *out, const int *res, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i)
			proto_buf_append_char(out, ' ');
		proto_buf_append_str(out, res[i] > 0 ? "Yes" : "No");
	}
	proto_buf_append_char(out, '\n');
}

/* Run op on n keys of f and reply "Yes"/"No" per key, or the error. */
static void run_keys(struct cmd_ctx *c, struct cmd_session *s, enum cmd_key_op op,
		     struct bf_filter *f, size_t n, struct proto_buf *out)
{
	size_t done;
	enum cmd_status st = cmd_run_keys(c, s, f, op, n, &done);

	if (st == CMD_OK)
		append_yes_no(out, s->results, n);
	else
		reply(c, out, st);
}

/* check/set/delete NAME KEY: the key is every byte after the space that follows NAME. */
static void do_single(struct cmd_ctx *c, struct cmd_session *s, enum cmd_key_op op,
		      struct span args, struct proto_buf *out)
{
	struct span name, key;
	if (proto_text_rest(args.p, args.n, 1, &key.p, &key.n) || !next_word(&args, &name)) {
		client_error(c, out, CLIENT_ERR("Must provide filter name and key"));
		return;
	}
	struct bf_filter *f = lookup(c, name, out);
	if (!f)
		return;
	if (cmd_session_reserve(s, 1)) {
		reply(c, out, CMD_INTERNAL);
		return;
	}
	s->keys[0] = key.p;
	s->lens[0] = key.n;
	run_keys(c, s, op, f, 1, out);
}

/*
 * One call's share of multi/bulk over the n keys in args (struct cmd_slice): its keys, then
 * its reply line, or the error in its place. f: its filter, or NULL.
 */
static void multi_slice(struct cmd_ctx *c, struct cmd_session *s, enum cmd_key_op op,
			struct span args, struct bf_filter *f, size_t n, struct proto_buf *out)
{
	struct cmd_slice *sl = &s->slice;
	size_t from, to;

	if (!sl->answered) {
		/* The line may have moved since the last call: this share's keys only. */
		size_t end = sl->done + (n - sl->done < CMD_KEY_STEP ? n - sl->done : CMD_KEY_STEP);
		struct span key;

		for (size_t i = 0; i < end && next_word(&args, &key); i++) {
			if (i >= sl->done) {
				s->keys[i] = key.p;
				s->lens[i] = key.n;
			}
		}
		if (!cmd_slice_keys(c, s, f, op, n, s->keys, s->lens))
			return;
	}
	int part = sl->st == CMD_OK ? cmd_slice_replies(c, s, &from, &to) : 1;
	if (sl->st != CMD_OK || (part < 0 && from == 0))
		reply(c, out, sl->st != CMD_OK ? sl->st : CMD_LOG_FAILED);
	if (sl->st == CMD_OK && part >= 0) {
		for (size_t i = from; i < to; i++) {
			if (i)
				proto_buf_append_char(out, ' ');
			proto_buf_append_str(out, s->results[i] > 0 ? "Yes" : "No");
		}
		if (!part)
			return;
		proto_buf_append_char(out, '\n');
	}
	cmd_slice_end(s);
}

/* multi/bulk NAME K1 K2 ...: space-separated keys, one "Yes"/"No" each on one line. */
static void do_multi(struct cmd_ctx *c, struct cmd_session *s, enum cmd_key_op op, struct span args,
		     struct proto_buf *out)
{
	struct span name, key;
	if (!next_word(&args, &name)) {
		client_error(c, out, CLIENT_ERR("Must provide filter name and key"));
		return;
	}
	size_t n = 0;
	for (struct span rest = args; next_word(&rest, &key);)
		n++;
	/* Under way: its checks were made at its first call; a filter gone since is NULL. */
	if (s->slice.active) {
		multi_slice(c, s, op, args, cmd_lookup(c, name.p, name.n), n, out);
		return;
	}
	if (n == 0) {
		client_error(c, out, CLIENT_ERR("Must provide filter name and key"));
		return;
	}
	if (n > c->max_args) {
		client_error(c, out, CLIENT_ERR("Too many arguments"));
		return;
	}
	struct bf_filter *f = lookup(c, name, out);
	if (!f)
		return;
	/* Every key fits, or nothing is added (it runs in steps: check them all first). */
	for (struct span rest = args; next_word(&rest, &key);) {
		if (key.n > c->max_key_bytes) {
			reply(c, out, CMD_KEY_TOO_LONG);
			return;
		}
	}
	if (cmd_session_reserve(s, n)) {
		reply(c, out, CMD_INTERNAL);
		return;
	}
	multi_slice(c, s, op, args, f, n, out);
}

/* auth TOKEN: the token is every byte after the space that follows "auth". */
static void do_auth(struct cmd_ctx *c, struct cmd_session *s, struct span args,
		    struct proto_buf *out)
{
	if (!c->token) {
		client_error(c, out, CLIENT_ERR("Authentication is not configured"));
		return;
	}
	struct span token = {args.p, 0};
	if (args.n)
		proto_text_rest(args.p + 1, args.n - 1, 0, &token.p, &token.n);
	if (cmd_auth_check(c, s, token.p, token.n))
		proto_buf_append_str(out, "Done\n");
	else
		client_error(c, out, CLIENT_ERR("Invalid token"));
}

bool text_cmd_bloomd(const char *p, size_t n)
{
	static const char *const bloomd[] = {"c",     "check", "s",	"set",	  "m",
					     "multi", "b",     "bulk",	"create", "list",
					     "drop",  "clear", "close", "info",	  "flush"};
	struct span w = {p, n};

	for (size_t i = 0; i < sizeof(bloomd) / sizeof(bloomd[0]); i++)
		if (word_is(w, bloomd[i]))
			return true;
	return false;
}

bool text_cmd_known(const char *p, size_t n)
{
	static const char *const ours[] = {"d", "delete", "ping", "quit", "auth", "expires"};
	struct span w = {p, n};

	if (text_cmd_bloomd(p, n))
		return true;
	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (ext_is(w, ours[i]))
			return true;
	return false;
}

/*
 * Show the line that s ran to the monitors: its words as it sent them, each quoted as Redis
 * quotes an argument (the line is the words joined by single spaces, so what was sent can be
 * read back exactly), rather than a RESP command it resembles (text `set` is not Redis's SET).
 * An `auth` line's token shows as "(redacted)", as Redis shows AUTH's. Out of memory: not
 * shown.
 */
static void text_feed(struct cmd_ctx *c, const struct cmd_session *s, const char *line, size_t len,
		      bool secret)
{
	size_t n = 1, k = 0;
	const char **argv;
	size_t *lens;

	for (size_t i = 0; i < len; i++)
		n += line[i] == ' ';
	argv = malloc(n * sizeof(*argv));
	lens = malloc(n * sizeof(*lens));
	if (argv && lens) {
		const char *p = line, *end = line + len;

		while (k < n) {
			const char *sp = memchr(p, ' ', (size_t)(end - p));
			const char *stop = sp ? sp : end;

			bool hide = secret && k > 0;

			argv[k] = hide ? "(redacted)" : p;
			lens[k] = hide ? 10 : (size_t)(stop - p);
			k++;
			p = sp ? sp + 1 : end;
		}
		c->hooks.monitor_feed(c->hooks.arg, s, n, argv, lens);
	}
	free(argv);
	free(lens);
}

void text_cmd_exec(struct cmd_ctx *c, struct cmd_session *s, const char *line, size_t len,
		   struct proto_buf *out)
{
	/* The command is everything before the first space; the arguments everything after. */
	const char *sp = memchr(line, ' ', len);
	struct span cmd = {line, sp ? (size_t)(sp - line) : len};
	struct span args = {sp ? sp : line + len, sp ? len - cmd.n : 0};

	if (!cmd_session_authed(c, s) && !ext_is(cmd, "auth") && !ext_is(cmd, "ping") &&
	    !ext_is(cmd, "quit")) {
		c->commands++;
		c->peer_commands[CMD_PEER_TEXT]++;
		client_error(c, out, CLIENT_ERR("Authentication required"));
		return;
	}
	/* A replica takes changes from its primary only (doc/replication.md). */
	if (c->replica &&
	    (word_is(cmd, "s") || word_is(cmd, "set") || word_is(cmd, "b") ||
	     word_is(cmd, "bulk") || ext_is(cmd, "d") || ext_is(cmd, "delete") ||
	     word_is(cmd, "create") || word_is(cmd, "drop") || word_is(cmd, "clear") ||
	     word_is(cmd, "close") || ext_is(cmd, "expires"))) {
		c->commands++;
		c->peer_commands[CMD_PEER_TEXT]++;
		client_error(c, out, CLIENT_ERR("Read only replica"));
		return;
	}
	/* Commands on a filter's keys load a closed filter first (as bloomd pages it in); while
	 * it loads, the command runs again later. info, list, close, clear do not load it. */
	if (word_is(cmd, "c") || word_is(cmd, "check") || word_is(cmd, "s") ||
	    word_is(cmd, "set") || word_is(cmd, "m") || word_is(cmd, "multi") ||
	    word_is(cmd, "b") || word_is(cmd, "bulk") || ext_is(cmd, "d") ||
	    ext_is(cmd, "delete") || ext_is(cmd, "expires")) {
		struct span rest = args, name;

		if (next_word(&rest, &name)) {
			if (cmd_ready(c, name.p, name.n) != CMD_OK) {
				c->commands++;
				c->peer_commands[CMD_PEER_TEXT]++;
				reply(c, out, CMD_PAGED_OUT);
				return;
			}
			if (c->paging)
				return;
		}
	}
	c->commands++;
	c->peer_commands[CMD_PEER_TEXT]++;
	if (word_is(cmd, "c") || word_is(cmd, "check"))
		do_single(c, s, CMD_KEYS_CHECK, args, out);
	else if (word_is(cmd, "s") || word_is(cmd, "set"))
		do_single(c, s, CMD_KEYS_ADD, args, out);
	else if (word_is(cmd, "m") || word_is(cmd, "multi"))
		do_multi(c, s, CMD_KEYS_CHECK, args, out);
	else if (word_is(cmd, "b") || word_is(cmd, "bulk"))
		do_multi(c, s, CMD_KEYS_ADD, args, out);
	else if (ext_is(cmd, "d") || ext_is(cmd, "delete"))
		do_single(c, s, CMD_KEYS_DELETE, args, out);
	else if (word_is(cmd, "create"))
		do_create(c, args, out);
	else if (word_is(cmd, "list"))
		do_list(c, s, args, out);
	else if (word_is(cmd, "drop"))
		do_drop(c, args, out);
	else if (word_is(cmd, "clear"))
		do_clear(c, args, out);
	else if (word_is(cmd, "close"))
		do_close(c, args, out);
	else if (word_is(cmd, "info"))
		do_info(c, args, out);
	else if (word_is(cmd, "flush"))
		do_flush(c, s, args, out);
	else if (ext_is(cmd, "ping"))
		proto_buf_append_str(out, "PONG\n");
	else if (ext_is(cmd, "quit"))
		s->close_after = true;
	else if (ext_is(cmd, "auth"))
		do_auth(c, s, args, out);
	else if (ext_is(cmd, "expires"))
		do_expire(c, args, out);
	else {
		client_error(c, out, CLIENT_ERR("Command not supported"));
		return; /* not shown to MONITOR, as Redis does not show an unknown command */
	}
	if (c->monitors && c->hooks.monitor_feed && !c->paging && !c->write_wait && !c->again)
		text_feed(c, s, line, len, ext_is(cmd, "auth"));
}
