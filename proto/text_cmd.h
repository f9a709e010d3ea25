/* SPDX-License-Identifier: MIT */
/*
 * The text front end (bloomd's protocol) over the shared command layer: one line in, its whole
 * reply appended. Protocol reference: README, "Text protocol".
 */
#ifndef BLOSSOMD_PROTO_TEXT_CMD_H
#define BLOSSOMD_PROTO_TEXT_CMD_H

#include <stddef.h>

#include "proto/buf.h"
#include "proto/command.h"

/*
 * Run one text-protocol line (without its "\n" / "\r\n") and append its whole reply to out,
 * updating the counters. Never fails: problems become replies (on allocation failure,
 * out->failed is set).
 */
/* Whether p[0..n) names a text protocol command (with that protocol's rules of case). */
bool text_cmd_known(const char *p, size_t n);

/* Whether p[0..n) is one of bloomd's own commands (lowercase, as bloomd has them), not one of
 * blossomd's extensions (ping, quit, auth, d/delete, expires). */
bool text_cmd_bloomd(const char *p, size_t n);

void text_cmd_exec(struct cmd_ctx *c, struct cmd_session *s, const char *line, size_t len,
		   struct proto_buf *out);

/*
 * Append the reply of a change the write-ahead log cannot take (CMD_LOG_FAILED: "Internal
 * Error"). The server also puts it in place of a reply it held for a record the log then failed
 * to write. Counts nothing.
 */
void text_cmd_log_failed(struct proto_buf *out);

#endif /* BLOSSOMD_PROTO_TEXT_CMD_H */
