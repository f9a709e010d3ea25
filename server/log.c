/* SPDX-License-Identifier: MIT */
/* Logging to stderr with <N> priority prefixes; see log.h. */
#include "server/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Atomic: threadpool threads log too (a long checkpoint's progress), while a reload sets it. */
static _Atomic int srv_log_level = SRV_LOG_INFO;
static int srv_log_prefix = 1;

void srv_log_set_level(int level)
{
	if (level < SRV_LOG_EMERG)
		level = SRV_LOG_EMERG;
	if (level > SRV_LOG_DEBUG)
		level = SRV_LOG_DEBUG;
	atomic_store_explicit(&srv_log_level, level, memory_order_relaxed);
}

void srv_log_set_priority_prefix(int on)
{
	srv_log_prefix = on;
}

int srv_log_get_level(void)
{
	return atomic_load_explicit(&srv_log_level, memory_order_relaxed);
}

int srv_log_enabled(int level)
{
	return level <= atomic_load_explicit(&srv_log_level, memory_order_relaxed);
}

void srv_log(int level, const char *fmt, ...)
{
	static const char ellipsis[] = "...", hex[] = "0123456789abcdef";
	char msg[SRV_LOG_LINE_MAX], line[SRV_LOG_LINE_MAX];
	int saved = errno;
	va_list ap;
	size_t len, i;

	if (!srv_log_enabled(level))
		return;
	if (level < SRV_LOG_EMERG)
		level = SRV_LOG_EMERG;
	if (srv_log_prefix)
		len = (size_t)snprintf(line, sizeof(line), "<%d>blossomd: ", level);
	else
		len = (size_t)snprintf(line, sizeof(line), "blossomd: ");
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t mlen = n < 0 ? 0 : (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1;
	/*
	 * Messages may quote client bytes (filter names are any printable bytes, >= 0x80
	 * included): keep the line one line, ASCII, and free of control codes. '\n' and '\r'
	 * become a space; other control bytes, DEL and bytes >= 0x80 become \xNN.
	 */
	bool cut = mlen < (size_t)(n < 0 ? 0 : n);
	for (i = 0; i < mlen; i++) {
		unsigned char ch = (unsigned char)msg[i];
		bool esc = (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch >= 0x7f;
		/* Room for this byte, a "..." in case more follows, and the '\n'. */
		if (len + (esc ? 4 : 1) + sizeof(ellipsis) > sizeof(line)) {
			cut = true;
			break;
		}
		if (esc) {
			line[len++] = '\\';
			line[len++] = 'x';
			line[len++] = hex[ch >> 4];
			line[len++] = hex[ch & 15];
		} else {
			line[len++] = ch == '\n' || ch == '\r' ? ' ' : (char)ch;
		}
	}
	if (cut) {
		memcpy(line + len, ellipsis, sizeof(ellipsis) - 1);
		len += sizeof(ellipsis) - 1;
	}
	line[len++] = '\n';
	/* One write per line; a short write to stderr is not retried (nothing better to do). */
	if (write(STDERR_FILENO, line, len) < 0) {
		/* ignored: logging must never stop the daemon */
	}
	errno = saved;
}
