/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's filter resources: GET /v1/filters (the list, paged), PUT, GET, PATCH
 * and DELETE /v1/filters/{name}, and its snapshot and rename; with the FILTER and DETAIL
 * objects they answer with and the parameters of a new filter. The router (http_api.c)
 * decodes the name, and finds the filter (loading a paged-out one) for those that take one.
 */
#include "proto/http_api_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Largest integer a JSON number (a double) holds exactly: the bound of "capacity". */
#define JSON_INT_MAX 9007199254740992.0

/* A filter's name as a JSON string: itself when it is UTF-8, else U+FFFD for each bad byte
 * (the exact bytes then go in "name_b64"). */
static bool add_name(cJSON *j, const struct bf_filter *f)
{
	char fixed[BF_NAME_MAX * 3 + 1];
	size_t o = 0;

	if (http_api_utf8_valid(bf_filter_name(f), f->name_len))
		return cJSON_AddStringToObject(j, "name", bf_filter_name(f)) != NULL;
	for (size_t i = 0; i < f->name_len;) {
		size_t run = 1;

		/* The longest valid sequence starting here (1 to 4 bytes), else one bad byte. */
		for (size_t k = 4; k >= 1; k--) {
			if (i + k <= f->name_len && http_api_utf8_valid(bf_filter_name(f) + i, k)) {
				run = k;
				break;
			}
		}
		if (run == 1 && (unsigned char)bf_filter_name(f)[i] >= 0x80) {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
		} else {
			memcpy(fixed + o, bf_filter_name(f) + i, run);
			o += run;
		}
		i += run;
	}
	fixed[o] = '\0';

	struct proto_buf b64;
	bool ok;

	proto_buf_init(&b64);
	http_api_base64_encode(&b64, bf_filter_name(f), f->name_len);
	proto_buf_append_char(&b64, '\0');
	ok = !b64.failed && cJSON_AddStringToObject(j, "name", fixed) &&
	     cJSON_AddStringToObject(j, "name_b64", b64.data);
	proto_buf_free(&b64);
	return ok;
}

/* "ttl_seconds": the seconds left (rounded as Redis's TTL), or null if it does not expire. */
static bool add_ttl(cJSON *j, const struct bf_filter *f)
{
	uint64_t now = cmd_now_ms();

	if (!bf_filter_expire_ms(f))
		return cJSON_AddNullToObject(j, "ttl_seconds") != NULL;
	return cJSON_AddNumberToObject(j, "ttl_seconds",
				       bf_filter_expire_ms(f) > now
					   ? (double)((bf_filter_expire_ms(f) - now + 500) / 1000)
					   : 0) != NULL;
}

/* The FILTER object of a filter (detail: DETAIL, with parameters and stats). NULL on OOM. */
static cJSON *filter_json(const struct bf_filter *f, bool detail)
{
	cJSON *j = cJSON_CreateObject(), *st;
	bool ok = j && add_name(j, f);
	double fpr;

	ok = ok && cJSON_AddStringToObject(
		       j, "type", f->params->type == BF_TYPE_COUNTING ? "counting" : "bloom");
	ok = ok && cJSON_AddNumberToObject(j, "capacity", (double)bf_filter_capacity(f));
	ok = ok && cJSON_AddNumberToObject(j, "error_rate", f->params->error_rate);
	ok = ok && cJSON_AddNumberToObject(j, "items", (double)bf_filter_items(f));
	ok = ok && cJSON_AddNumberToObject(j, "bytes", (double)bf_filter_bytes(f));
	ok = ok && cJSON_AddNumberToObject(j, "layers", bf_filter_nlayers(f));
	if (ok && detail) {
		fpr = bf_filter_fpr(f);
		ok = cJSON_AddNumberToObject(j, "initial_capacity", (double)f->params->capacity) &&
		     cJSON_AddNumberToObject(j, "expansion", f->params->expansion) &&
		     cJSON_AddBoolToObject(j, "persist", f->params->persist) && add_ttl(j, f) &&
		     /* -0.0 for an empty filter would print as "-0" */
		     cJSON_AddNumberToObject(j, "fpr_estimate", fpr > 0 ? fpr : 0) &&
		     (st = cJSON_AddObjectToObject(j, "stats")) &&
		     cJSON_AddNumberToObject(st, "checks", (double)bf_filter_checks(f)) &&
		     cJSON_AddNumberToObject(st, "check_hits",
					     (double)bf_filter_stat(f, BF_STAT_CHECK_HITS)) &&
		     cJSON_AddNumberToObject(st, "check_misses",
					     (double)bf_filter_stat(f, BF_STAT_CHECK_MISSES)) &&
		     cJSON_AddNumberToObject(st, "sets", (double)bf_filter_sets(f)) &&
		     cJSON_AddNumberToObject(st, "set_hits",
					     (double)bf_filter_stat(f, BF_STAT_SET_HITS)) &&
		     cJSON_AddNumberToObject(st, "set_misses",
					     (double)bf_filter_stat(f, BF_STAT_SET_MISSES)) &&
		     cJSON_AddNumberToObject(st, "deletes", (double)bf_filter_deletes(f)) &&
		     cJSON_AddNumberToObject(st, "delete_hits", (double)bf_filter_delete_hits(f)) &&
		     cJSON_AddNumberToObject(st, "delete_misses",
					     (double)bf_filter_delete_misses(f));
	}
	if (!ok) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* "/v1/filters/" + the name with every byte outside [A-Za-z0-9._~-] percent-encoded. */
static void set_location(struct http_api_response *r, const struct bf_filter *f)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = strlen(strcpy(r->location, "/v1/filters/"));

	for (size_t i = 0; i < f->name_len; i++) {
		unsigned char c = (unsigned char)bf_filter_name(f)[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '~' || c == '-') {
			r->location[o++] = (char)c;
		} else {
			r->location[o++] = '%';
			r->location[o++] = hex[c >> 4];
			r->location[o++] = hex[c & 15];
		}
	}
	r->location[o] = '\0';
}

/* A JSON number that is an integer in [lo, hi]. */
static bool json_int(const cJSON *v, double lo, double hi, double *out)
{
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) ||
	    v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
		return false;
	*out = v->valuedouble;
	return true;
}

enum param_field {
	PF_CAPACITY,
	PF_ERROR_RATE,
	PF_TYPE,
	PF_EXPANSION,
	PF_NONSCALING,
	PF_PERSIST,
	PF_TTL
};

static const char *const param_fields[] = {
    [PF_CAPACITY] = "capacity",	  [PF_ERROR_RATE] = "error_rate", [PF_TYPE] = "type",
    [PF_EXPANSION] = "expansion", [PF_NONSCALING] = "nonscaling", [PF_PERSIST] = "persist",
    [PF_TTL] = "ttl_seconds",
};

/* "ttl_seconds": an integer of seconds >= 1 (*ttl_ms set), or null (0: no expiry). False with
 * a problem set. */
static bool parse_ttl(struct http_api_response *r, const cJSON *e, uint64_t *ttl_ms)
{
	double v;

	if (cJSON_IsNull(e)) {
		*ttl_ms = 0;
		return true;
	}
	if (!json_int(e, 1, HTTP_API_TTL_MAX, &v)) {
		http_problem(r, P_BAD_REQUEST,
			     "\"ttl_seconds\" must be an integer from 1 to %.0f, or null for none",
			     HTTP_API_TTL_MAX);
		return false;
	}
	*ttl_ms = (uint64_t)v * 1000;
	return true;
}

/* One field of the PUT body into p (nonscaling and ttl_seconds apart). False with a problem
 * set. */
static bool parse_param(struct http_api_response *r, enum param_field f, const cJSON *e,
			struct bf_params *p, bool *nonscaling, uint64_t *ttl_ms)
{
	double v;

	switch (f) {
	case PF_TTL:
		return parse_ttl(r, e, ttl_ms);
	case PF_CAPACITY:
		if (!json_int(e, 0, JSON_INT_MAX, &v) ||
		    cmd_check_capacity((uint64_t)v) != CMD_OK) {
			http_problem(r, P_BAD_REQUEST, "\"capacity\" must be an integer >= 1");
			return false;
		}
		p->capacity = (uint64_t)v;
		return true;
	case PF_ERROR_RATE:
		if (!cJSON_IsNumber(e) || cmd_check_error_rate(e->valuedouble) == CMD_BAD_ARGS) {
			http_problem(r, P_BAD_REQUEST,
				     "\"error_rate\" must be a number between 0 and 1 (exclusive)");
			return false;
		}
		p->error_rate = e->valuedouble;
		return true;
	case PF_TYPE:
		if (cJSON_IsString(e) && strcmp(e->valuestring, "bloom") == 0) {
			p->type = BF_TYPE_BLOOM;
		} else if (cJSON_IsString(e) && strcmp(e->valuestring, "counting") == 0) {
			p->type = BF_TYPE_COUNTING;
		} else {
			http_problem(r, P_BAD_REQUEST,
				     "\"type\" must be \"bloom\" or \"counting\"");
			return false;
		}
		return true;
	case PF_EXPANSION:
		if (!json_int(e, 0, JSON_INT_MAX, &v) ||
		    cmd_check_expansion((uint64_t)v) != CMD_OK) {
			http_problem(r, P_BAD_REQUEST,
				     "\"expansion\" must be an integer from 0 to %d",
				     BF_MAX_EXPANSION);
			return false;
		}
		p->expansion = (uint32_t)v;
		return true;
	default:
		if (!cJSON_IsBool(e)) {
			http_problem(r, P_BAD_REQUEST, "\"%s\" must be true or false",
				     param_fields[f]);
			return false;
		}
		if (f == PF_NONSCALING)
			*nonscaling = cJSON_IsTrue(e);
		else
			p->persist = cJSON_IsTrue(e);
		return true;
	}
}

/* The parameters of PUT /v1/filters/{name}: defaults, then the body's fields. */
static bool parse_params(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct bf_params *p, uint64_t *ttl_ms)
{
	const size_t nfields = sizeof(param_fields) / sizeof(param_fields[0]);
	bool nonscaling = false, ok = true;
	unsigned seen = 0;
	char label[72];
	cJSON *j, *e;

	*p = cmd_default_params(api->cmd, CMD_PEER_HTTP);
	if (req->body_len == 0)
		return true;
	j = http_api_parse_body(api, req, r);
	if (!j)
		return false;
	/* One pass, stopping at the first unknown, repeated or bad field. */
	for (e = j->child; ok && e; e = e->next) {
		size_t f = 0;

		while (f < nfields && strcmp(e->string, param_fields[f]) != 0)
			f++;
		if (f == nfields) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			ok = false;
		} else if (seen & (1u << f)) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice",
				     param_fields[f]);
			ok = false;
		} else {
			seen |= 1u << f;
			ok = parse_param(r, (enum param_field)f, e, p, &nonscaling, ttl_ms);
		}
	}
	if (ok && nonscaling) {
		if ((seen & (1u << PF_EXPANSION)) && p->expansion != 0) {
			http_problem(
			    r, P_BAD_REQUEST,
			    "\"nonscaling\": true and a non-zero \"expansion\" contradict");
			ok = false;
		}
		p->expansion = 0;
	}
	cJSON_Delete(j);
	return ok;
}

/* ---------------------------------------------------------------------------------------- */
/* Handlers */

/*
 * A query argument holding (the start of) a filter name, percent-decoded into out (room for
 * BF_NAME_MAX bytes): its length, or -1 with a 400 in r. A malformed escape, or a byte no name
 * can hold (bf_name_valid: a control byte, a space or DEL), is refused rather than matching
 * nothing in silence.
 */
static long name_arg(struct http_api_response *r, const char *field, const char *v, char *out)
{
	char buf[BF_NAME_MAX * 3 + 1];
	size_t n = v ? strlen(v) : 0;
	long len;

	if (n > sizeof(buf)) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" is longer than a filter name (%d bytes)",
			     field, BF_NAME_MAX);
		return -1;
	}
	len = http_api_pct_decode(v ? v : "", n, buf);
	if (len < 0) {
		http_problem(r, P_BAD_REQUEST, "\"%s\": malformed percent-encoding", field);
		return -1;
	}
	if (len > BF_NAME_MAX) {
		http_problem(r, P_BAD_REQUEST, "\"%s\" is longer than a filter name (%d bytes)",
			     field, BF_NAME_MAX);
		return -1;
	}
	for (long i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (c <= 0x20 || c == 0x7f) {
			http_problem(
			    r, P_BAD_REQUEST,
			    "\"%s\" holds a byte no filter name can (a control byte, space or "
			    "DEL)",
			    field);
			return -1;
		}
	}
	memcpy(out, buf, (size_t)len);
	return len;
}

/*
 * GET /v1/filters: every filter in name order; with ?prefix= those whose name starts with it,
 * ?after= those after that name, and ?limit=N (1..HTTP_API_LIST_MAX) at most N of them, with
 * "more": whether others follow (the next page: after= the last name). ?detail=true: DETAIL
 * objects (each estimate is a model sum per layer, hence the smaller bound on limit).
 */
void http_filters_list(struct http_api *api, const struct http_api_request *req,
		       struct http_api_response *r)
{
	char prefix[BF_NAME_MAX], after[BF_NAME_MAX];
	long prefix_len = name_arg(r, "prefix", req->q_prefix, prefix), after_len;
	struct bf_filter **list;
	cJSON *j, *arr;
	size_t n, limit = SIZE_MAX;
	bool more = false, detail = false;

	if (prefix_len < 0 || (after_len = name_arg(r, "after", req->q_after, after)) < 0)
		return;
	if (req->q_detail) {
		detail = strcmp(req->q_detail, "true") == 0;
		if (!detail && strcmp(req->q_detail, "false") != 0) {
			http_problem(r, P_BAD_REQUEST, "\"detail\" must be true or false");
			return;
		}
	}

	if (req->q_limit) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(req->q_limit, &end, 10);
		if (!isdigit((unsigned char)req->q_limit[0]) || *end || errno || v < 1 ||
		    v > (detail ? HTTP_API_LIST_DETAIL_MAX : HTTP_API_LIST_MAX)) {
			http_problem(r, P_BAD_REQUEST, "\"limit\" must be an integer from 1 to %d",
				     detail ? HTTP_API_LIST_DETAIL_MAX : HTTP_API_LIST_MAX);
			return;
		}
		limit = (size_t)v;
	} else if (detail) {
		http_problem(r, P_BAD_REQUEST, "detail=true needs \"limit\", from 1 to %d",
			     HTTP_API_LIST_DETAIL_MAX);
		return;
	}
	if (bf_registry_page(api->cmd->reg, prefix, (size_t)prefix_len, after, (size_t)after_len,
			     limit, &list, &n, &more)) {
		http_api_resp_oom(r);
		return;
	}
	j = cJSON_CreateObject();
	arr = j ? cJSON_AddArrayToObject(j, "filters") : NULL;
	uint64_t now = cmd_now_ms();
	for (size_t i = 0; arr && i < n; i++) {
		if (cmd_expired(list[i], now))
			continue; /* its time has come: gone at its next lookup */
		cJSON *f = filter_json(list[i], detail);

		if (!f || !cJSON_AddItemToArray(arr, f)) {
			cJSON_Delete(f);
			arr = NULL;
		}
	}
	/* With a limit, whether more follow (pass the last name as after= for them). */
	if (arr && req->q_limit && !cJSON_AddBoolToObject(j, "more", more))
		arr = NULL;
	free(list);
	if (!arr) {
		cJSON_Delete(j);
		http_api_resp_oom(r);
		return;
	}
	r->content_type = CT_JSON;
	http_api_resp_json(r, j);
}

void http_filters_get(struct http_api_response *r, const struct bf_filter *f)
{
	cJSON *j = filter_json(f, true);

	if (!j) {
		http_api_resp_oom(r);
		return;
	}
	r->content_type = CT_JSON;
	http_api_resp_json(r, j);
}

void http_filters_create(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct span name)
{
	struct bf_filter *f;
	struct bf_params p;
	enum cmd_status st;
	uint64_t ttl_ms = 0;

	if (!bf_name_valid(name.p, name.n)) {
		http_problem_status(api, r, CMD_BAD_NAME, NULL, 0);
		return;
	}
	if (!parse_params(api, req, r, &p, &ttl_ms))
		return;
	st = cmd_create(api->cmd, name.p, name.n, &p, &f);
	if (st == CMD_OK && ttl_ms) {
		st = cmd_set_expire(api->cmd, f, cmd_now_ms() + ttl_ms);
		if (st != CMD_OK)
			cmd_drop(api->cmd, name.p, name.n, true);
	}
	if (st != CMD_OK) {
		http_problem_status(api, r, st, NULL, 0);
		return;
	}
	http_filters_get(r, f);
	if (r->status == 200) {
		r->status = 201;
		set_location(r, f);
	}
}

void http_filters_snapshot(struct http_api *api, const struct http_api_request *req,
			   struct http_api_response *r, struct bf_filter *f)
{
	enum cmd_status st = cmd_flush(api->cmd, f, req->flush_ticket);

	if (api->cmd->write_wait)
		return; /* written in the background: the server handles it again after */
	if (st != CMD_OK) {
		http_problem(r, P_INTERNAL, "the snapshot failed; see the server log");
		return;
	}
	r->content_type = CT_JSON;
	/* A memory-only filter is never written (text flush says Done for it too): not
	 * claimed as flushed. */
	if (!f->params->persist)
		proto_buf_append_str(&r->body, "{\"flushed\":false,\"reason\":\"the filter is "
					       "memory-only (persist false): it is never "
					       "snapshotted\"}");
	else
		proto_buf_append_str(&r->body, "{\"flushed\":true}");
}

/* DELETE /v1/filters/{name}: 204, or the problem (no such filter, the log cannot write). */
void http_filters_drop(struct http_api *api, struct http_api_response *r, struct span name)
{
	enum cmd_status st = cmd_drop(api->cmd, name.p, name.n, true);

	if (st == CMD_OK)
		r->status = 204;
	else
		http_problem_status(api, r, st, NULL, 0);
}

/* PATCH /v1/filters/{name} {"ttl_seconds":N|null}: set or clear the expiry. */
void http_filters_patch(struct http_api *api, const struct http_api_request *req,
			struct http_api_response *r, struct bf_filter *f)
{
	const cJSON *ttl;
	uint64_t ttl_ms;
	cJSON *j;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be {\"ttl_seconds\":N} or "
			     "{\"ttl_seconds\":null}");
		return;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return;
	ttl = j->child;
	if (!ttl || ttl->next || strcmp(ttl->string, "ttl_seconds") != 0) {
		http_problem(r, P_BAD_REQUEST,
			     "the body must be {\"ttl_seconds\":N} or "
			     "{\"ttl_seconds\":null}");
	} else if (parse_ttl(r, ttl, &ttl_ms)) {
		enum cmd_status st =
		    cmd_set_expire(api->cmd, f, ttl_ms ? cmd_now_ms() + ttl_ms : 0);
		if (st != CMD_OK)
			http_problem_status(api, r, st, NULL, 0);
		else
			http_filters_get(r, f);
	}
	cJSON_Delete(j);
}

/* POST /v1/filters/{name}/rename {"to":NAME[, "replace":bool]}. */
void http_filters_rename(struct http_api *api, const struct http_api_request *req,
			 struct http_api_response *r, struct bf_filter *f)
{
	const cJSON *to = NULL, *replace = NULL;
	char label[72];
	cJSON *j, *e;

	if (req->body_len == 0) {
		http_problem(r, P_BAD_REQUEST, "the body must name the new name: {\"to\":\"...\"}");
		return;
	}
	j = http_api_parse_body(api, req, r);
	if (!j)
		return;
	for (e = j->child; e; e = e->next) {
		const cJSON **slot = !strcmp(e->string, "to")	     ? &to
				     : !strcmp(e->string, "replace") ? &replace
								     : NULL;
		if (!slot) {
			http_problem(r, P_BAD_REQUEST, "unknown field \"%s\"",
				     http_api_field_label(e->string, label, sizeof(label)));
			goto out;
		}
		if (*slot) {
			http_problem(r, P_BAD_REQUEST, "field \"%s\" appears twice", e->string);
			goto out;
		}
		*slot = e;
	}
	if (!cJSON_IsString(to)) {
		http_problem(r, P_BAD_REQUEST, "\"to\" must be a string, the new name");
		goto out;
	}
	if (replace && !cJSON_IsBool(replace)) {
		http_problem(r, P_BAD_REQUEST, "\"replace\" must be true or false");
		goto out;
	}
	enum cmd_status st = cmd_rename(api->cmd, bf_filter_name(f), f->name_len, to->valuestring,
					strlen(to->valuestring), !cJSON_IsTrue(replace));
	if (st == CMD_EXISTS)
		http_problem(r, P_FILTER_EXISTS,
			     "the new name is taken; send \"replace\":true to replace that "
			     "filter");
	else if (st != CMD_OK)
		http_problem_status(api, r, st, NULL, 0);
	else
		http_filters_get(r, f);
out:
	cJSON_Delete(j);
}
