/* SPDX-License-Identifier: MIT */
/*
 * The text protocol as a connection sees it: the input (after the fragment-size header, see
 * fuzz_common.h) arrives in reads of those sizes; the server's read loop from proto/text.h
 * frames lines (skipping over-long ones) and runs each through text_cmd_exec().
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "proto/buf.h"
#include "proto/resp.h"
#include "proto/text.h"
#include "proto/text_cmd.h"

#define MAX_LINE 128

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_frags fr;
	fuzz_frags_init(&fr, &data, &size);

	struct cmd_ctx ctx;
	struct cmd_session sess;
	struct proto_buf out;
	fuzz_ctx_init(&ctx);
	cmd_session_init(&sess, 1);
	proto_buf_init(&out);

	/* The connection's read buffer: bytes [start, end) are unconsumed. */
	char *rbuf = malloc(size ? size : 1);
	if (!rbuf)
		abort();
	size_t start = 0, end = 0, fed = 0;
	bool skipping = false;

	while (fed < size && !sess.close_after) {
		size_t n = fuzz_frags_next(&fr);
		if (n > size - fed)
			n = size - fed;
		memcpy(rbuf + end, data + fed, n);
		end += n;
		fed += n;
		for (;;) {
			if (skipping) {
				bool done;
				start += proto_text_skip(rbuf + start, end - start, &done);
				if (!done)
					break;
				skipping = false;
			}
			const char *line;
			size_t linelen;
			ssize_t r =
			    proto_text_line(rbuf + start, end - start, MAX_LINE, &line, &linelen);
			if (r == 0)
				break;
			if (r == -E2BIG) {
				skipping = true;
				continue;
			}
			if (r < 0 || (size_t)r > end - start || linelen > MAX_LINE)
				abort(); /* outside proto_text_line()'s contract */
			proto_buf_reset(&out);
			text_cmd_exec(&ctx, &sess, line, linelen, &out);
			start += (size_t)r;
			if (sess.close_after)
				break;
		}
	}

	free(rbuf);
	proto_buf_free(&out);
	cmd_session_free(&sess);
	fuzz_ctx_free(&ctx);
	return 0;
}
