/* SPDX-License-Identifier: MIT */
/*
 * Private to server/repl_primary.c and server/repl_replica.c: the replication state of the
 * process (struct repl, srv->repl).
 */
#ifndef BLOSSOMD_SERVER_REPL_IMPL_H
#define BLOSSOMD_SERVER_REPL_IMPL_H

#include <sys/queue.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/buf.h"
#include "server/repl.h"

struct srv;

/* A replica, as its primary sees it: a connection of the RESP port that sent REPLCONF or
 * PSYNC. */
struct repl_link {
	LIST_ENTRY(repl_link) link;
	struct srv_conn *conn;
	enum { LINK_HANDSHAKE, LINK_WAIT_IMAGE, LINK_IMAGE, LINK_ONLINE } state;
	unsigned port, http_port;
	char ip[64];
	uint64_t ack;		  /* the newest offset it acknowledged */
	uint64_t ack_ms;	  /* when (loop ms) */
	uint64_t start;		  /* the image's offset */
	struct proto_buf pending; /* frames appended while the image is being sent */
	pid_t child;		  /* the process writing the image, 0 if none */
	int status_fd;		  /* its status pipe */
};

/* The newest frames of records, for replicas that reconnect (PSYNC's +CONTINUE): frames
 * buf[start, end), consecutive LSNs from first_lsn, at most cfg.repl_backlog_size bytes. */
struct repl_backlog {
	unsigned char *buf;
	size_t start, end, cap;
	uint64_t first_lsn; /* the LSN of the frame at start; the next record's while empty */
	bool active;	    /* made at the first full sync, kept since */
};

/* A WAIT under way. */
struct repl_wait {
	LIST_ENTRY(repl_wait) link;
	uint64_t session, target, deadline_ms; /* deadline 0: none */
	long long n;
	bool unblocked; /* this process became a replica: answered -UNBLOCKED when run again */
};

/* Tests only: ms the image's child pauses before each filter, so that a full sync takes long
 * enough to see what happens meanwhile (as BLOSSOMD_SNAP_ROUND_ENTRIES for checkpoints). */
#define REPL_IMAGE_DELAY_ENV "BLOSSOMD_REPL_IMAGE_DELAY_MS"

/* The replica's link to its primary (repl_replica.c). */
struct repl_follow;

struct repl {
	struct srv *srv;
	char replid[REPL_ID_LEN + 1], replid2[REPL_ID_LEN + 1];
	uint64_t second_offset; /* second_repl_offset: replid2's last offset + 1, 0 = none */
	LIST_HEAD(, repl_link) links;
	/* Links gone whose image's child was killed and is not reaped yet (SIGCHLD reaps it). */
	LIST_HEAD(, repl_link) reaping;
	LIST_HEAD(, repl_wait) waits;
	struct repl_backlog bl;
	uv_timer_t tick;	    /* each second: pings to replicas, acks to the primary */
	uv_timer_t wait_timer;	    /* while WAITs are under way: their timeouts */
	uv_signal_t sigchld;	    /* an image's child ended */
	unsigned handles;	    /* handles open (the struct is freed when the last closes) */
	struct repl_follow *follow; /* NULL: a primary */
	unsigned image_delay_ms;    /* tests: REPL_IMAGE_DELAY_ENV, a pause before each filter */
};

/* repl_primary.c: a new random replication id into id (REPL_ID_LEN hex digits). */
void repl_new_id(char *id);
/* repl_primary.c: close every replica's link (this process becomes a replica). */
void repl_drop_links(struct repl *r);

/* repl_replica.c */
int repl_follow_start(struct repl *r, const char *host, unsigned port);
void repl_follow_stop(struct repl *r);
bool repl_follow_is(const struct repl *r, const char *host, unsigned port);
void repl_follow_tick(struct repl *r);
void repl_follow_flushed(struct repl *r);
void repl_follow_info(const struct repl *r, struct proto_buf *b);
void repl_follow_role(const struct repl *r, struct proto_buf *out);
uint64_t repl_follow_offset(const struct repl *r);

#endif
