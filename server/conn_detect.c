/* SPDX-License-Identifier: MIT */
/*
 * Which protocol a text/RESP connection speaks, from its first bytes (DESIGN.md §4): bloomd's
 * text protocol or RESP, past any blank lines. Pure functions over the bytes, for conn.c.
 */
#include "server/server_impl.h"

#include <string.h>
#include <strings.h>

#include "proto/resp_cmd.h"
#include "proto/text_cmd.h"

/* The blank lines ("\r\n", "\n") at the front of data[0, len): bytes to skip. */
size_t conn_blank_prefix(const char *data, size_t len)
{
	size_t n = 0;

	while (n < len &&
	       (data[n] == '\n' || (data[n] == '\r' && n + 1 < len && data[n + 1] == '\n')))
		n++;
	return n;
}

/*
 * A connection's protocol, from its first bytes (DESIGN.md §4), past any blank lines (ignored,
 * as Redis ignores them: a person in telnet presses Enter first):
 *   - '*' is RESP;
 *   - a first word that is one of bloomd's own commands ("create", "set", lowercase) is text;
 *   - a Redis command that is not a text command ("BF.ADD users u1", as redis-cli --pipe sends
 *     plain lines; "DBSIZE" typed in telnet; "GET x", answered "unknown command") is RESP, inline;
 *   - blossomd's text extensions that Redis also has, PING and QUIT, and words neither
 *     protocol knows go by the first line's end: CRLF is Redis's inline form (redis-benchmark's
 *     PING_INLINE sends "PING\r\n"), LF alone is text, as bloomd's clients send;
 *   - the other text extensions are text: d, delete, expires (Redis lacks them) and AUTH, whose
 *     token line a text user types in telnet (CRLF): taken as RESP, every command after it
 *     would be answered in RESP.
 * CONN_UNKNOWN while only blank lines came, or the first word (or, where the line end decides,
 * the first line) may still be incomplete; a first line past SRV_DETECT_MAX bytes is text.
 */
enum conn_proto conn_detect(const char *data, size_t len)
{
	size_t n = conn_blank_prefix(data, len);
	const char *nl;

	data += n;
	len -= n;
	n = 0;
	if (len == 0 || (len == 1 && data[0] == '\r'))
		return CONN_UNKNOWN; /* no command yet ("\r": its '\n' is in the next read) */
	if (data[0] == '*')
		return CONN_RESP;
	while (n < len && data[n] != ' ' && data[n] != '\t' && data[n] != '\r' && data[n] != '\n')
		n++;
	if (n == len && len < SRV_DETECT_MAX)
		return CONN_UNKNOWN;
	if (text_cmd_bloomd(data, n) || (n == 4 && strncasecmp(data, "auth", 4) == 0))
		return CONN_TEXT;
	if (resp_cmd_known(data, n) != text_cmd_known(data, n))
		return resp_cmd_known(data, n) ? CONN_RESP : CONN_TEXT;
	nl = memchr(data, '\n', len < SRV_DETECT_MAX ? len : SRV_DETECT_MAX);
	if (!nl)
		return len < SRV_DETECT_MAX ? CONN_UNKNOWN : CONN_TEXT;
	return nl > data && nl[-1] == '\r' ? CONN_RESP : CONN_TEXT;
}
