/* SPDX-License-Identifier: MIT */
/*
 * What COMMAND, COMMAND INFO, COMMAND DOCS and COMMAND GETKEYS say of each command the RESP
 * front end serves: Redis 7.0's ten-field entry (arity, flags, legacy key range, ACL
 * categories, tips, key specifications, subcommands) and its documentation. The table,
 * resp_cmd_infos, is built from proto/commands.json by scripts/command-info-c.py (the JSON
 * from a live Redis 7.0 and RedisBloom's command table: scripts/command-info-fetch.py).
 * Space-separated word lists are sent one reply element per word.
 */
#ifndef BLOSSOMD_PROTO_RESP_CMD_INFO_H
#define BLOSSOMD_PROTO_RESP_CMD_INFO_H

#include <stddef.h>

/* A key specification (Redis's keySpec): flags are bits of RESP_KS_FLAGS' words, in order. */
#define RESP_KS_FLAGS "RO RW OW RM access update insert delete not_key incomplete variable_flags"
struct resp_cmd_keyspec {
	const char *notes; /* NULL: none */
	unsigned flags;
	/* begin_search: 'i' index (at bs), 'k' keyword (keyword, searched from bs), 'u' unknown */
	char bs_type;
	int bs;
	const char *keyword;
	/* find_keys: 'r' range {lastkey, keystep, limit}, 'n' keynum {keynumidx, firstkey,
	 * keystep}, 'u' unknown */
	char fk_type;
	int fk[3];
};

/* An argument in COMMAND DOCS; flags are bits of RESP_ARG_FLAGS' words. */
#define RESP_ARG_FLAGS "optional multiple multiple_token"
struct resp_cmd_arg {
	const char *name, *type;
	int key_spec_index; /* -1: none */
	const char *token, *summary, *since, *deprecated_since;
	unsigned flags;
	const struct resp_cmd_arg *args; /* a oneof's or block's */
	size_t nargs;
};

struct resp_cmd_history {
	const char *since, *changes;
};

struct resp_cmd_info {
	const char *name; /* lower case; "container|sub" for a subcommand */
	int arity;
	const char *flags; /* words */
	int first, last, step;
	const char *acl, *tips; /* words */
	const struct resp_cmd_keyspec *specs;
	size_t nspecs;
	const struct resp_cmd_info *subs;
	size_t nsubs;
	/* COMMAND DOCS; NULL: not there */
	const char *summary, *since, *group, *complexity, *module;
	const char *doc_flags; /* words */
	const char *deprecated_since, *replaced_by;
	const struct resp_cmd_history *history;
	size_t nhistory;
	const struct resp_cmd_arg *args;
	size_t nargs;
};

/* Every top-level command, in the order of resp_cmd.c's table. */
extern const struct resp_cmd_info resp_cmd_infos[];
extern const size_t resp_cmd_ninfos;

#endif /* BLOSSOMD_PROTO_RESP_CMD_INFO_H */
