/* SPDX-License-Identifier: MIT */
/*
 * The HTTP route/JSON mapping (proto/http_api.h), no sockets. Input layout:
 *   byte 0       bits 0-2: method; bits 3-4: Content-Type; bit 5: a token is configured;
 *                bit 6: answer with http_api_refuse() instead (bit 7: which refusal)
 *   then         the raw path, up to the first '\n'
 *   then         (only with bit 5) the Authorization header, up to the next '\n'
 *   the rest     the body
 * Each input runs two requests over the same registry: the request, then GET of the same
 * path without a body, so a filter created by the first is looked at by the second.
 */
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "proto/http_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const methods[8] = {"GET",	 "HEAD",  "PUT",     "POST",
				       "DELETE", "PATCH", "OPTIONS", "get"};
static const char *const ctypes[4] = {NULL, "application/json", "text/plain",
				      "application/json; charset=utf-8"};

/* The bytes up to the next '\n' (not included), advancing past it. */
static const char *take_line(const char **p, size_t *n, size_t *len)
{
	const char *s = *p;
	const char *nl = memchr(s, '\n', *n);
	*len = nl ? (size_t)(nl - s) : *n;
	*p += *len + (nl ? 1 : 0);
	*n -= *len + (nl ? 1 : 0);
	return s;
}

static void check_response(const struct http_api_response *r)
{
	if (r->status < 100 || r->status > 599 || (r->len && !r->data))
		abort();
	if (r->status == 405 && !r->allow)
		abort();
	if (r->status == 401 && !r->www_authenticate)
		abort();
	if (memchr(r->location, '\0', sizeof(r->location)) == NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t sel = data[0];
	const char *p = (const char *)data + 1;
	size_t n = size - 1;

	struct http_api_request req = {
	    .method = methods[sel & 7],
	    .content_type = ctypes[(sel >> 3) & 3],
	};
	req.path = take_line(&p, &n, &req.path_len);

	/* The header must be a NUL-terminated string. */
	char *auth = NULL;
	const char *token = NULL;
	if (sel & 0x20) {
		size_t alen;
		const char *a = take_line(&p, &n, &alen);
		auth = strndup(a, alen);
		if (!auth)
			abort();
		req.authorization = auth;
		token = "0123456789abcdef0123456789abcdef";
	}
	req.body = n ? p : NULL;
	req.body_len = n;

	struct cmd_ctx ctx;
	struct http_api api;
	struct http_api_response resp;
	fuzz_ctx_init(&ctx);
	http_api_init(&api, &ctx, NULL);
	api.token = token;
	http_api_response_init(&resp);

	if (sel & 0x40)
		http_api_refuse(&api, &req,
				(sel & 0x80) ? HTTP_REFUSE_TOO_LARGE : HTTP_REFUSE_FRAMING, 1024,
				&resp);
	else
		http_api_handle(&api, &req, &resp);
	check_response(&resp);

	struct http_api_request get = req;
	get.method = "GET";
	get.content_type = NULL;
	get.body = NULL;
	get.body_len = 0;
	http_api_handle(&api, &get, &resp);
	check_response(&resp);

	http_api_response_free(&resp);
	http_api_free(&api);
	fuzz_ctx_free(&ctx);
	free(auth);
	return 0;
}
