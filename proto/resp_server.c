/* SPDX-License-Identifier: MIT */
/*
 * RESP: what Redis clients send besides BF.*: connection basics (PING, ECHO, QUIT, AUTH, HELLO,
 * SELECT, CLIENT), the keyspace seen as filters (DBSIZE, EXISTS, DEL, TYPE, KEYS, SCAN) and the
 * server (SAVE, BGSAVE, LASTSAVE, INFO, CONFIG GET), with Redis 7.0.15's replies.
 */
#include "proto/resp_cmd_impl.h"
#include "proto/client.h"
#include "proto/glob.h"
#include "proto/pubsub.h"

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
/* Connection basics */

void resp_server_ping(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	(void)c;
	if (s->resp == 2 && pubsub_session_count(s, false) + pubsub_session_count(s, true)) {
		/* A RESP2 subscriber's PING: a message-like array, as Redis answers it. */
		proto_resp_array(out, 2);
		proto_resp_bulk(out, "pong", 4);
		proto_resp_bulk(out, av->argc == 2 ? av->argv[1] : "",
				av->argc == 2 ? av->argvlen[1] : 0);
	} else if (av->argc == 2)
		proto_resp_bulk(out, av->argv[1], av->argvlen[1]);
	else
		proto_resp_simple(out, "PONG", 4);
}

void resp_server_echo(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	(void)c;
	(void)s;
	proto_resp_bulk(out, av->argv[1], av->argvlen[1]);
}

void resp_server_quit(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
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

void resp_server_auth(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	if (av->argc > 3) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	if (av->argc == 2 && !c->token) {
		resp_error(c, out,
			   "ERR AUTH <password> called without any password configured for "
			   "the default user. Are you sure your configuration is correct?");
		return;
	}
	if (!auth_ok(c, s, av, av->argc == 3 ? 1 : 0, av->argc - 1)) {
		resp_error(c, out, err_wrongpass);
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

void resp_server_hello(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	long long ver = 0;
	size_t i = 1, name = 0, user = 0;

	if (av->argc >= 2) {
		if (!resp_arg_ll(av, 1, &ver)) {
			resp_error(c, out,
				   "ERR Protocol version is not an integer or out of range");
			return;
		}
		if (ver < 2 || ver > 3) {
			resp_error(c, out, "-NOPROTO unsupported protocol version");
			return;
		}
		i = 2;
	}
	for (; i < av->argc; i++) {
		size_t more = av->argc - 1 - i;
		if (resp_arg_is(av, i, "auth") && more >= 2) {
			user = i + 1;
			i += 2;
		} else if (resp_arg_is(av, i, "setname") && more >= 1) {
			const char *err =
			    client_name_error(av->argv[i + 1], av->argvlen[i + 1], sizeof(s->name));
			if (err) {
				resp_error(c, out, err);
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
		resp_error(c, out, err_wrongpass);
		return;
	}
	if (!cmd_session_authed(c, s)) {
		resp_error(c, out,
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
	resp_admin_module_list(out, s->resp);
}

void resp_server_select(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	long long db;
	(void)s;

	if (!resp_arg_ll(av, 1, &db)) {
		resp_error(c, out, resp_err_not_int);
		return;
	}
	if (db != 0) {
		resp_error(c, out, "ERR DB index is out of range");
		return;
	}
	proto_resp_ok(out);
}

/*
 * CLIENT LIST / INFO / KILL, with Redis 7.0's replies and errors (networking.c, clientCommand),
 * over the server's client hooks (command.h; the facts: proto/client.h). Without them (no
 * server, as in the unit tests) the asking session is the only client known, shown as Redis
 * shows a client without a socket: addr=?:0 laddr=?:0 fd=-1 events= and zero sizes.
 */

/*
 * A connection's line, Redis 7.0's catClientInfoString fields in its order, "\n" ended, with
 * Redis 7.4's watch= after multi= (the names the connection WATCHes). What blossomd has no
 * counterpart of is what Redis shows for a plain client: db=0 ssub=0 user=default (the only
 * user) redir=-1; oll=0 (one reply buffer, no list of them). flags are Redis's letters in its
 * order: O (MONITOR), P (a subscription), x in MULTI, d once a WATCHed filter changed, c for one
 * that closes once its replies are written, else N. multi= is -1 outside MULTI, else the
 * commands queued; multi-mem the bytes of their arguments.
 */
static void client_line(struct proto_buf *b, const struct cmd_client *cl)
{
	char events[3], *e = events, flags[6], *f = flags;

	if (cl->monitor)
		*f++ = 'O';
	if (cl->sub || cl->psub)
		*f++ = 'P';
	if (cl->multi >= 0)
		*f++ = 'x';
	if (cl->dirty)
		*f++ = 'd';
	if (cl->closing)
		*f++ = 'c';
	if (f == flags)
		*f++ = 'N';
	*f = '\0';
	if (cl->reading)
		*e++ = 'r';
	if (cl->writing)
		*e++ = 'w';
	*e = '\0';
	proto_buf_append_fmt(
	    b,
	    "id=%" PRIu64 " addr=%s laddr=%s fd=%d name=%s age=%" PRIu64 " idle=%" PRIu64
	    " flags=%s db=0 sub=%" PRIu64 " psub=%" PRIu64 " ssub=0 multi=%lld watch=%" PRIu64
	    " qbuf=%" PRIu64 " qbuf-free=%" PRIu64 " argv-mem=%" PRIu64 " multi-mem=%" PRIu64
	    " rbs=%" PRIu64 " rbp=%" PRIu64 " obl=%" PRIu64 " oll=0 omem=%" PRIu64
	    " tot-mem=%" PRIu64 " events=%s cmd=%s user=default redir=-1 resp=%d\n",
	    cl->id, cl->addr, cl->laddr, cl->fd, cl->name, cl->age, cl->idle, flags, cl->sub,
	    cl->psub, cl->multi, cl->watch, cl->qbuf, cl->qbuf_free, cl->argv_mem, cl->multi_mem,
	    cl->rbs, cl->rbp, cl->obl, cl->omem, cl->tot_mem, events, cl->cmd ? cl->cmd : "NULL",
	    cl->resp);
}

/* Redis's client type of cl (getClientType): 2 pubsub (a subscription), else 1 normal (a
 * MONITOR client too). */
static int client_type_of(const struct cmd_client *cl)
{
	return cl->sub || cl->psub ? 2 : 1;
}

/* CLIENT LIST's lines being built, of clients of one type (0: any). */
struct client_lines {
	struct proto_buf *b;
	int type;
};

/* client_each()'s callback for CLIENT LIST. */
static void client_line_add(void *arg, const struct cmd_client *cl)
{
	struct client_lines *l = arg;

	if (!l->type || client_type_of(cl) == l->type)
		client_line(l->b, cl);
}

/* The facts of client id into *buf (buf, or NULL if there is none); the asking session's own
 * when there is no server to ask. */
static const struct cmd_client *client_get(struct cmd_ctx *c, const struct cmd_session *s,
					   uint64_t id, struct cmd_client *buf)
{
	const struct cmd_client *cl;

	if (c->hooks.client_get) {
		cl = c->hooks.client_get(c->hooks.arg, s->id, id, buf);
		if (cl || id != s->id)
			return cl;
	}
	if (id != s->id)
		return NULL;
	*buf = (struct cmd_client){
	    .id = s->id,
	    .self = true,
	    .addr = "?:0",
	    .laddr = "?:0",
	    .fd = -1,
	    .name = s->name,
	    .resp = s->resp,
	    .cmd = s->last_cmd,
	    .closing = s->close_after,
	    .sub = pubsub_session_count(s, false),
	    .psub = pubsub_session_count(s, true),
	    .monitor = s->monitor,
	};
	cmd_multi_client(s, buf);
	return buf;
}

/* Redis's client type names (getClientTypeByName): 1 "normal", 2 "pubsub" (client_type_of);
 * 0 for one no connection has (master, slave, replica); -1 for none of them, after replying
 * Redis's error. */
static int client_type(struct cmd_ctx *c, const struct proto_argv *av, size_t i,
		       struct proto_buf *out)
{
	if (resp_arg_is(av, i, "normal"))
		return 1;
	if (resp_arg_is(av, i, "pubsub"))
		return 2;
	if (resp_arg_is(av, i, "master") || resp_arg_is(av, i, "slave") ||
	    resp_arg_is(av, i, "replica"))
		return 0;
	c->errors++;
	proto_resp_error_fmt(out, "Unknown client type '%.*s'",
			     (int)strnlen(av->argv[i], av->argvlen[i]), av->argv[i]);
	return -1;
}

/* The text b as CLIENT LIST / INFO send it: a verbatim "txt" string (RESP2: a bulk string). */
static void client_reply_text(struct cmd_ctx *c, struct cmd_session *s, struct proto_buf *b,
			      struct proto_buf *out)
{
	if (b->failed)
		resp_error(c, out, resp_err_oom);
	else
		proto_resp_verbatim(out, s->resp, "txt", b->data ? b->data : "", b->len);
	proto_buf_free(b);
}

/* CLIENT LIST [TYPE type | ID id [id ...]]: every connection oldest first, or those of the
 * ids in the order given (an id twice, its line twice; an id of none, nothing), as Redis. */
static void client_list(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	bool by_id = av->argc > 3 && resp_arg_is(av, 2, "id");
	struct cmd_client buf;
	struct proto_buf b;
	struct client_lines l = {&b, 0};
	long long id;
	int type = 1;

	if (av->argc == 4 && resp_arg_is(av, 2, "type")) {
		type = client_type(c, av, 3, out);
		if (type < 0)
			return;
	} else if (by_id) {
		for (size_t i = 3; i < av->argc; i++) {
			if (!resp_arg_ll(av, i, &id)) {
				resp_error(c, out, "ERR Invalid client ID");
				return;
			}
		}
	} else if (av->argc != 2) {
		resp_error(c, out, resp_err_syntax);
		return;
	}

	proto_buf_init(&b);
	if (by_id) {
		for (size_t i = 3; i < av->argc; i++) {
			const struct cmd_client *cl;

			resp_arg_ll(av, i, &id);
			cl = client_get(c, s, (uint64_t)id, &buf);
			if (cl)
				client_line(&b, cl);
		}
	} else if (type && c->hooks.client_each) {
		l.type = av->argc == 4 ? type : 0;
		c->hooks.client_each(c->hooks.arg, s->id, client_line_add, &l);
	} else if (type) {
		l.type = av->argc == 4 ? type : 0;
		client_line_add(&l, client_get(c, s, s->id, &buf));
	}
	client_reply_text(c, s, &b, out);
}

/* CLIENT KILL's filters; a NULL string or a 0 id matches any. */
struct client_kill {
	const char *addr, *laddr; /* addrlen, laddrlen bytes */
	size_t addrlen, laddrlen;
	uint64_t id;
	int type;      /* TYPE: client_type_of's; 0 any */
	bool none;     /* a TYPE no connection has */
	bool skipme;   /* leave the asking connection out */
	bool self_hit; /* the asking connection matched, and is not left out */
};

/* Redis compares the argument as a C string, so up to its first NUL. */
static const char *client_kill_str(const struct proto_argv *av, size_t i, size_t *len)
{
	*len = strnlen(av->argv[i], av->argvlen[i]);
	return av->argv[i];
}

static bool client_str_is(const char *s, const char *p, size_t n)
{
	return strlen(s) == n && memcmp(s, p, n) == 0;
}

/* client_kill()'s match: whether cl is to be closed (the asking connection is recorded in
 * self_hit instead, its close being ours). */
static bool client_kill_match(void *arg, const struct cmd_client *cl)
{
	struct client_kill *k = arg;

	if (k->none || (k->type && client_type_of(cl) != k->type) ||
	    (k->addr && !client_str_is(cl->addr, k->addr, k->addrlen)) ||
	    (k->laddr && !client_str_is(cl->laddr, k->laddr, k->laddrlen)) ||
	    (k->id && cl->id != k->id))
		return false;
	if (cl->self) {
		k->self_hit = k->self_hit || !k->skipme;
		return false;
	}
	return true;
}

/*
 * CLIENT KILL ip:port (+OK, or "No such client"; may be the asking connection) or CLIENT KILL
 * <filter> <value> ... (the number closed; SKIPME yes by default), Redis's options and errors
 * in Redis's order of checks. The asking connection, if it is one, closes once this reply is
 * written, as Redis's CLIENT_CLOSE_AFTER_REPLY.
 */
static void client_kill(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	struct client_kill k = {.skipme = true};
	struct cmd_client buf;
	size_t killed = 0;

	if (av->argc == 3) {
		k.addr = client_kill_str(av, 2, &k.addrlen);
		k.skipme = false;
	}
	for (size_t i = 2; av->argc > 3 && i < av->argc; i += 2) {
		bool more = av->argc > i + 1;
		long long id;
		int type;

		if (more && resp_arg_is(av, i, "id")) {
			if (!resp_arg_ll(av, i + 1, &id) || id < 1) {
				resp_error(c, out, "ERR client-id should be greater than 0");
				return;
			}
			k.id = (uint64_t)id;
		} else if (more && resp_arg_is(av, i, "type")) {
			type = client_type(c, av, i + 1, out);
			if (type < 0)
				return;
			k.none = type == 0;
			k.type = type;
		} else if (more && resp_arg_is(av, i, "addr")) {
			k.addr = client_kill_str(av, i + 1, &k.addrlen);
		} else if (more && resp_arg_is(av, i, "laddr")) {
			k.laddr = client_kill_str(av, i + 1, &k.laddrlen);
		} else if (more && resp_arg_is(av, i, "user")) {
			/* Redis looks the user up by its exact bytes; "default" is the only one. */
			if (av->argvlen[i + 1] != 7 || memcmp(av->argv[i + 1], "default", 7) != 0) {
				c->errors++;
				proto_resp_error_fmt(
				    out, "No such user '%.*s'",
				    (int)strnlen(av->argv[i + 1], av->argvlen[i + 1]),
				    av->argv[i + 1]);
				return;
			}
		} else if (more && resp_arg_is(av, i, "skipme") &&
			   (resp_arg_is(av, i + 1, "yes") || resp_arg_is(av, i + 1, "no"))) {
			k.skipme = resp_arg_is(av, i + 1, "yes");
		} else {
			resp_error(c, out, resp_err_syntax);
			return;
		}
	}

	if (c->hooks.client_kill)
		killed = c->hooks.client_kill(c->hooks.arg, s->id, client_kill_match, &k);
	else
		client_kill_match(&k, client_get(c, s, s->id, &buf));
	if (k.self_hit)
		killed++;
	if (av->argc > 3)
		proto_resp_integer(out, (int64_t)killed);
	else if (killed)
		proto_resp_ok(out);
	else
		resp_error(c, out, "ERR No such client");
	if (k.self_hit)
		s->close_after = true;
}

/* CLIENT HELP, as Redis words it for the subcommands we have. */
static const char *const client_help[] = {
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR <ip:port>",
    "      Kill connections made from the specified address",
    "    * LADDR <ip:port>",
    "      Kill connections made to specified local address",
    "    * ID <client-id>",
    "      Kill the connection with the specified ID.",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of the specified IDs.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Accepted and ignored.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Prints this help.",
    NULL,
};
/* CLIENT LIST's cmd= as Redis's command table names them; NULL for a subcommand not
 * known (Redis's lookup fails then, and its lastcmd is NULL). */
static const char *const client_names[] = {
    "client|getname", "client|help", "client|id",      "client|info",
    "client|kill",    "client|list", "client|setinfo", "client|setname",
};

/* CLIENT SETNAME <name>: +OK, or the error client_name_error() gives the name. */
static void client_setname(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			   struct proto_buf *out)
{
	const char *err;

	if (av->argc != 3) {
		resp_error_arity(c, out, "client|setname");
		return;
	}
	err = client_name_error(av->argv[2], av->argvlen[2], sizeof(s->name));
	if (err) {
		resp_error(c, out, err);
		return;
	}
	set_client_name(s, av->argv[2], av->argvlen[2]);
	proto_resp_ok(out);
}

/* CLIENT SETINFO LIB-NAME|LIB-VER <value>: accepted and ignored (+OK); Redis's error for any
 * other attribute. */
static void client_setinfo(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out)
{
	size_t n;

	if (av->argc != 4) {
		resp_error_arity(c, out, "client|setinfo");
		return;
	}
	if (!resp_arg_is(av, 2, "lib-name") && !resp_arg_is(av, 2, "lib-ver")) {
		c->errors++;
		n = strnlen(av->argv[2], av->argvlen[2]);
		proto_resp_error_fmt(out, "Unrecognized option '%.*s'", (int)(n > 128 ? 128 : n),
				     av->argv[2]);
		return;
	}
	proto_resp_ok(out);
}

void resp_server_client(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	struct cmd_client buf;
	struct proto_buf b;

	s->last_cmd = NULL;
	for (size_t i = 0; i < sizeof(client_names) / sizeof(client_names[0]); i++)
		if (resp_arg_is(av, 1, client_names[i] + strlen("client|")))
			s->last_cmd = client_names[i];

	if (resp_arg_is(av, 1, "setname")) {
		client_setname(c, s, av, out);
	} else if (resp_arg_is(av, 1, "getname")) {
		if (av->argc != 2) {
			resp_error_arity(c, out, "client|getname");
			return;
		}
		if (s->name[0])
			proto_resp_bulk_str(out, s->name);
		else
			proto_resp_null(out, s->resp);
	} else if (resp_arg_is(av, 1, "id")) {
		if (av->argc != 2) {
			resp_error_arity(c, out, "client|id");
			return;
		}
		proto_resp_integer(out, (int64_t)s->id);
	} else if (resp_arg_is(av, 1, "list")) {
		client_list(c, s, av, out);
	} else if (resp_arg_is(av, 1, "info")) {
		if (av->argc != 2) {
			resp_error_arity(c, out, "client|info");
			return;
		}
		proto_buf_init(&b);
		client_line(&b, client_get(c, s, s->id, &buf));
		client_reply_text(c, s, &b, out);
	} else if (resp_arg_is(av, 1, "kill")) {
		if (av->argc < 3) {
			resp_error_arity(c, out, "client|kill");
			return;
		}
		client_kill(c, s, av, out);
	} else if (resp_arg_is(av, 1, "setinfo")) {
		client_setinfo(c, av, out);
	} else if (resp_arg_is(av, 1, "help") && av->argc == 2) {
		resp_reply_help(out, client_help);
	} else {
		resp_error_unknown_sub(c, av, out, "CLIENT");
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Keyspace: filters seen as Redis keys */

void resp_server_dbsize(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	(void)s;
	(void)av;
	proto_resp_integer(out, (int64_t)bf_registry_count(c->reg));
}

void resp_server_exists(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	int64_t n = 0;
	(void)s;

	for (size_t i = 1; i < av->argc; i++)
		n += resp_arg_filter(c, av, i) != NULL;
	proto_resp_integer(out, n);
}

void resp_server_del(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		     struct proto_buf *out)
{
	int64_t n = 0;
	(void)s;

	for (size_t i = 1; i < av->argc; i++)
		n += cmd_drop(c, av->argv[i], av->argvlen[i], true) == CMD_OK;
	proto_resp_integer(out, n);
}

void resp_server_type(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	(void)s;
	if (resp_arg_filter(c, av, 1))
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
		resp_error(c, out, rc == -E2BIG ? resp_err_pattern_long : resp_err_oom);
		return NULL;
	}
	return g;
}

struct keys_acc {
	const struct glob *g;
	uint64_t now;
	struct proto_buf *names;
	size_t count;
	const struct bf_filter *last; /* the last filter looked at */
};

static void keys_one(void *arg, struct bf_filter *f)
{
	struct keys_acc *a = arg;

	a->last = f;
	if (!cmd_expired(f, a->now) && glob_match(a->g, bf_filter_name(f), f->name_len)) {
		proto_resp_bulk(a->names, bf_filter_name(f), f->name_len);
		a->count++;
	}
}

/*
 * Reply the names matching g as an array, in name order. Only names that start with the
 * pattern's literal head (up to its first "*", "?", "[" or backslash) can match: the name index
 * gives just those. A long listing looks at CMD_LIST_STEP filters per call (cmd_ctx.again), the
 * names found kept in the session until the last call replies them all.
 */
static void reply_names(struct cmd_ctx *c, struct cmd_session *s, struct proto_buf *out,
			const struct glob *g, const char *pat, size_t patlen)
{
	struct cmd_listing *l = s->listing;
	struct proto_buf local;
	size_t head = 0;

	if (l && l->sent != SIZE_MAX) {
		/* Every name found: the next part of the reply. */
		size_t n = l->names.len - l->sent;

		n = n < CMD_LIST_BYTES ? n : CMD_LIST_BYTES;
		proto_buf_append(out, l->names.data + l->sent, n);
		l->sent += n;
		if (l->sent < l->names.len)
			c->again = true;
		else
			cmd_session_end_listing(s);
		return;
	}
	while (head < patlen && !strchr("*?[\\", pat[head]))
		head++;
	proto_buf_init(&local);
	struct keys_acc a = {g, cmd_now_ms(), l ? &l->names : &local, l ? l->count : 0, NULL};
	bool more = bf_registry_walk(c->reg, pat, head, l ? l->after : "", l ? l->alen : 0,
				     CMD_LIST_STEP, keys_one, &a);
	/* With no memory to go on later, it goes on now. */
	while (more && !l && !(l = s->listing = calloc(1, sizeof(*l))))
		more = bf_registry_walk(c->reg, pat, head, bf_filter_name(a.last), a.last->name_len,
					CMD_LIST_STEP, keys_one, &a);
	if (more) {
		if (a.names == &local)
			l->names = local;
		l->count = a.count;
		l->sent = SIZE_MAX;
		memcpy(l->after, bf_filter_name(a.last), a.last->name_len);
		l->alen = a.last->name_len;
		c->again = true;
		return;
	}
	if (a.names->failed) {
		resp_error(c, out, resp_err_oom);
	} else {
		proto_resp_array(out, a.count);
		if (!l || a.names->len <= CMD_LIST_BYTES) {
			proto_buf_append(out, a.names->data, a.names->len);
		} else {
			/* Sent in parts from the next call on. */
			l->sent = 0;
			c->again = true;
			return;
		}
	}
	proto_buf_free(&local);
	cmd_session_end_listing(s);
}

void resp_server_keys(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	struct glob *g = pattern(c, out, av->argv[1], av->argvlen[1], false);

	if (g)
		reply_names(c, s, out, g, av->argv[1], av->argvlen[1]);
	glob_free(g);
}

/* Redis 7.0's SCAN cursor: strtoul over the whole argument, no leading space ("" is 0). */
static bool scan_cursor_ok(const char *p, size_t n, uint64_t *cursor)
{
	char buf[64];
	char *end;

	if (n >= sizeof(buf) || (n && isspace((unsigned char)p[0])))
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	errno = 0;
	*cursor = strtoull(buf, &end, 10);
	return (size_t)(end - buf) == n && errno != ERANGE;
}

/* What one SCAN call collects. */
struct scan_acc {
	const struct glob *g;
	uint64_t now; /* a filter whose time has come is left out */
	struct bf_filter **found;
	size_t n, cap;
	bool failed;
};

static void scan_visit(void *arg, struct bf_filter *f)
{
	struct scan_acc *a = arg;

	if (a->failed || cmd_expired(f, a->now) ||
	    (a->g && !glob_match(a->g, bf_filter_name(f), f->name_len)))
		return;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		struct bf_filter **p = realloc(a->found, cap * sizeof(*p));
		if (!p) {
			a->failed = true;
			return;
		}
		a->found = p;
		a->cap = cap;
	}
	a->found[a->n++] = f;
}

void resp_server_scan(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	size_t match = 0, type = 0;
	uint64_t cursor;
	long long count = 10;
	(void)s;

	if (!scan_cursor_ok(av->argv[1], av->argvlen[1], &cursor)) {
		resp_error(c, out, "ERR invalid cursor");
		return;
	}
	for (size_t i = 2; i < av->argc; i += 2) {
		if (i + 1 == av->argc) {
			resp_error(c, out, resp_err_syntax);
			return;
		}
		if (resp_arg_is(av, i, "count")) {
			if (!resp_arg_ll(av, i + 1, &count)) {
				resp_error(c, out, resp_err_not_int);
				return;
			}
			if (count < 1) {
				resp_error(c, out, resp_err_syntax);
				return;
			}
		} else if (resp_arg_is(av, i, "match")) {
			match = i + 1;
		} else if (resp_arg_is(av, i, "type")) {
			type = i + 1;
		} else {
			resp_error(c, out, resp_err_syntax);
			return;
		}
	}
	struct glob *g = NULL;
	if (match && !(g = pattern(c, out, av->argv[match], av->argvlen[match], false)))
		return;
	/* Every key is a filter: another TYPE matches none, but the cursor moves on alike. */
	struct scan_acc acc = {.g = g, .now = cmd_now_ms()};
	bool none = type && !resp_arg_is(av, type, RESP_BF_TYPE);
	uint64_t next = bf_registry_scan(c->reg, cursor, (size_t)count, scan_visit, &acc);
	glob_free(g);
	if (acc.failed) {
		free(acc.found);
		resp_error(c, out, resp_err_oom);
		return;
	}
	char num[24];
	int nl = snprintf(num, sizeof(num), "%" PRIu64, next);
	proto_resp_array(out, 2);
	proto_resp_bulk(out, num, (size_t)nl);
	proto_resp_array(out, none ? 0 : acc.n);
	for (size_t i = 0; !none && i < acc.n; i++)
		proto_resp_bulk(out, bf_filter_name(acc.found[i]), acc.found[i]->name_len);
	free(acc.found);
}

/* ---------------------------------------------------------------------------------------- */
/* Server */

/*
 * MEMORY USAGE key [SAMPLES count] (Redis 7's arguments and errors): the bytes the filter is
 * charged against max_memory (its bits, its structures with the allocator's overhead, its
 * bookkeeping); nil for a missing key. SAMPLES is accepted and changes nothing (nothing here is
 * sampled). MEMORY HELP; other subcommands are unknown.
 */
void resp_server_memory(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	static const char *const help[] = {
	    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "USAGE <key> [SAMPLES <count>]",
	    "    Return memory in bytes used by <key> and its value.",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};
	const struct bf_filter *f;

	if (resp_arg_is(av, 1, "help") && av->argc == 2) {
		resp_reply_help(out, help);
		return;
	}
	if (!resp_arg_is(av, 1, "usage") || av->argc < 3) {
		resp_error_unknown_sub(c, av, out, "MEMORY");
		return;
	}
	for (size_t j = 3; j < av->argc; j++) {
		long long samples;

		if (!resp_arg_is(av, j, "samples") || j + 1 >= av->argc) {
			resp_error(c, out, resp_err_syntax);
			return;
		}
		if (!proto_resp_parse_ll(av->argv[j + 1], av->argvlen[j + 1], &samples)) {
			resp_error(c, out, "ERR value is not an integer or out of range");
			return;
		}
		if (samples < 0) {
			resp_error(c, out, resp_err_syntax);
			return;
		}
		j++;
	}
	f = resp_arg_filter(c, av, 2);
	if (!f)
		proto_resp_null(out, s->resp);
	else
		proto_resp_integer(out, (int64_t)bf_registry_charge(c->reg, f));
}

/*
 * FLUSHALL / FLUSHDB [ASYNC|SYNC]: every filter dropped (blossomd has one database), as one
 * change in the log. Both modes run at once; Redis's replies and syntax errors.
 */
void resp_server_flushall(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			  struct proto_buf *out)
{
	enum cmd_status st;
	(void)s;

	if (av->argc > 2 ||
	    (av->argc == 2 && !resp_arg_is(av, 1, "async") && !resp_arg_is(av, 1, "sync"))) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	st = cmd_flushall(c, NULL);
	if (st != CMD_OK) {
		resp_error_status(c, out, st, NULL);
		return;
	}
	proto_resp_simple(out, "OK", 2);
}

void resp_server_save(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	bool background = resp_arg_is(av, 0, "bgsave");

	if (background && av->argc == 2 && !resp_arg_is(av, 1, "schedule")) {
		resp_error(c, out, resp_err_syntax);
		return;
	}
	/* As Redis: BGSAVE answers at once and the snapshots are written in the background; one
	 * already running is an error, SCHEDULE or not (Redis schedules only behind an AOF
	 * rewrite, which blossomd does not have). */
	if (background && c->hooks.bgsave) {
		int rc = !c->in_exec	       ? c->hooks.bgsave(c->hooks.arg)
			 : c->save_in_progress ? -EBUSY
					       : (c->bgsave_after = true, 0);
		if (rc == -EBUSY)
			resp_error(c, out, "ERR Background save already in progress");
		else
			proto_resp_simple(out, "Background saving started", 25);
		return;
	}
	enum cmd_status st = cmd_flush(c, NULL, &s->flush_ticket);

	if (c->write_wait) {
		c->commands--; /* a cycle runs: this runs again once it ends, counted then */
		c->peer_commands[CMD_PEER_RESP]--;
		return;
	}
	if (st != CMD_OK) {
		resp_error(c, out, "ERR snapshot failed, see the server log");
		return;
	}
	if (background)
		proto_resp_simple(out, "Background saving started", 25);
	else
		proto_resp_ok(out);
}

void resp_server_lastsave(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			  struct proto_buf *out)
{
	(void)s;
	(void)av;
	proto_resp_integer(out, (int64_t)c->last_save_unix);
}

enum info_section {
	SEC_SERVER = 1 << 0,
	SEC_CLIENTS = 1 << 1,
	SEC_MEMORY = 1 << 2,
	SEC_PERSISTENCE = 1 << 3,
	SEC_STATS = 1 << 4,
	SEC_REPLICATION = 1 << 5,
	SEC_CPU = 1 << 6,
	SEC_KEYSPACE = 1 << 7,
	SEC_ALL = (1 << 8) - 1,
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

/* The sections INFO's arguments name (SEC_*; all of them without arguments). */
static unsigned info_wanted(const struct proto_argv *av)
{
	static const struct {
		const char *name;
		unsigned bits;
	} names[] = {
	    {"server", SEC_SERVER},  {"clients", SEC_CLIENTS},
	    {"memory", SEC_MEMORY},  {"persistence", SEC_PERSISTENCE},
	    {"stats", SEC_STATS},    {"replication", SEC_REPLICATION},
	    {"cpu", SEC_CPU},	     {"keyspace", SEC_KEYSPACE},
	    {"default", SEC_ALL},    {"all", SEC_ALL},
	    {"everything", SEC_ALL},
	};
	unsigned want = av->argc == 1 ? SEC_ALL : 0;

	for (size_t i = 1; i < av->argc; i++)
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (resp_arg_is(av, i, names[k].name))
				want |= names[k].bits;
	return want;
}

/* INFO's Server section: the Redis version clients choose their features by (as Dragonfly and
 * KeyDB report one), blossomd's own, and uptime. */
static void info_server(const struct cmd_ctx *c, struct proto_buf *b)
{
	uint64_t now = (uint64_t)time(NULL);
	uint64_t up = c->started_unix && now > c->started_unix ? now - c->started_unix : 0;
	info_section(b, "Server");
	proto_buf_append_str(b, "redis_version:" RESP_REDIS_VERSION "\r\n"
				"redis_mode:standalone\r\n"
				"blossomd_version:");
	proto_buf_append_str(b, c->version ? c->version : "unknown");
	proto_buf_append_str(b, "\r\narch_bits:64\r\n");
	info_line(b, "uptime_in_seconds", up);
	info_line(b, "uptime_in_days", up / 86400);
}

/* INFO's Clients section: the text/RESP port's connections (HTTP requests are not clients). */
static void info_clients(const struct cmd_server_info *si, struct proto_buf *b)
{
	info_section(b, "Clients");
	info_line(b, "connected_clients", si->connected_clients);
	info_line(b, "maxclients", si->maxclients);
	proto_buf_append_str(b, "blocked_clients:0\r\n");
}

/*
 * INFO's Persistence section, mapped onto what blossomd has: checkpoints are Redis's RDB saves
 * (rdb_*: a cycle in progress, the time and status of the last one, persistent filters with
 * changes no checkpoint holds yet), the write-ahead log is its AOF (aof_enabled while the log is
 * on, its bytes on disk; a log is never rewritten, a checkpoint lets old segments go). The load
 * ends before the port listens, so loading is always 0.
 */
static void info_persistence(const struct cmd_ctx *c, const struct cmd_server_info *si,
			     struct proto_buf *b)
{
	info_section(b, "Persistence");
	proto_buf_append_str(b, "loading:0\r\nasync_loading:0\r\n");
	info_line(b, "rdb_changes_since_last_save", si->dirty);
	info_line(b, "rdb_bgsave_in_progress", c->save_in_progress);
	info_line(b, "rdb_last_save_time", c->last_save_unix);
	proto_buf_append_str(b, c->last_save_failed ? "rdb_last_bgsave_status:err\r\n"
						    : "rdb_last_bgsave_status:ok\r\n");
	info_line(b, "aof_enabled", si->wal);
	proto_buf_append_str(b, "aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n");
	if (si->wal) {
		proto_buf_append_str(b, c->log_failed ? "aof_last_write_status:err\r\n"
						      : "aof_last_write_status:ok\r\n");
		info_line(b, "aof_current_size", si->wal_bytes);
	}
}

/* INFO's Stats section: counters since start or the last CONFIG RESETSTAT. keyspace_hits and
 * keyspace_misses are the keys checked that a filter answered maybe-present and absent. */
static void info_stats(const struct cmd_ctx *c, const struct cmd_server_info *si,
		       struct proto_buf *b)
{
	const struct cmd_stat_base *z = &c->stat_base;

	info_section(b, "Stats");
	info_line(b, "total_connections_received", si->total_connections);
	info_line(b, "total_commands_processed", c->commands - z->commands);
	info_line(b, "instantaneous_ops_per_sec", si->ops_per_sec);
	info_line(b, "rejected_connections", si->rejected_connections);
	info_line(b, "expired_keys", c->expired - z->expired);
	proto_buf_append_str(b, "evicted_keys:0\r\n");
	info_line(b, "keyspace_hits", c->check_hits - z->check_hits);
	info_line(b, "keyspace_misses", c->check_misses - z->check_misses);
	info_line(b, "pubsub_channels", pubsub_nchannels(c->pubsub));
	info_line(b, "pubsub_patterns", pubsub_npatterns(c->pubsub));
	info_line(b, "total_error_replies", c->errors - z->errors);
}

static void info_cpu(const struct cmd_server_info *si, struct proto_buf *b)
{
	info_section(b, "CPU");
	proto_buf_append_fmt(b, "used_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\n", si->cpu_sys,
			     si->cpu_user);
}

/* INFO's Keyspace section: db0's filters, those with a TTL and their mean time left. */
static void info_keyspace(const struct cmd_ctx *c, struct proto_buf *b)
{
	size_t n = bf_registry_count(c->reg);
	uint64_t sum, now = cmd_now_ms();
	size_t ne = bf_registry_expiring(c->reg, &sum);
	info_section(b, "Keyspace");
	if (n) {
		proto_buf_append_str(b, "db0:keys=");
		proto_buf_append_u64(b, n);
		proto_buf_append_str(b, ",expires=");
		proto_buf_append_u64(b, ne);
		/* The mean time left in ms, as Redis's (which estimates it by sampling). */
		proto_buf_append_str(b, ",avg_ttl=");
		proto_buf_append_u64(b, ne && sum / ne > now ? sum / ne - now : 0);
		proto_buf_append(b, "\r\n", 2);
	}
}

void resp_server_info(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		      struct proto_buf *out)
{
	unsigned want = info_wanted(av);
	struct cmd_server_info si = {0};
	struct proto_buf b;

	if (c->hooks.server_info)
		c->hooks.server_info(c->hooks.arg, &si);
	proto_buf_init(&b);
	if (want & SEC_SERVER)
		info_server(c, &b);
	if (want & SEC_CLIENTS)
		info_clients(&si, &b);
	if (want & SEC_MEMORY) {
		info_section(&b, "Memory");
		info_line(&b, "used_memory", bf_registry_memory(c->reg));
		info_line(&b, "maxmemory", bf_registry_max_memory(c->reg));
		proto_buf_append_str(&b, "maxmemory_policy:noeviction\r\n");
	}
	if (want & SEC_PERSISTENCE)
		info_persistence(c, &si, &b);
	if (want & SEC_STATS)
		info_stats(c, &si, &b);
	if (want & SEC_REPLICATION) {
		info_section(&b, "Replication");
		if (c->hooks.repl)
			c->hooks.repl->info(c->hooks.arg, &b);
		else
			proto_buf_append_str(&b, "role:master\r\nconnected_slaves:0\r\n");
	}
	if (want & SEC_CPU)
		info_cpu(&si, &b);
	if (want & SEC_KEYSPACE)
		info_keyspace(c, &b);
	if (b.failed)
		resp_error(c, out, resp_err_oom);
	else
		proto_resp_verbatim(out, s->resp, "txt", b.data ? b.data : "", b.len);
	proto_buf_free(&b);
}

/*
 * CONFIG GET's parameters, as Redis names them, mapped onto blossomd's config: appendonly is
 * the write-ahead log (wal), appendfsync its wal_fsync; save is a checkpoint every
 * snapshot_interval seconds when at least one change came ("5 1"; "" when they are off);
 * maxclients is max_connections, timeout idle_timeout, maxmemory max_memory,
 * notify-keyspace-events notify_keyspace_events (as Redis writes its classes back).
 */
static const char *const config_params[] = {"appendfsync", "appendonly", "databases",
					    "maxclients",  "maxmemory",	 "notify-keyspace-events",
					    "save",	   "timeout"};
enum { NPARAMS = sizeof(config_params) / sizeof(config_params[0]) };

static void config_value(struct cmd_ctx *c, const struct cmd_server_info *si, size_t k,
			 struct proto_buf *out)
{
	static const char *const fsync[] = {"always", "everysec", "no"};
	char num[48];
	int len = 0;

	switch (k) {
	case 0:
		proto_resp_bulk_str(
		    out, fsync[si->wal_fsync >= 0 && si->wal_fsync <= 2 ? si->wal_fsync : 0]);
		return;
	case 1:
		proto_resp_bulk_str(out, si->wal ? "yes" : "no");
		return;
	case 2:
		proto_resp_bulk_str(out, "1");
		return;
	case 3:
		len = snprintf(num, sizeof(num), "%" PRIu64, si->maxclients);
		break;
	case 4:
		len = snprintf(num, sizeof(num), "%" PRIu64, bf_registry_max_memory(c->reg));
		break;
	case 5:
		len = (int)pubsub_notify_format(c->notify, num);
		break;
	case 6:
		if (si->snapshot_interval)
			len = snprintf(num, sizeof(num), "%" PRIu32 " 1", si->snapshot_interval);
		break;
	default:
		len = snprintf(num, sizeof(num), "%" PRIu64, si->idle_timeout);
		break;
	}
	proto_resp_bulk(out, num, (size_t)len);
}

/* CONFIG GET pattern [pattern ...]: every parameter some pattern matches, once each. */
static void config_get(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		       struct proto_buf *out)
{
	struct cmd_server_info si = {0};
	bool hit[NPARAMS] = {false};
	size_t n = 0;

	if (av->argc < 3) {
		resp_error_arity(c, out, "config|get");
		return;
	}
	for (size_t i = 2; i < av->argc; i++) {
		struct glob *g = pattern(c, out, av->argv[i], av->argvlen[i], true);
		if (!g)
			return;
		for (size_t k = 0; k < NPARAMS; k++)
			hit[k] =
			    hit[k] || glob_match(g, config_params[k], strlen(config_params[k]));
		glob_free(g);
	}
	if (c->hooks.server_info)
		c->hooks.server_info(c->hooks.arg, &si);
	for (size_t k = 0; k < NPARAMS; k++)
		n += hit[k];
	proto_resp_map(out, s->resp, n);
	for (size_t k = 0; k < NPARAMS; k++) {
		if (!hit[k])
			continue;
		proto_resp_bulk_str(out, config_params[k]);
		config_value(c, &si, k, out);
	}
}

/* CONFIG RESETSTAT: INFO's counters start again from 0 (the commands, errors, expired keys,
 * keyspace hits and misses here; the connections the server counts). */
static void config_resetstat(struct cmd_ctx *c, struct proto_buf *out)
{
	c->stat_base = (struct cmd_stat_base){.commands = c->commands,
					      .errors = c->errors,
					      .expired = c->expired,
					      .check_hits = c->check_hits,
					      .check_misses = c->check_misses};
	if (c->hooks.reset_stats)
		c->hooks.reset_stats(c->hooks.arg);
	proto_resp_ok(out);
}

void resp_server_config(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			struct proto_buf *out)
{
	static const char *const help[] = {
	    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	    "GET <pattern>",
	    "    Return parameters matching the glob-like <pattern> and their values.",
	    "SET <directive> <value>",
	    "    Set the configuration <directive> to <value>.",
	    "RESETSTAT",
	    "    Reset statistics reported by the INFO command.",
	    "REWRITE",
	    "    Rewrite the configuration file.",
	    "HELP",
	    "    Prints this help.",
	    NULL,
	};

	if (resp_arg_is(av, 1, "help") && av->argc == 2)
		resp_reply_help(out, help);
	else if (resp_arg_is(av, 1, "get"))
		config_get(c, s, av, out);
	else if (resp_arg_is(av, 1, "set"))
		resp_admin_config_set(c, s, av, out);
	else if (resp_arg_is(av, 1, "resetstat") && av->argc == 2)
		config_resetstat(c, out);
	else if (resp_arg_is(av, 1, "resetstat"))
		resp_error_arity(c, out, "config|resetstat");
	else if (resp_arg_is(av, 1, "rewrite"))
		resp_admin_config_rewrite(c, s, av, out);
	else
		resp_error_unknown_sub(c, av, out, "CONFIG");
}
