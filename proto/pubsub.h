/* SPDX-License-Identifier: MIT */
/*
 * Publish/subscribe (Redis 7.0's SUBSCRIBE, PSUBSCRIBE, PUBLISH, PUBSUB), keyspace
 * notifications and MONITOR's lines, without sockets: the registry of channels and patterns
 * with the sessions subscribed to each, the frames a message goes out as (RESP2 arrays, RESP3
 * pushes), Redis's notify-keyspace-events classes, and MONITOR's line as Redis words it.
 *
 * A message is handed to each subscriber through a callback (the server's cmd_hooks.push),
 * which must not subscribe or unsubscribe anyone while it runs: the server appends the frame
 * to the connection's pending output and closes a connection over its output limit later.
 *
 * Threading: the loop thread only, as the rest of the command layer.
 */
#ifndef BLOSSOMD_PROTO_PUBSUB_H
#define BLOSSOMD_PROTO_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/buf.h"

struct cmd_session;
struct pubsub;

/* Redis's notify-keyspace-events classes (server.h NOTIFY_*, the same bits). */
enum pubsub_notify {
	PUBSUB_NOTIFY_KEYSPACE = 1 << 0,  /* K: __keyspace@0__:<key> <event> */
	PUBSUB_NOTIFY_KEYEVENT = 1 << 1,  /* E: __keyevent@0__:<event> <key> */
	PUBSUB_NOTIFY_GENERIC = 1 << 2,	  /* g: del, expire, persist, rename_from, rename_to */
	PUBSUB_NOTIFY_STRING = 1 << 3,	  /* $ (no strings here: accepted, never sent) */
	PUBSUB_NOTIFY_LIST = 1 << 4,	  /* l (likewise) */
	PUBSUB_NOTIFY_SET = 1 << 5,	  /* s (likewise) */
	PUBSUB_NOTIFY_HASH = 1 << 6,	  /* h (likewise) */
	PUBSUB_NOTIFY_ZSET = 1 << 7,	  /* z (likewise) */
	PUBSUB_NOTIFY_EXPIRED = 1 << 8,	  /* x: expired */
	PUBSUB_NOTIFY_EVICTED = 1 << 9,	  /* e (nothing is evicted: never sent) */
	PUBSUB_NOTIFY_STREAM = 1 << 10,	  /* t (never sent) */
	PUBSUB_NOTIFY_KEY_MISS = 1 << 11, /* m (never sent) */
	PUBSUB_NOTIFY_MODULE = 1 << 13,	  /* d: the filter type's own events, bf.reserve ... */
	PUBSUB_NOTIFY_NEW = 1 << 14,	  /* n: new */
	PUBSUB_NOTIFY_ALL = PUBSUB_NOTIFY_GENERIC | PUBSUB_NOTIFY_STRING | PUBSUB_NOTIFY_LIST |
			    PUBSUB_NOTIFY_SET | PUBSUB_NOTIFY_HASH | PUBSUB_NOTIFY_ZSET |
			    PUBSUB_NOTIFY_EXPIRED | PUBSUB_NOTIFY_EVICTED | PUBSUB_NOTIFY_STREAM |
			    PUBSUB_NOTIFY_MODULE, /* A (m and n are not in it, as in Redis) */
};

/* The letters notify-keyspace-events takes, in Redis's order (its error message's). */
#define PUBSUB_NOTIFY_LETTERS "Ag$lshzxeKEtmdn"

/* The classes of s[0, n) (Redis's keyspaceEventsStringToFlags): their bits, or -1 if a byte is
 * not one of PUBSUB_NOTIFY_LETTERS. "" is 0 (off). */
int pubsub_notify_parse(const char *s, size_t n);

/* Redis's keyspaceEventsFlagsToString of flags into out (NUL-terminated, at most 15 letters):
 * "A" for every class of A, then K, E, m. Returns its length. */
size_t pubsub_notify_format(int flags, char out[16]);

/* Called with each subscriber and the frame it gets (already in its protocol's form). */
typedef void (*pubsub_deliver_fn)(void *arg, struct cmd_session *to, const char *frame, size_t len);

/* A new empty registry: 0 or -ENOMEM. pubsub_free ends every session's subscriptions (their
 * sessions may then be freed in any order). NULL is ignored. */
int pubsub_new(struct pubsub **out);
void pubsub_free(struct pubsub *ps);

/*
 * s subscribes to the channel (pattern false) or pattern name[0, len): 1 if it is new for s, 0
 * if s had it already, -ENOMEM (nothing changed), -E2BIG (a pattern over GLOB_MAX_PATTERN).
 */
int pubsub_subscribe(struct pubsub *ps, struct cmd_session *s, bool pattern, const char *name,
		     size_t len);

/* s leaves the channel or pattern name[0, len): 1 if it had it, 0 if not. */
int pubsub_unsubscribe(struct pubsub *ps, struct cmd_session *s, bool pattern, const char *name,
		       size_t len);

/*
 * s leaves every channel (pattern false) or pattern it has, oldest first, calling fn with
 * each name and the number of subscriptions (channels and patterns) s has left after it.
 * Returns how many it left.
 */
size_t pubsub_unsubscribe_all(struct cmd_session *s, bool pattern,
			      void (*fn)(void *arg, const char *name, size_t len, size_t left),
			      void *arg);

/* s leaves everything, silently (its connection closes, or RESET). Safe on any session. */
void pubsub_session_end(struct cmd_session *s);

/* The channels (pattern false) or patterns s has. */
size_t pubsub_session_count(const struct cmd_session *s, bool pattern);

/* The bytes s's subscriptions hold, each shared channel or pattern counted whole: the server
 * charges them to the connection against max_client_memory. 0 for none. */
size_t pubsub_session_bytes(const struct cmd_session *s);

/*
 * Deliver message msg[0, mlen) on channel ch[0, clen): a "message" to every session subscribed
 * to the channel (oldest subscription first), then a "pmessage" to every session of every
 * pattern it matches (patterns oldest first). Returns the number of deliveries (PUBLISH's
 * reply). A session gets a RESP2 array or a RESP3 push by its cmd_session.resp. Out of memory
 * for a frame: that delivery is skipped.
 */
size_t pubsub_publish(struct pubsub *ps, const char *ch, size_t clen, const char *msg, size_t mlen,
		      pubsub_deliver_fn fn, void *arg);

/* PUBSUB NUMSUB's count for one channel; PUBSUB NUMPAT (distinct patterns); the number of
 * channels with a subscriber (INFO's pubsub_channels). ps may be NULL (all 0). */
size_t pubsub_numsub(const struct pubsub *ps, const char *ch, size_t len);
size_t pubsub_npatterns(const struct pubsub *ps);
size_t pubsub_nchannels(const struct pubsub *ps);

/* fn with every channel that has a subscriber (PUBSUB CHANNELS). ps may be NULL. */
void pubsub_each_channel(const struct pubsub *ps,
			 void (*fn)(void *arg, const char *name, size_t len), void *arg);

/*
 * MONITOR's line for a command (Redis's replicationFeedMonitors): "+SECS.USECS [0 ADDR]" and
 * each argument quoted as Redis's sdscatrepr quotes it, space separated, then CRLF, appended
 * to b. usec: Unix time in microseconds.
 */
void pubsub_monitor_line(struct proto_buf *b, uint64_t usec, const char *addr, size_t argc,
			 const char *const *argv, const size_t *argvlen);

/* Append s[0, n) quoted as Redis's sdscatrepr: "..." with \\ \" \n \r \t \a \b escaped, other
 * bytes that are not printable as \xHH (lower-case hex). */
void pubsub_repr(struct proto_buf *b, const char *s, size_t n);

#endif /* BLOSSOMD_PROTO_PUBSUB_H */
