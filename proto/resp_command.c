/* SPDX-License-Identifier: MIT */
/*
 * RESP: COMMAND and its subcommands (COUNT, LIST [FILTERBY ...], INFO, DOCS, GETKEYS,
 * GETKEYSANDFLAGS, HELP) over the table of proto/resp_cmd_info.h, with Redis 7.0.15's reply
 * shapes (server.c: addReplyCommandInfo, addReplyCommandDocs, getKeysSubcommandImpl): the
 * Redis commands as a Redis 7.0 describes them, cut to the subcommands blossomd has; BF.* as
 * RedisBloom describes them (module "bf", ACL category @bloom) with blossomd's extensions
 * (BF.DEL; COUNTING). Key positions come from the key specifications, as Redis's
 * getKeysFromCommandWithSpecs finds them, so a cluster client finds every command's filter.
 * Order: the table's (Redis's is a hash table's), a container's subcommands after it in LIST.
 */
#include "proto/resp_cmd_impl.h"
#include "proto/glob.h"
#include "proto/resp_cmd_info.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------------------------------------------------------------------------------- */
/* Lookup */

static bool name_is(const char *name, const char *p, size_t n)
{
	return strlen(name) == n && strncasecmp(name, p, n) == 0;
}

static const struct resp_cmd_info *find_in(const struct resp_cmd_info *t, size_t nt, const char *p,
					   size_t n)
{
	for (size_t i = 0; i < nt; i++)
		if (name_is(t[i].name, p, n))
			return &t[i];
	return NULL;
}

/* A subcommand of e by its own name ("list" for "client|list"), or NULL. */
static const struct resp_cmd_info *find_sub(const struct resp_cmd_info *e, const char *p, size_t n)
{
	size_t base = strlen(e->name) + 1;

	for (size_t i = 0; i < e->nsubs; i++)
		if (name_is(e->subs[i].name + base, p, n))
			return &e->subs[i];
	return NULL;
}

bool resp_command_flagged(const struct proto_argv *av, const char *flag)
{
	const struct resp_cmd_info *e, *sub;
	size_t n = strlen(flag);
	const char *w;

	e = find_in(resp_cmd_infos, resp_cmd_ninfos, av->argv[0], av->argvlen[0]);
	if (!e)
		return false;
	if (e->nsubs && av->argc > 1 && (sub = find_sub(e, av->argv[1], av->argvlen[1])))
		e = sub;
	for (w = e->flags; (w = strstr(w, flag)); w += n)
		if ((w == e->flags || w[-1] == ' ') && (w[n] == ' ' || w[n] == '\0'))
			return true;
	return false;
}

/* Redis's lookupCommandBySds: "name", or "container|sub" (any case). */
static const struct resp_cmd_info *find_full(const char *p, size_t n)
{
	const char *bar = memchr(p, '|', n);
	const struct resp_cmd_info *e;

	if (!bar)
		return find_in(resp_cmd_infos, resp_cmd_ninfos, p, n);
	e = find_in(resp_cmd_infos, resp_cmd_ninfos, p, (size_t)(bar - p));
	return e ? find_sub(e, bar + 1, n - (size_t)(bar - p) - 1) : NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Replies */

static size_t nwords(const char *w)
{
	size_t n = 0;

	while (w && *w) {
		while (*w == ' ')
			w++;
		if (!*w)
			break;
		n++;
		while (*w && *w != ' ')
			w++;
	}
	return n;
}

/* The words of w as a set (RESP3) of simple strings, or of bulk strings if bulk. */
static void reply_words(struct proto_buf *out, int resp, const char *w, bool bulk)
{
	proto_resp_set(out, resp, nwords(w));
	while (w && *w) {
		const char *start;

		while (*w == ' ')
			w++;
		start = w;
		while (*w && *w != ' ')
			w++;
		if (w == start)
			break;
		if (bulk)
			proto_resp_bulk(out, start, (size_t)(w - start));
		else
			proto_resp_simple(out, start, (size_t)(w - start));
	}
}

/* The words of names (space separated) whose bits are set in bits, as a set. */
static void reply_bits(struct proto_buf *out, int resp, const char *names, unsigned bits)
{
	char buf[128];
	size_t len = 0;
	unsigned k = 0;

	for (const char *w = names; *w; k++) {
		const char *start = w;

		while (*w && *w != ' ')
			w++;
		if (bits & (1u << k)) {
			memcpy(buf + len, start, (size_t)(w - start));
			len += (size_t)(w - start);
			buf[len++] = ' ';
		}
		while (*w == ' ')
			w++;
	}
	buf[len] = '\0';
	reply_words(out, resp, buf, false);
}

static void reply_pair_int(struct proto_buf *out, const char *key, long long v)
{
	proto_resp_bulk_str(out, key);
	proto_resp_integer(out, v);
}

static void reply_keyspec(struct proto_buf *out, int resp, const struct resp_cmd_keyspec *k)
{
	static const char *const fk_names[3][3] = {{"lastkey", "keystep", "limit"},
						   {"keynumidx", "firstkey", "keystep"}};
	int fk = k->fk_type == 'r' ? 0 : k->fk_type == 'n' ? 1 : 2;

	proto_resp_map(out, resp, k->notes ? 4 : 3);
	if (k->notes) {
		proto_resp_bulk_str(out, "notes");
		proto_resp_bulk_str(out, k->notes);
	}
	proto_resp_bulk_str(out, "flags");
	reply_bits(out, resp, RESP_KS_FLAGS, k->flags);
	proto_resp_bulk_str(out, "begin_search");
	proto_resp_map(out, resp, 2);
	proto_resp_bulk_str(out, "type");
	proto_resp_bulk_str(out, k->bs_type == 'i'   ? "index"
				 : k->bs_type == 'k' ? "keyword"
						     : "unknown");
	proto_resp_bulk_str(out, "spec");
	if (k->bs_type == 'i') {
		proto_resp_map(out, resp, 1);
		reply_pair_int(out, "index", k->bs);
	} else if (k->bs_type == 'k') {
		proto_resp_map(out, resp, 2);
		proto_resp_bulk_str(out, "keyword");
		proto_resp_bulk_str(out, k->keyword);
		reply_pair_int(out, "startfrom", k->bs);
	} else {
		proto_resp_map(out, resp, 0);
	}
	proto_resp_bulk_str(out, "find_keys");
	proto_resp_map(out, resp, 2);
	proto_resp_bulk_str(out, "type");
	proto_resp_bulk_str(out, fk == 0 ? "range" : fk == 1 ? "keynum" : "unknown");
	proto_resp_bulk_str(out, "spec");
	proto_resp_map(out, resp, fk == 2 ? 0 : 3);
	for (int i = 0; fk < 2 && i < 3; i++)
		reply_pair_int(out, fk_names[fk][i], k->fk[i]);
}

/* One entry of COMMAND / COMMAND INFO: Redis 7.0's ten fields; e NULL: a null. */
static void reply_info(struct proto_buf *out, int resp, const struct resp_cmd_info *e)
{
	if (!e) {
		proto_resp_null(out, resp);
		return;
	}
	proto_resp_array(out, 10);
	proto_resp_bulk_str(out, e->name);
	proto_resp_integer(out, e->arity);
	reply_words(out, resp, e->flags, false);
	proto_resp_integer(out, e->first);
	proto_resp_integer(out, e->last);
	proto_resp_integer(out, e->step);
	reply_words(out, resp, e->acl, false);
	reply_words(out, resp, e->tips, true);
	proto_resp_set(out, resp, e->nspecs);
	for (size_t i = 0; i < e->nspecs; i++)
		reply_keyspec(out, resp, &e->specs[i]);
	/* Redis: an empty set without subcommands, else an array. */
	if (e->nsubs)
		proto_resp_array(out, e->nsubs);
	else
		proto_resp_set(out, resp, 0);
	for (size_t i = 0; i < e->nsubs; i++)
		reply_info(out, resp, &e->subs[i]);
}

static void reply_pair_str(struct proto_buf *out, const char *key, const char *v)
{
	if (!v)
		return;
	proto_resp_bulk_str(out, key);
	proto_resp_bulk_str(out, v);
}

static void reply_args(struct proto_buf *out, int resp, const struct resp_cmd_arg *a, size_t n)
{
	proto_resp_array(out, n);
	for (size_t i = 0; i < n; i++, a++) {
		size_t len = 2 + (a->key_spec_index >= 0) + !!a->token + !!a->summary + !!a->since +
			     !!a->deprecated_since + !!a->flags + (a->nargs > 0);

		proto_resp_map(out, resp, len);
		reply_pair_str(out, "name", a->name);
		reply_pair_str(out, "type", a->type);
		if (a->key_spec_index >= 0)
			reply_pair_int(out, "key_spec_index", a->key_spec_index);
		reply_pair_str(out, "token", a->token);
		reply_pair_str(out, "summary", a->summary);
		reply_pair_str(out, "since", a->since);
		reply_pair_str(out, "deprecated_since", a->deprecated_since);
		if (a->flags) {
			proto_resp_bulk_str(out, "flags");
			reply_bits(out, resp, RESP_ARG_FLAGS, a->flags);
		}
		if (a->nargs) {
			proto_resp_bulk_str(out, "arguments");
			reply_args(out, resp, a->args, a->nargs);
		}
	}
}

/* One command's COMMAND DOCS map, as Redis 7.0's addReplyCommandDocs. */
static void reply_docs(struct proto_buf *out, int resp, const struct resp_cmd_info *e)
{
	size_t len = 1 + !!e->summary + !!e->since + !!e->module + !!e->complexity +
		     !!e->doc_flags + !!e->deprecated_since + !!e->replaced_by + !!e->nhistory +
		     !!e->nargs + !!e->nsubs;

	proto_resp_map(out, resp, len);
	reply_pair_str(out, "summary", e->summary);
	reply_pair_str(out, "since", e->since);
	reply_pair_str(out, "group", e->group);
	reply_pair_str(out, "complexity", e->complexity);
	reply_pair_str(out, "module", e->module);
	if (e->doc_flags) {
		proto_resp_bulk_str(out, "doc_flags");
		reply_words(out, resp, e->doc_flags, false);
	}
	reply_pair_str(out, "deprecated_since", e->deprecated_since);
	reply_pair_str(out, "replaced_by", e->replaced_by);
	if (e->nhistory) {
		proto_resp_bulk_str(out, "history");
		proto_resp_set(out, resp, e->nhistory);
		for (size_t i = 0; i < e->nhistory; i++) {
			proto_resp_array(out, 2);
			proto_resp_bulk_str(out, e->history[i].since);
			proto_resp_bulk_str(out, e->history[i].changes);
		}
	}
	if (e->nargs) {
		proto_resp_bulk_str(out, "arguments");
		reply_args(out, resp, e->args, e->nargs);
	}
	if (e->nsubs) {
		proto_resp_bulk_str(out, "subcommands");
		proto_resp_map(out, resp, e->nsubs);
		for (size_t i = 0; i < e->nsubs; i++) {
			proto_resp_bulk_str(out, e->subs[i].name);
			reply_docs(out, resp, &e->subs[i]);
		}
	}
}

/* ---------------------------------------------------------------------------------------- */
/* GETKEYS */

/*
 * The positions of av's keys (av[from] is the command's name) by e's key specs, as Redis's
 * getKeysUsingKeySpecs: into pos[] and their spec's flags into flags[] (room for av->argc);
 * returns how many.
 */
static size_t keys_of(const struct resp_cmd_info *e, const struct proto_argv *av, size_t from,
		      size_t *pos, unsigned *flags)
{
	long argc = (long)(av->argc - from);
	size_t n = 0;

	for (size_t s = 0; s < e->nspecs; s++) {
		const struct resp_cmd_keyspec *k = &e->specs[s];
		long first = k->bs, last, step;

		if (k->bs_type != 'i' || k->fk_type != 'r')
			continue; /* none of blossomd's commands has another kind */
		step = k->fk[1];
		if (k->fk[0] >= 0)
			last = first + k->fk[0];
		else if (!k->fk[2])
			last = argc + k->fk[0];
		else
			last = first + ((argc - first) / k->fk[2] + k->fk[0]);
		for (long i = first; i <= last && step > 0; i += step) {
			if (i >= argc)
				break; /* the command itself reports the arity error */
			pos[n] = from + (size_t)i;
			flags[n++] = k->flags;
		}
	}
	return n;
}

/* COMMAND GETKEYS / GETKEYSANDFLAGS cmd arg...: Redis 7.0's getKeysSubcommandImpl. */
static void getkeys(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		    struct proto_buf *out, bool with_flags)
{
	const struct resp_cmd_info *e =
	    find_in(resp_cmd_infos, resp_cmd_ninfos, av->argv[2], av->argvlen[2]);
	long argc = (long)av->argc - 2;
	size_t *pos, n;
	unsigned *flags;

	if (e && e->nsubs && argc > 1)
		e = find_sub(e, av->argv[3], av->argvlen[3]);
	if (!e) {
		resp_error(c, out, "ERR Invalid command specified");
		return;
	}
	if (!e->nspecs) {
		resp_error(c, out, "ERR The command has no key arguments");
		return;
	}
	if ((e->arity > 0 && e->arity != argc) || argc < -e->arity) {
		resp_error(c, out, "ERR Invalid number of arguments specified for command");
		return;
	}
	pos = malloc(av->argc * sizeof(*pos));
	flags = malloc(av->argc * sizeof(*flags));
	if (!pos || !flags) {
		resp_error(c, out, resp_err_oom);
		goto out;
	}
	n = keys_of(e, av, 2, pos, flags);
	proto_resp_array(out, n);
	for (size_t i = 0; i < n; i++) {
		if (with_flags)
			proto_resp_array(out, 2);
		proto_resp_bulk(out, av->argv[pos[i]], av->argvlen[pos[i]]);
		if (with_flags)
			reply_bits(out, s->resp, RESP_KS_FLAGS, flags[i]);
	}
out:
	free(pos);
	free(flags);
}

/* ---------------------------------------------------------------------------------------- */
/* LIST */

/* Whether e passes COMMAND LIST's filter: kind 'm' module, 'a' ACL category, 'p' pattern. */
static bool list_match(const struct resp_cmd_info *e, char kind, const char *arg, size_t len,
		       const struct glob *g)
{
	if (kind == 'm')
		return e->module && name_is(e->module, arg, len);
	if (kind == 'p')
		return glob_match(g, e->name, strlen(e->name));
	for (const char *w = e->acl; w && *w;) {
		const char *start = w + (*w == '@');
		while (*w && *w != ' ')
			w++;
		if ((size_t)(w - start) == len && strncasecmp(start, arg, len) == 0)
			return true;
		while (*w == ' ')
			w++;
	}
	return false;
}

/* Append to names the matching names of t (and of their subcommands): how many. */
static size_t list_add(struct proto_buf *names, const struct resp_cmd_info *t, size_t nt, char kind,
		       const char *arg, size_t len, const struct glob *g)
{
	size_t n = 0;

	for (size_t i = 0; i < nt; i++) {
		if (!kind || list_match(&t[i], kind, arg, len, g)) {
			proto_resp_bulk_str(names, t[i].name);
			n++;
		}
		n += list_add(names, t[i].subs, t[i].nsubs, kind, arg, len, g);
	}
	return n;
}

/* COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]. */
static void command_list(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out)
{
	struct proto_buf names = {0};
	struct glob *g = NULL;
	char kind = 0;
	size_t n;

	if (av->argc != 2 && (av->argc != 5 || !resp_arg_is(av, 2, "filterby"))) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	if (av->argc == 5) {
		kind = resp_arg_is(av, 3, "module")    ? 'm'
		       : resp_arg_is(av, 3, "aclcat")  ? 'a'
		       : resp_arg_is(av, 3, "pattern") ? 'p'
						       : 0;
		if (!kind) {
			resp_error(c, out, resp_err_syntax);
			return;
		}
		if (kind == 'p' && glob_compile(av->argv[4], av->argvlen[4], true, &g)) {
			resp_error(c, out, resp_err_pattern_long);
			return;
		}
	}
	n = list_add(&names, resp_cmd_infos, resp_cmd_ninfos, kind, kind ? av->argv[4] : NULL,
		     kind ? av->argvlen[4] : 0, g);
	glob_free(g);
	if (names.failed) {
		resp_error(c, out, resp_err_oom);
	} else {
		proto_resp_array(out, n);
		proto_buf_append(out, names.data, names.len);
	}
	proto_buf_free(&names);
}

/* ---------------------------------------------------------------------------------------- */
/* COMMAND */

static const char *const command_help[] = {
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Prints this help.",
    NULL,
};

/* COMMAND INFO / DOCS name...: the named ones (INFO: a null for one unknown; DOCS: left out),
 * or all of them. */
static void command_info_docs(struct proto_buf *out, int resp, const struct proto_argv *av,
			      bool docs)
{
	const struct resp_cmd_info *e;
	size_t n = 0;

	if (av->argc <= 2) { /* COMMAND, COMMAND INFO, COMMAND DOCS: all */
		if (docs)
			proto_resp_map(out, resp, resp_cmd_ninfos);
		else
			proto_resp_array(out, resp_cmd_ninfos);
		for (size_t i = 0; i < resp_cmd_ninfos; i++) {
			if (docs)
				proto_resp_bulk_str(out, resp_cmd_infos[i].name);
			(docs ? reply_docs : reply_info)(out, resp, &resp_cmd_infos[i]);
		}
		return;
	}
	if (!docs) {
		proto_resp_array(out, av->argc - 2);
		for (size_t i = 2; i < av->argc; i++)
			reply_info(out, resp, find_full(av->argv[i], av->argvlen[i]));
		return;
	}
	for (size_t i = 2; i < av->argc; i++)
		n += find_full(av->argv[i], av->argvlen[i]) != NULL;
	proto_resp_map(out, resp, n);
	for (size_t i = 2; i < av->argc; i++) {
		e = find_full(av->argv[i], av->argvlen[i]);
		if (!e)
			continue;
		proto_resp_bulk_str(out, e->name);
		reply_docs(out, resp, e);
	}
}

void resp_command(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		  struct proto_buf *out)
{
	const struct resp_cmd_info *sub;
	long argc = (long)av->argc;

	if (av->argc == 1) {
		command_info_docs(out, s->resp, av, false);
		return;
	}
	sub = find_sub(find_in(resp_cmd_infos, resp_cmd_ninfos, "command", 7), av->argv[1],
		       av->argvlen[1]);
	if (!sub) {
		resp_error_unknown_sub(c, av, out, "COMMAND");
		return;
	}
	if ((sub->arity > 0 && sub->arity != argc) || argc < -sub->arity) {
		resp_error_arity(c, out, sub->name);
		return;
	}
	if (resp_arg_is(av, 1, "count"))
		proto_resp_integer(out, resp_cmd_ninfos);
	else if (resp_arg_is(av, 1, "list"))
		command_list(c, av, out);
	else if (resp_arg_is(av, 1, "info") || resp_arg_is(av, 1, "docs"))
		command_info_docs(out, s->resp, av, resp_arg_is(av, 1, "docs"));
	else if (resp_arg_is(av, 1, "getkeys") || resp_arg_is(av, 1, "getkeysandflags"))
		getkeys(c, s, av, out, resp_arg_is(av, 1, "getkeysandflags"));
	else
		resp_reply_help(out, command_help);
}
