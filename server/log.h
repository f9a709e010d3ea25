/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, one line per message with a syslog priority prefix that journald reads:
 * "<3>blossomd: bind 127.0.0.1:8673: address already in use\n". The level is set on the loop
 * (at start and on reload); srv_log may be called from any thread (the threadpool logs a long
 * checkpoint's progress).
 */
#ifndef BLOSSOMD_SERVER_LOG_H
#define BLOSSOMD_SERVER_LOG_H

/* syslog priorities, as in <syslog.h> (not included, so its LOG_* macros stay out of scope). */
enum srv_log_level {
	SRV_LOG_EMERG = 0,
	SRV_LOG_ALERT = 1,
	SRV_LOG_CRIT = 2,
	SRV_LOG_ERR = 3,
	SRV_LOG_WARNING = 4,
	SRV_LOG_NOTICE = 5,
	SRV_LOG_INFO = 6,
	SRV_LOG_DEBUG = 7,
};

/* Longest line written, prefix and '\n' included; a longer message is cut and ends in "...". */
#define SRV_LOG_LINE_MAX 1024

/* Messages less important than level (a greater number) are dropped. Default SRV_LOG_INFO.
 * Values outside 0..7 are clamped. */
void srv_log_set_level(int level);
int srv_log_get_level(void);

/* With on false, lines are written without their "<N>" prefix: "blossomd: message\n", as
 * --test-config prints its other messages to a terminal or a unit's ExecStartPre. Default on. */
void srv_log_set_priority_prefix(int on);

/* True if a message at this level would be written (to skip building costly messages). */
int srv_log_enabled(int level);

/*
 * Write "<level>blossomd: " (or "blossomd: ", see srv_log_set_priority_prefix) + the
 * formatted message + "\n" to stderr with one write(2), so
 * lines from concurrent writers never interleave. Any '\n' or '\r' inside the message becomes
 * a space, so one call is always one line, and other control bytes, DEL and bytes >= 0x80
 * become "\xNN" (messages may quote what a client sent, and filter names are any printable
 * bytes), so a line is plain ASCII. Errors writing stderr are ignored; errno is preserved.
 */
void srv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* BLOSSOMD_SERVER_LOG_H */
