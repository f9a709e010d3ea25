/* SPDX-License-Identifier: MIT */
/*
 * The RESP codec fed in fragments (sizes from the input's first bytes, see fuzz_common.h),
 * resuming with proto_resp_state as the server does, each command run through
 * resp_cmd_exec(). The same bytes are also parsed in one piece: both ways must find the
 * same commands (count, bytes consumed, arguments) and end the same way, and
 * proto_resp_need() must keep its contract.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "proto/buf.h"
#include "proto/resp.h"
#include "proto/resp_cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct proto_limits lim = {
    .max_bulk_bytes = 256,
    .max_args = 16,
    .max_line_bytes = 256,
};

/* FNV-1a over the commands seen, to compare the two parses. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t mix_cmd(uint64_t h, size_t consumed, const struct proto_argv *av)
{
	h = mix(h, &consumed, sizeof(consumed));
	h = mix(h, &av->argc, sizeof(av->argc));
	for (size_t i = 0; i < av->argc; i++) {
		h = mix(h, &av->argvlen[i], sizeof(av->argvlen[i]));
		h = mix(h, av->argv[i], av->argvlen[i]);
	}
	return h;
}

/* Whole input at once. Returns the hash; *end_rc the final result (0 or < 0). */
static uint64_t parse_whole(const char *buf, size_t len, ssize_t *end_rc)
{
	struct proto_resp_state st;
	struct proto_argv av;
	uint64_t h = 0xcbf29ce484222325ull;
	size_t start = 0;
	ssize_t r;
	proto_resp_state_init(&st);
	proto_argv_init(&av);
	while ((r = proto_resp_parse(&st, buf + start, len - start, &lim, &av, NULL)) > 0) {
		h = mix_cmd(h, (size_t)r, &av);
		start += (size_t)r;
	}
	proto_argv_free(&av);
	*end_rc = r;
	return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_frags fr;
	fuzz_frags_init(&fr, &data, &size);
	const char *in = (const char *)data;

	struct cmd_ctx ctx;
	struct cmd_session sess;
	struct proto_buf out;
	struct proto_resp_state st;
	struct proto_argv av;
	fuzz_ctx_init(&ctx);
	cmd_session_init(&sess, 1);
	proto_buf_init(&out);
	proto_resp_state_init(&st);
	proto_argv_init(&av);

	/* Each fragment is copied into a fresh buffer holding the unconsumed bytes, so a parser
	 * that kept a pointer into an old buffer would be caught by ASan. */
	char *rbuf = NULL;
	size_t start = 0, end = 0, fed = 0; /* rbuf[0..end-start) = in[start..end) */
	uint64_t h = 0xcbf29ce484222325ull;
	ssize_t r = 0;
	bool stop = false;

	while (fed < size && !stop) {
		size_t n = fuzz_frags_next(&fr);
		if (n > size - fed)
			n = size - fed;
		fed += n;
		end = fed;
		free(rbuf);
		rbuf = malloc(end - start);
		if (!rbuf)
			abort();
		memcpy(rbuf, in + start, end - start);
		size_t off = 0; /* commands consumed from this rbuf */
		for (;;) {
			size_t len = end - start;
			const char *msg;
			r = proto_resp_parse(&st, rbuf + off, len, &lim, &av, &msg);
			if (r == 0) {
				if (av.argc != 0 || msg)
					abort();
				size_t need = proto_resp_need(&st);
				if (need <= len)
					abort(); /* proto_resp_need() must exceed len */
				break;
			}
			if (r < 0) {
				if ((r == -EPROTO) != (msg != NULL))
					abort();
				stop = true;
				break;
			}
			if ((size_t)r > len)
				abort();
			h = mix_cmd(h, (size_t)r, &av);
			if (av.argc > 0 && !sess.close_after) {
				proto_buf_reset(&out);
				resp_cmd_exec(&ctx, &sess, &av, &out);
			}
			start += (size_t)r;
			off += (size_t)r;
		}
	}

	/* The same bytes in one piece: same commands, same ending. */
	ssize_t whole_rc;
	uint64_t wh = parse_whole(in, size, &whole_rc);
	if (stop) {
		/* The error came at some fragment; the whole parse must stop with the same error
		 * after the same commands. */
		if (wh != h || whole_rc != r)
			abort();
	} else if (wh != h || whole_rc != 0) {
		abort();
	}

	free(rbuf);
	proto_argv_free(&av);
	proto_buf_free(&out);
	cmd_session_free(&sess);
	fuzz_ctx_free(&ctx);
	return 0;
}
