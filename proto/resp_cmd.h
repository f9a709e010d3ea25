/* SPDX-License-Identifier: MIT */
/*
 * The RESP front end (RedisBloom's BF.* family and the Redis commands clients send) over the
 * shared command layer: one parsed command in, its whole reply appended.
 */
#ifndef BLOSSOMD_PROTO_RESP_CMD_H
#define BLOSSOMD_PROTO_RESP_CMD_H

#include "proto/buf.h"
#include "proto/command.h"
#include "proto/resp.h"

/*
 * Run one RESP command (argc >= 1; argc 0 is ignored) and append its whole reply to out,
 * updating the counters. Never fails: problems become RESP errors (on allocation failure,
 * out->failed is set).
 */
/* Whether p[0..n) names a Redis command (any case): one blossomd has, one of Redis 7.0's, or one
 * of a RedisBloom-family module (BF., CF., CMS., TOPK., TDIGEST.). Protocol detection uses it. */
bool resp_cmd_known(const char *p, size_t n);

/* The name of the i-th command of the table (0, 1, ...; lower case), NULL past the last: what
 * COMMAND must describe (the tests check that it does). */
const char *resp_cmd_name_at(size_t i);

void resp_cmd_exec(struct cmd_ctx *c, struct cmd_session *s, const struct proto_argv *av,
		   struct proto_buf *out);

/*
 * Append the error of a change the write-ahead log cannot take (CMD_LOG_FAILED: -MISCONF). The
 * server also puts it in place of a reply it held for a record the log then failed to write.
 * Counts nothing.
 */
void resp_cmd_log_failed(struct proto_buf *out);

#endif /* BLOSSOMD_PROTO_RESP_CMD_H */
