/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's streaming bulk load (its contract is in http_api.h): POST
 * /v1/filters/{name}/add with a text/plain or application/x-ndjson body, gzip'd or not, its
 * keys added in batches as the body arrives, in memory bounded by the longest key and a batch.
 */
#include "proto/http_api_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* Keys added per batch, and the bytes a batch holds at most (beyond one key). */
#define STREAM_BATCH_KEYS  4096
#define STREAM_BATCH_BYTES (256 * 1024)

struct http_api_stream {
	char name[BF_NAME_MAX];
	size_t name_len;
	bool ndjson, gzip, zinit, zdone, skipping;
	/* waiting: its filter was paged out under it (cold_interval, a close) and is loading;
	 * the batch is kept, and grows by what the connection's current piece of body holds,
	 * until it is loaded. add_failed: the filter refused the keys (nothing more is added). */
	bool waiting, add_failed;
	z_stream z;
	struct proto_buf line;	/* the line being read (bounded: see stream_line) */
	struct proto_buf batch; /* the keys of the batch, back to back */
	size_t nkeys, ends_cap;
	size_t *ends; /* where each key of the batch ends in it */
	uint64_t added, present, wait_lsn;
	enum cmd_status st; /* the first failure; CMD_OK while going on */
	const char *why;    /* a failure of the body itself (bad ndjson, bad gzip) */
	/* gzip: bytes decoded, compressed bytes received, and those of them the last feed
	 * did not take (given again first). */
	uint64_t decoded, received;
	size_t left;
	uint64_t lineno;
};

static bool media_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return strncasecmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

bool http_api_stream_wanted(const struct http_api_request *req)
{
	struct span path = {req->path, req->path_len}, name, key;

	return strcmp(req->method, "POST") == 0 &&
	       http_api_route_match(path, &name, &key) == HTTP_ROUTE_ADD &&
	       (media_is(req->content_type, "text/plain") ||
		media_is(req->content_type, "application/x-ndjson"));
}

void http_api_stream_free(struct http_api_stream *st)
{
	if (!st)
		return;
	if (st->zinit)
		inflateEnd(&st->z);
	proto_buf_free(&st->line);
	proto_buf_free(&st->batch);
	free(st->ends);
	free(st);
}

int http_api_stream_begin(struct http_api *api, const struct http_api_request *req,
			  struct http_api_response *resp, struct http_api_stream **out)
{
	struct span path = {req->path, req->path_len}, name, key;
	enum http_route route = http_api_route_match(path, &name, &key);
	struct http_api_stream *st;
	char buf[BF_NAME_MAX * 3 + 1];
	long nl;

	*out = NULL;
	http_api_resp_reset(resp);
	api->cmd->paging = NULL;
	if (http_api_refused(api, req, route, resp)) {
		http_api_finish(api, resp, route);
		return 1;
	}
	nl = name.n <= sizeof(buf) ? http_api_pct_decode(name.p, name.n, buf) : -1;
	if (nl < 0 || !bf_name_valid(buf, (size_t)nl)) {
		http_problem_status(api, resp, CMD_NOT_FOUND, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	if (req->content_encoding && strcasecmp(req->content_encoding, "gzip") != 0 &&
	    strcasecmp(req->content_encoding, "identity") != 0) {
		http_problem(resp, P_MEDIA_TYPE, "Content-Encoding must be gzip or identity");
		http_api_finish(api, resp, route);
		return 1;
	}
	if (cmd_ready(api->cmd, buf, (size_t)nl) != CMD_OK) {
		http_problem_status(api, resp, CMD_PAGED_OUT, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	if (api->cmd->paging)
		return 1; /* loading: called again */
	if (!cmd_lookup(api->cmd, buf, (size_t)nl)) {
		http_problem_status(api, resp, CMD_NOT_FOUND, NULL, 0);
		http_api_finish(api, resp, route);
		return 1;
	}
	st = calloc(1, sizeof(*st));
	if (st) {
		st->ends_cap = STREAM_BATCH_KEYS;
		st->ends = malloc(st->ends_cap * sizeof(*st->ends));
		if (!st->ends) {
			free(st);
			st = NULL;
		}
	}
	if (!st) {
		http_api_resp_oom(resp);
		http_api_finish(api, resp, route);
		return 1;
	}
	memcpy(st->name, buf, (size_t)nl);
	st->name_len = (size_t)nl;
	st->ndjson = media_is(req->content_type, "application/x-ndjson");
	st->gzip = req->content_encoding && strcasecmp(req->content_encoding, "gzip") == 0;
	proto_buf_init(&st->line);
	proto_buf_init(&st->batch);
	if (st->gzip) {
		/* 16 + MAX_WBITS: a gzip stream (header and trailer checked by zlib). */
		if (inflateInit2(&st->z, 16 + MAX_WBITS) != Z_OK) {
			free(st->ends);
			free(st);
			http_api_resp_oom(resp);
			http_api_finish(api, resp, route);
			return 1;
		}
		st->zinit = true;
	}
	*out = st;
	return 0;
}

/* The filter refused the batch (status): nothing more is added. */
static void stream_refused(struct http_api_stream *st, enum cmd_status status)
{
	st->add_failed = true;
	if (st->st == CMD_OK && !st->why)
		st->st = status;
}

/*
 * Add the batch's keys. Its filter paged out under the stream (cold_interval, or a close from
 * another client) is paged in first, as any command's is: the batch is kept (st->waiting,
 * cmd->paging set) and added by the call after the load.
 */
static void stream_flush(struct http_api *api, struct http_api_stream *st)
{
	struct cmd_ctx *c = api->cmd;
	struct cmd_session *s = &api->sess;
	struct bf_filter *f;
	enum cmd_status rc;
	size_t done = 0, start = 0;

	st->waiting = false;
	if (!st->nkeys || st->add_failed)
		goto out;
	f = cmd_lookup(c, st->name, st->name_len);
	if (!f) {
		stream_refused(st, CMD_NOT_FOUND);
		goto out;
	}
	if (f->paged) {
		rc = cmd_ready(c, st->name, st->name_len);
		if (rc != CMD_OK) {
			stream_refused(st, rc); /* its load failed (logged by the load) */
			goto out;
		}
		if (c->paging) {
			st->waiting = true;
			return;
		}
	}
	if (cmd_session_reserve(s, st->nkeys)) {
		stream_refused(st, CMD_NO_MEMORY);
		goto out;
	}
	for (size_t i = 0; i < st->nkeys; i++) {
		s->keys[i] = st->batch.data + start;
		s->lens[i] = st->ends[i] - start;
		start = st->ends[i];
	}
	c->wait_lsn = 0;
	rc = cmd_add(c, f, st->nkeys, s->keys, s->lens, s->results, &done);
	if (rc != CMD_OK)
		stream_refused(st, rc);
	if (c->wait_lsn > st->wait_lsn)
		st->wait_lsn = c->wait_lsn;
	for (size_t i = 0; i < done; i++) {
		if (s->results[i] == 1)
			st->added++;
		else
			st->present++;
	}
out:
	st->nkeys = 0;
	proto_buf_reset(&st->batch);
}

/* The body cannot go on (a status, or why): the keys before it are added first. */
static void stream_fail(struct http_api *api, struct http_api_stream *st, enum cmd_status status,
			const char *why)
{
	stream_flush(api, st);
	if (st->st == CMD_OK && !st->why) {
		st->st = status;
		st->why = why;
	}
}

/*
 * Append the key of one line of an ndjson body (its end taken off) to the batch: true, or
 * false when it gives none (a blank line, skipped; or the body is refused, st says why).
 */
static bool stream_ndjson_key(struct http_api *api, struct http_api_stream *st, const char *p,
			      size_t n)
{
	const char *end = NULL;
	cJSON *j;

	/* One JSON value, with JSON whitespace around it; a line of only whitespace is
	 * skipped as an empty one is. */
	while (n && (*p == ' ' || *p == '\t' || *p == '\r')) {
		p++;
		n--;
	}
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	if (!n)
		return false;
	http_api_json_alloc_failed = false;
	/* A string begins with its quote (cJSON would skip control bytes before it) and
	 * nothing may follow it: "a" "b", "a", "a"] are not one string. */
	j = *p == '"' ? cJSON_ParseWithLengthOpts(p, n, &end, 0) : NULL;
	if (j && end != p + n) {
		cJSON_Delete(j);
		j = NULL;
	}
	if (!cJSON_IsString(j)) {
		cJSON_Delete(j);
		stream_fail(api, st, http_api_json_alloc_failed ? CMD_NO_MEMORY : CMD_OK,
			    http_api_json_alloc_failed ? NULL
						       : "a line of the body is not a JSON string");
		return false;
	}
	/* A JSON string cannot carry NUL here (cJSON ends it there): refused as for
	 * {"keys":[...]}. */
	if (memmem(p, n, "\\u0000", 6)) {
		cJSON_Delete(j);
		stream_fail(api, st, CMD_OK, "JSON strings must not contain NUL (\\u0000)");
		return false;
	}
	size_t kl = strlen(j->valuestring);
	if (kl > api->cmd->max_key_bytes) {
		cJSON_Delete(j);
		stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
		return false;
	}
	proto_buf_append(&st->batch, j->valuestring, kl);
	cJSON_Delete(j);
	return true;
}

/* One whole line (without its end) of the body. */
static void stream_line(struct http_api *api, struct http_api_stream *st, const char *p, size_t n)
{
	if (st->st != CMD_OK || st->why)
		return;
	st->lineno++;
	if (n && p[n - 1] == '\r')
		n--;
	if (!st->ndjson) {
		if (!n)
			return;
		if (n > api->cmd->max_key_bytes) {
			stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
			return;
		}
		proto_buf_append(&st->batch, p, n);
	} else if (!stream_ndjson_key(api, st, p, n)) {
		return;
	}
	if (!st->batch.failed && st->nkeys == st->ends_cap) {
		size_t *e = realloc(st->ends, 2 * st->ends_cap * sizeof(*e));

		if (e) {
			st->ends = e;
			st->ends_cap *= 2;
		}
	}
	if (st->batch.failed || st->nkeys == st->ends_cap) {
		stream_refused(st, CMD_NO_MEMORY); /* the batch is lost: none of it is added */
		return;
	}
	st->ends[st->nkeys++] = st->batch.len;
	if (!st->waiting && (st->nkeys >= STREAM_BATCH_KEYS || st->batch.len >= STREAM_BATCH_BYTES))
		stream_flush(api, st);
}

/* Decoded body bytes: whole lines go to stream_line; a partial one waits in st->line, bounded
 * by the longest line a key may take (a longer one is refused: key too long). */
static void stream_bytes(struct http_api *api, struct http_api_stream *st, const char *p, size_t n)
{
	/* A JSON string escapes a byte in at most 6 (\u00XX), plus its quotes and a \r. */
	size_t max = api->cmd->max_key_bytes * (st->ndjson ? 6 : 1) + 3;

	while (n) {
		const char *nl = memchr(p, '\n', n);
		size_t k = nl ? (size_t)(nl - p) : n;

		if (st->skipping) {
			if (nl)
				st->skipping = false;
		} else if (st->line.len + k > max) {
			st->line.len = 0;
			stream_fail(api, st, CMD_KEY_TOO_LONG, NULL);
			st->skipping = !nl;
		} else if (nl && !st->line.len) {
			stream_line(api, st, p, k);
		} else {
			proto_buf_append(&st->line, p, k);
			if (st->line.failed && st->st == CMD_OK)
				st->st = CMD_NO_MEMORY;
			if (nl) {
				stream_line(api, st, st->line.data, st->line.len);
				proto_buf_reset(&st->line);
			}
		}
		if (!nl)
			break;
		p += k + 1;
		n -= k + 1;
	}
}

static const char gzip_too_many_bytes[] = "max_gzip_bytes";
static const char gzip_too_high_ratio[] = "max_gzip_ratio";

/* Whether n more decoded bytes pass a bound: refused then (413 at the end, the keys before it
 * added). */
static bool stream_gzip_past(struct http_api *api, struct http_api_stream *st, size_t n)
{
	uint64_t x = st->decoded + n, ratio = api->gzip_max_ratio;

	if (api->gzip_max_bytes && x > api->gzip_max_bytes) {
		stream_fail(api, st, CMD_OK, gzip_too_many_bytes);
		return true;
	}
	/* x > ratio * received, without overflow. */
	if (ratio && x && (x - 1) / ratio >= st->received) {
		stream_fail(api, st, CMD_OK, gzip_too_high_ratio);
		return true;
	}
	st->decoded = x;
	return false;
}

/* Inflate what data holds, at most HTTP_API_STREAM_SLICE decoded bytes: the bytes taken. */
static size_t stream_inflate(struct http_api *api, struct http_api_stream *st, const char *data,
			     size_t n)
{
	unsigned char out[64 * 1024];
	size_t sliced = 0;

	st->z.next_in = (unsigned char *)(uintptr_t)data;
	st->z.avail_in = (uInt)n;
	while (sliced < HTTP_API_STREAM_SLICE && !st->why) {
		size_t got;
		int rc;

		st->z.next_out = out;
		st->z.avail_out = sizeof(out);
		rc = inflate(&st->z, Z_NO_FLUSH);
		got = sizeof(out) - st->z.avail_out;
		sliced += got;
		if (stream_gzip_past(api, st, got))
			break;
		stream_bytes(api, st, (const char *)out, got);
		st->zdone = rc == Z_STREAM_END;
		if (rc == Z_STREAM_END) {
			/* Concatenated gzip members (as gzip -c a b makes) go on. */
			if (st->z.avail_in && inflateReset(&st->z) == Z_OK)
				continue;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			stream_fail(api, st, CMD_OK, "the body is not valid gzip");
			break;
		}
		/* All input taken and no output room asked for: the next piece goes on. */
		if (!st->z.avail_in && st->z.avail_out)
			break;
	}
	/* A refused body is read to its end and dropped. */
	return st->why ? n : n - st->z.avail_in;
}

size_t http_api_stream_feed(struct http_api *api, struct http_api_stream *st, const char *data,
			    size_t n)
{
	size_t took;

	api->cmd->paging = NULL;
	if (st->waiting)
		stream_flush(api, st); /* its filter is loaded now (or loading again) */
	if (!st->gzip) {
		stream_bytes(api, st, data, n);
		return n;
	}
	if (st->why)
		return n;
	/* data begins with the st->left bytes the last call did not take. */
	st->received += n - st->left;
	took = stream_inflate(api, st, data, n);
	st->left = n - took;
	return took;
}

int http_api_stream_end(struct http_api *api, struct http_api_stream *st,
			struct http_api_response *resp)
{
	struct cmd_ctx *c = api->cmd;

	c->paging = NULL;
	/* What zlib still holds of the input taken (a few bytes' worth at most). */
	while (st->gzip && !st->why && !st->zdone && !st->waiting) {
		uint64_t before = st->decoded;

		stream_inflate(api, st, "", 0);
		if (st->decoded == before)
			break;
	}
	if (st->line.len && !st->skipping) {
		stream_line(api, st, st->line.data, st->line.len);
		proto_buf_reset(&st->line);
	}
	stream_flush(api, st);
	if (st->waiting)
		return 1; /* its filter is loading: called again once it is loaded */
	http_api_resp_reset(resp);
	if (st->gzip && !st->why && !st->zdone)
		stream_fail(api, st, CMD_OK, "the gzip body ends before its end");
	/* Whatever stopped it, the keys before it stay added: the detail says how many. */
	if (st->why == gzip_too_many_bytes) {
		http_problem(
		    resp, P_TOO_LARGE,
		    "the gzip body decodes to more than max_gzip_bytes (%llu); added before it: "
		    "%llu, present: %llu",
		    (unsigned long long)api->gzip_max_bytes, (unsigned long long)st->added,
		    (unsigned long long)st->present);
	} else if (st->why == gzip_too_high_ratio) {
		http_problem(
		    resp, P_TOO_LARGE,
		    "the gzip body decodes to more than max_gzip_ratio (%llu) times the bytes "
		    "received; added before it: %llu, present: %llu",
		    (unsigned long long)api->gzip_max_ratio, (unsigned long long)st->added,
		    (unsigned long long)st->present);
	} else if (st->why) {
		http_problem(resp, P_BAD_REQUEST,
			     "%s (line %llu); added before it: %llu, present: %llu", st->why,
			     (unsigned long long)st->lineno, (unsigned long long)st->added,
			     (unsigned long long)st->present);
	} else if (st->st != CMD_OK) {
		char d[200];
		enum problem p = http_problem_detail(api, st->st, false, 0, d, sizeof(d));

		http_problem(resp, p, "%s; added before it: %llu, present: %llu", d,
			     (unsigned long long)st->added, (unsigned long long)st->present);
	} else {
		resp->content_type = CT_JSON;
		proto_buf_append_fmt(&resp->body, "{\"added\":%llu,\"present\":%llu}",
				     (unsigned long long)st->added,
				     (unsigned long long)st->present);
	}
	c->wait_lsn = st->wait_lsn;
	http_api_finish(api, resp, HTTP_ROUTE_ADD);
	http_api_stream_free(st);
	return 0;
}
