/* SPDX-License-Identifier: MIT */
/*
 * The HTTP front end's operational routes, which name no filter and are not counted as
 * commands: /healthz, /readyz (the server's not_ready hook), /metrics (its metrics hook), and
 * the documents built in from doc/: /v1/openapi.yaml and the status page at /.
 */
#include "proto/http_api_impl.h"

static void do_static(struct http_api_response *r, const char *json)
{
	r->content_type = CT_JSON;
	proto_buf_append_str(&r->body, json);
}

bool http_admin_answer(struct http_api *api, struct http_api_response *r, enum http_route route)
{
	const char *why;

	switch (route) {
	case HTTP_ROUTE_HEALTHZ:
		do_static(r, "{\"status\":\"ok\"}");
		return true;
	case HTTP_ROUTE_READYZ:
		why = api->hooks.not_ready ? api->hooks.not_ready(api->hooks.arg) : NULL;
		if (why)
			http_problem(r, P_NOT_READY, "%s", why);
		else
			do_static(r, "{\"status\":\"ready\"}");
		return true;
	case HTTP_ROUTE_METRICS:
		if (!api->hooks.metrics) {
			http_problem(r, P_NOT_FOUND, "no such route");
			return true;
		}
		r->content_type = CT_METRICS;
		api->hooks.metrics(api->hooks.arg, &r->body);
		return true;
	case HTTP_ROUTE_OPENAPI:
		r->content_type = CT_YAML;
		r->data = http_api_openapi_yaml;
		r->len = http_api_openapi_yaml_len;
		return true;
	case HTTP_ROUTE_STATUS:
		r->content_type = CT_HTML;
		r->data = http_api_status_html;
		r->len = http_api_status_html_len;
		return true;
	default:
		return false;
	}
}
