/* SPDX-License-Identifier: MIT */
/*
 * One client connection as the command layer sees it, for CLIENT LIST / INFO / KILL: the facts
 * the server's hooks (command.h, client_get / client_each / client_kill) fill in, and that a
 * front end words (the RESP one as Redis 7.0's CLIENT LIST line). Nothing of the server's own
 * structures shows through.
 */
#ifndef BLOSSOMD_PROTO_CLIENT_H
#define BLOSSOMD_PROTO_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/command.h"

struct cmd_client {
	uint64_t id;
	bool self;	    /* the connection asking */
	const char *addr;   /* its peer: "127.0.0.1:40000", "[::1]:40000"; "?:0" if unknown */
	const char *laddr;  /* our end of it, the same way */
	int fd;		    /* its socket; -1 if none */
	const char *name;   /* CLIENT SETNAME's; "" for none */
	int resp;	    /* protocol version, 2 or 3 */
	const char *cmd;    /* cmd_session.last_cmd: NULL for none */
	uint64_t age;	    /* seconds since it connected */
	uint64_t idle;	    /* seconds since it last read, or a write of its moved */
	bool closing;	    /* it closes once its replies are written (QUIT, KILL of itself) */
	uint64_t sub, psub; /* its channels and patterns (SUBSCRIBE, PSUBSCRIBE) */
	bool monitor;	    /* MONITOR was sent */
	bool reading;	    /* it is read (Redis's events=r) */
	bool writing;	    /* a write of its is pending (events=w) */
	/* Its transaction (cmd_multi_client): the commands queued, or -1 outside MULTI; the
	 * names it WATCHes; whether one of them changed (Redis's dirty CAS flag, d); the bytes of
	 * the queued commands' arguments. */
	long long multi;
	uint64_t watch;
	bool dirty;
	uint64_t multi_mem;
	/* Bytes: unparsed input (for the one asking: the running command and what follows it)
	 * and free room after it in its own input buffer; the arguments of the command being
	 * run or parsed; the reply buffer's size, its largest use in the last few seconds, the
	 * replies in it not yet sent, and memory held for unsent replies; everything the
	 * connection holds, its own structure included. */
	uint64_t qbuf, qbuf_free, argv_mem;
	uint64_t rbs, rbp, obl, omem;
	uint64_t tot_mem;
};

#endif /* BLOSSOMD_PROTO_CLIENT_H */
