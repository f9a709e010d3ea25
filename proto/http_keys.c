/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's key routes: POST /v1/filters/{name}/add, /check and /delete with a
 * {"keys":[...]} or {"keys_b64":[...]} body, and GET and PUT /v1/filters/{name}/keys/{key}.
 * A streamed add (text/plain or ndjson) is http_stream.c's.
 *
 * The answers ({"results":[...]}, {"present":...}, {"added":...}) are written straight into
 * the response buffer: a fixed shape of booleans needs no escaping, and building a cJSON tree
 * for it would cost two allocations per key.
 */
#include "proto/http_api_impl.h"

#include <string.h>

/* {"<field>":[true,false,...]} or {"<field>":bool} for one answer (array false). */
static void emit_bools(struct http_api_response *r, const char *field, const int *res, size_t n,
		       bool array)
{
	struct proto_buf *b = &r->body;

	r->content_type = CT_JSON;
	proto_buf_reserve(b, strlen(field) + 8 + 6 * n);
	proto_buf_append_str(b, "{\"");
	proto_buf_append_str(b, field);
	proto_buf_append_str(b, array ? "\":[" : "\":");
	for (size_t i = 0; i < n; i++) {
		if (i)
			proto_buf_append_char(b, ',');
		if (res[i] > 0)
			proto_buf_append(b, "true", 4);
		else
			proto_buf_append(b, "false", 5);
	}
	proto_buf_append_str(b, array ? "]}" : "}");
}

/*
 * The one field of a keys body: "keys" or "keys_b64". NULL with a problem set for an unknown
 * or repeated field, both, or neither. One pass, stopping at the first unknown or repeated
 * field (cJSON keeps repeats).
 */
static cJSON *keys_field(const cJSON *j, struct http_api_response *r)
{
	cJSON *arr = NULL, *e;
	char label[72];

	for (e = j->child; e; e = e->next) {
		if (strcmp(e->string, "keys") && strcmp(e->string, "keys_b64")) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			return NULL;
		}
		if (arr && strcmp(arr->string, e->string) == 0) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice", e->string);
			return NULL;
		}
		if (arr) {
			http_problem(r, P_BAD_REQUEST, "give \"keys\" or \"keys_b64\", not both");
			return NULL;
		}
		arr = e;
	}
	if (!arr)
		http_problem(r, P_BAD_REQUEST, "missing field \"keys\" (or \"keys_b64\")");
	return arr;
}

/*
 * Point api->sess's first keys (room reserved) at the strings of arr, the field named field,
 * base64-decoded in place for "keys_b64". False with a problem set at the first that is not a
 * string, or not valid base64.
 */
static bool keys_to_session(struct http_api *api, struct http_api_response *r, cJSON *arr,
			    const char *field)
{
	bool b64 = strcmp(field, "keys_b64") == 0;
	cJSON *e;
	size_t i;

	for (i = 0, e = arr->child; e; e = e->next, i++) {
		size_t len;

		if (!cJSON_IsString(e)) {
			http_problem(r, P_BAD_REQUEST, "%s[%zu] must be a string", field, i);
			return false;
		}
		len = strlen(e->valuestring);
		if (b64) {
			/* Decoding only shrinks: decode in place, in the tree's own copy. */
			long m = http_api_base64_decode(e->valuestring, len,
							(unsigned char *)e->valuestring);

			if (m < 0) {
				http_problem(r, P_BAD_REQUEST, "%s[%zu] is not valid base64", field,
					     i);
				return false;
			}
			len = (size_t)m;
		}
		api->sess.keys[i] = e->valuestring;
		api->sess.lens[i] = len;
	}
	return true;
}

/*
 * The keys of a {"keys":[...]} / {"keys_b64":[...]} body, into api->sess (keys point into
 * the returned tree, which the caller deletes after use). NULL with a problem set otherwise.
 */
static cJSON *parse_keys(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, size_t *count)
{
	cJSON *j, *arr, *e;
	const char *field;
	size_t n = 0;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be a JSON object with \"keys\" or "
			     "\"keys_b64\"");
		return NULL;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return NULL;
	arr = keys_field(j, r);
	if (!arr)
		goto fail;
	field = arr->string;
	if (!cJSON_IsArray(arr)) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" must be an array of strings", field);
		goto fail;
	}
	for (e = arr->child; e; e = e->next)
		n++;
	if (n > api->cmd->max_args) {
		http_problem(r, P_TOO_LARGE, "more than max_args (%zu) keys", api->cmd->max_args);
		goto fail;
	}
	if (cmd_session_reserve(&api->sess, n)) {
		http_problem(r, P_NO_MEMORY, "out of memory for %zu keys", n);
		goto fail;
	}
	if (!keys_to_session(api, r, arr, field))
		goto fail;
	*count = n;
	return j;
fail:
	cJSON_Delete(j);
	return NULL;
}

/* Run op over api->sess's n keys and answer with field = the results. */
static void run_keys(struct http_api *api, struct http_api_response *r, struct bf_filter *f,
		     enum cmd_key_op op, size_t n, const char *field, bool array)
{
	struct cmd_session *s = &api->sess;
	size_t done = 0;
	enum cmd_status st = cmd_run_keys(api->cmd, s, f, op, n, &done);

	if (st != CMD_OK) {
		http_problem_status(api, r, st, op == CMD_KEYS_CHECK ? NULL : s->results, done);
		return;
	}
	emit_bools(r, field, s->results, n, array);
}

void http_keys_batch(struct http_api *api, const struct http_api_request *req,
		     struct http_api_response *r, struct bf_filter *f, enum cmd_key_op op)
{
	size_t n;
	cJSON *j = parse_keys(api, req, r, &n);

	if (!j)
		return;
	run_keys(api, r, f, op, n, "results", true);
	cJSON_Delete(j);
}

void http_keys_one(struct http_api *api, struct http_api_response *r, struct bf_filter *f,
		   struct span key, bool put)
{
	if (cmd_session_reserve(&api->sess, 1)) {
		http_api_resp_oom(r);
		return;
	}
	api->sess.keys[0] = key.p;
	api->sess.lens[0] = key.n;
	run_keys(api, r, f, put ? CMD_KEYS_ADD : CMD_KEYS_CHECK, 1, put ? "added" : "present",
		 false);
}
