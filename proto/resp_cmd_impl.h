/* SPDX-License-Identifier: MIT */
/*
 * Private to the RESP front end, shared by its files: resp_cmd.c (replies, argument
 * helpers, the command table and resp_cmd_exec), resp_bf.c (the BF.* family), resp_server.c
 * (connection, keyspace and server commands), resp_keys.c (RENAME, the EXPIRE family),
 * resp_admin.c (MODULE, OBJECT, WAIT, DEBUG, CONFIG SET, CONFIG REWRITE, SHUTDOWN),
 * resp_command.c (COMMAND) and resp_pubsub.c (pub/sub, MONITOR, RESET). Nothing else includes
 * it.
 */
#ifndef BLOSSOMD_PROTO_RESP_CMD_IMPL_H
#define BLOSSOMD_PROTO_RESP_CMD_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/command.h"
#include "proto/resp.h"
#include "proto/resp_cmd.h"

/* The Redis version clients are told: the one whose replies these are. */
#define RESP_REDIS_VERSION "7.0.15"

/* RedisBloom's module name and version (major * 10000 + minor * 100 + patch) as MODULE LIST
 * and HELLO report them: 2.6.12, the release whose BF.* replies, RESP3 forms included, these
 * are. */
#define RESP_BF_MODULE_VERSION 20612

/* RedisBloom's module type name, as TYPE and SCAN ... TYPE report it. */
#define RESP_BF_TYPE "MBbloom--"

/* RedisBloom's bounds on a new filter's capacity. */
#define RESP_CAPACITY_MAX (INT64_C(1) << 30)

/* Most bytes of layer data in one BF.SCANDUMP reply (RedisBloom sends up to 16 MiB; a smaller
 * chunk keeps a client's output buffer and the loader's bulk limit comfortable). */
#define RESP_DUMP_CHUNK (1024 * 1024)

/* Error texts more than one command sends. */
extern const char resp_err_not_found[], resp_err_oom[], resp_err_item_long[], resp_err_full[];
extern const char resp_err_syntax[], resp_err_not_int[], resp_err_bad_data[];
extern const char resp_err_pattern_long[], resp_err_noauth[];

typedef void (*resp_handler)(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
			     struct proto_buf *out);

/* Replies: an error (counted in c->errors); Redis's arity error for a lower-case command name;
 * the words of a command-layer status (f: the filter it concerns, or NULL); Redis's unknown
 * subcommand error; a HELP array. */
void resp_error(struct cmd_ctx *c, struct proto_buf *out, const char *msg);
void resp_error_arity(struct cmd_ctx *c, struct proto_buf *out, const char *name);
void resp_error_status(struct cmd_ctx *c, struct proto_buf *out, enum cmd_status st,
		       const struct bf_filter *f);
void resp_error_unknown_sub(struct cmd_ctx *c, const struct proto_argv *av, struct proto_buf *out,
			    const char *upper);
void resp_reply_help(struct proto_buf *out, const char *const *lines);

/* Arguments: a case-insensitive word; Redis's integer and double parsing; whether the
 * arguments from `first` on fit max_key_bytes; the filter argument i names (or NULL). */
bool resp_arg_is(const struct proto_argv *av, size_t i, const char *word);
bool resp_arg_ll(const struct proto_argv *av, size_t i, long long *out);
bool resp_arg_double(const struct proto_argv *av, size_t i, double *out);
bool resp_items_fit(const struct cmd_ctx *c, const struct proto_argv *av, size_t first);
struct bf_filter *resp_arg_filter(struct cmd_ctx *c, const struct proto_argv *av, size_t i);

/* The handlers of the command table. */
#define RESP_HANDLER(name)                                                                         \
	void name(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,           \
		  struct proto_buf *out)
RESP_HANDLER(resp_bf_reserve);
RESP_HANDLER(resp_bf_add);
RESP_HANDLER(resp_bf_madd);
RESP_HANDLER(resp_bf_insert);
RESP_HANDLER(resp_bf_exists);
RESP_HANDLER(resp_bf_mexists);
RESP_HANDLER(resp_bf_del);
RESP_HANDLER(resp_bf_info);
RESP_HANDLER(resp_bf_card);
RESP_HANDLER(resp_bf_scandump);
RESP_HANDLER(resp_bf_loadchunk);
RESP_HANDLER(resp_bf_debug);

RESP_HANDLER(resp_server_ping);
RESP_HANDLER(resp_server_echo);
RESP_HANDLER(resp_server_quit);
RESP_HANDLER(resp_multi_multi);
RESP_HANDLER(resp_multi_exec);
RESP_HANDLER(resp_multi_discard);
RESP_HANDLER(resp_multi_watch);
RESP_HANDLER(resp_multi_unwatch);

/* Start loading the paged-out filters the command av reads or changes (EXEC's queue, before
 * it runs). True if one is loading (c->paging set): run again once it is in memory. */
bool resp_cmd_load(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av);
RESP_HANDLER(resp_server_auth);
RESP_HANDLER(resp_server_hello);
RESP_HANDLER(resp_server_select);
RESP_HANDLER(resp_server_client);
RESP_HANDLER(resp_server_dbsize);
RESP_HANDLER(resp_server_flushall);
RESP_HANDLER(resp_server_memory);
RESP_HANDLER(resp_server_exists);
RESP_HANDLER(resp_server_del);
RESP_HANDLER(resp_server_type);
RESP_HANDLER(resp_server_keys);
RESP_HANDLER(resp_server_scan);
RESP_HANDLER(resp_server_save);
RESP_HANDLER(resp_server_lastsave);
RESP_HANDLER(resp_server_info);
RESP_HANDLER(resp_server_config);

RESP_HANDLER(resp_admin_module);
RESP_HANDLER(resp_admin_object);
RESP_HANDLER(resp_admin_wait);
RESP_HANDLER(resp_admin_debug);
RESP_HANDLER(resp_admin_config_set);
RESP_HANDLER(resp_command); /* resp_command.c */
/* Whether Redis flags av's command (its subcommand's entry, if it has one) with the word flag:
 * "admin" (MONITOR does not show it: CONFIG GET, CLIENT LIST, SAVE...), "write" (a replica
 * refuses it). resp_command.c. */
bool resp_command_flagged(const struct proto_argv *av, const char *flag);
RESP_HANDLER(resp_admin_config_rewrite);
RESP_HANDLER(resp_admin_shutdown);
/* MODULE LIST's reply, which HELLO's "modules" repeats. */
void resp_admin_module_list(struct proto_buf *out, int resp);

RESP_HANDLER(resp_pubsub_subscribe);
RESP_HANDLER(resp_pubsub_unsubscribe);
RESP_HANDLER(resp_pubsub_publish);
RESP_HANDLER(resp_pubsub_pubsub);
RESP_HANDLER(resp_pubsub_monitor);
RESP_HANDLER(resp_pubsub_reset);
/* Whether s may run the command whose handler is run (NULL: one blossomd lacks): a RESP2
 * session with a subscription only (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT and RESET. */
bool resp_pubsub_allowed(const struct cmd_session *s, resp_handler run);
/* Show the command av that s ran to the monitors (c->monitors > 0), secrets redacted. */
void resp_pubsub_feed(struct cmd_ctx *c, const struct cmd_session *s, const struct proto_argv *av);
RESP_HANDLER(resp_repl_replicaof);
RESP_HANDLER(resp_repl_replconf);
RESP_HANDLER(resp_repl_psync);
RESP_HANDLER(resp_repl_role);
/* DEBUG DIGEST-VALUE key...: each filter's digest (bf_filter_digest), 40 zeros if none. */
RESP_HANDLER(resp_repl_digest);

RESP_HANDLER(resp_keys_rename);
RESP_HANDLER(resp_keys_expire);
RESP_HANDLER(resp_keys_ttl);
RESP_HANDLER(resp_keys_persist);

#endif /* BLOSSOMD_PROTO_RESP_CMD_IMPL_H */
