/* SPDX-License-Identifier: MIT */
/* Logging to stderr with <N> priority prefixes; see log.h. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int srv_log_level = SRV_LOG_INFO;

void srv_log_set_level(int level)
{
	if (level < SRV_LOG_EMERG)
		level = SRV_LOG_EMERG;
	if (level > SRV_LOG_DEBUG)
		level = SRV_LOG_DEBUG;
	srv_log_level = level;
}

int srv_log_get_level(void)
{
	return srv_log_level;
}

int srv_log_enabled(int level)
{
	return level <= srv_log_level;
}

void srv_log(int level, const char *fmt, ...)
{
	static const char ellipsis[] = "...";
	char line[SRV_LOG_LINE_MAX];
	int saved = errno;
	va_list ap;
	int prefix, n;
	size_t len, i;

	if (!srv_log_enabled(level))
		return;
	if (level < SRV_LOG_EMERG)
		level = SRV_LOG_EMERG;
	prefix = snprintf(line, sizeof(line), "<%d>blossomd: ", level);
	va_start(ap, fmt);
	n = vsnprintf(line + prefix, sizeof(line) - (size_t)prefix, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	len = (size_t)prefix + (size_t)n;
	/* Room for the '\n': cut long messages and mark the cut. */
	if (len > sizeof(line) - 1) {
		len = sizeof(line) - 1;
		memcpy(line + len - (sizeof(ellipsis) - 1), ellipsis, sizeof(ellipsis) - 1);
	}
	/* Messages may quote client bytes: keep the line one line, and free of control codes. */
	for (i = (size_t)prefix; i < len; i++) {
		unsigned char ch = (unsigned char)line[i];

		if (ch == '\n' || ch == '\r')
			line[i] = ' ';
		else if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			line[i] = '?';
	}
	line[len++] = '\n';
	/* One write per line; a short write to stderr is not retried (nothing better to do). */
	if (write(STDERR_FILENO, line, len) < 0) {
		/* ignored: logging must never stop the daemon */
	}
	errno = saved;
}
