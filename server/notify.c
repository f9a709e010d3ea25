/* SPDX-License-Identifier: MIT */
/* sd_notify messages and the watchdog timer; see notify.h. */
#include "server/notify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/log.h"

#ifdef BLOSSOMD_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

/* Longest message sent: a few fields and a one-line status. */
#define SRV_NOTIFY_MAX 512

/* Send msg (newline-separated "FIELD=value" lines) to $NOTIFY_SOCKET, if there is one. */
static void srv_notify_send(const char *msg)
{
#ifdef BLOSSOMD_SYSTEMD
	int rc = sd_notify(0, msg);

	if (rc < 0)
		srv_log(SRV_LOG_DEBUG, "sd_notify: %s", strerror(-rc));
#else
	(void)msg;
#endif
}

/* head, then "STATUS=" + the formatted text with any line break turned into a space. */
static void srv_notify_vsend(const char *head, const char *fmt, va_list ap)
{
	char msg[SRV_NOTIFY_MAX];
	int n = snprintf(msg, sizeof(msg), "%sSTATUS=", head);
	size_t len;

	if (n < 0 || (size_t)n >= sizeof(msg))
		return;
	len = (size_t)n;
	if (vsnprintf(msg + len, sizeof(msg) - len, fmt, ap) < 0)
		msg[len] = '\0';
	for (char *p = msg + len; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	srv_notify_send(msg);
}

static void srv_notify_on_watchdog(uv_timer_t *t)
{
	(void)t;
	srv_notify_send("WATCHDOG=1");
}

int srv_notify_init(struct srv_notify *n, uv_loop_t *loop)
{
	uint64_t usec = 0;
	int rc;

	n->watchdog_ms = 0;
#ifdef BLOSSOMD_SYSTEMD
	rc = sd_watchdog_enabled(0, &usec);
	if (rc < 0) {
		srv_log(SRV_LOG_WARNING, "ignoring the watchdog settings: %s", strerror(-rc));
		return 0;
	}
	if (rc == 0)
		return 0;
#endif
	if (usec == 0)
		return 0;
	/* Half the interval, as sd_watchdog_enabled(3) advises; at least 1 ms. */
	n->watchdog_ms = usec / 2000 ? usec / 2000 : 1;
	rc = uv_timer_init(loop, &n->watchdog);
	if (rc) {
		srv_log(SRV_LOG_ERR, "watchdog timer: %s", uv_strerror(rc));
		n->watchdog_ms = 0;
		return rc;
	}
	n->watchdog.data = n;
	rc = uv_timer_start(&n->watchdog, srv_notify_on_watchdog, n->watchdog_ms, n->watchdog_ms);
	if (rc) {
		/* The handle stays initialised: closing the loop's handles closes it. */
		srv_log(SRV_LOG_ERR, "watchdog timer: %s", uv_strerror(rc));
		n->watchdog_ms = 0;
		return rc;
	}
	srv_log(SRV_LOG_DEBUG, "watchdog: pinging every %" PRIu64 " ms", n->watchdog_ms);
	return 0;
}

void srv_notify_ready(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	srv_notify_vsend("READY=1\n", fmt, ap);
	va_end(ap);
}

void srv_notify_status(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	srv_notify_vsend("", fmt, ap);
	va_end(ap);
}

void srv_notify_reloading(void)
{
	char msg[SRV_NOTIFY_MAX];
	struct timespec ts;

	/* systemd 253+ needs the time to tell this reload from an earlier one (Type=notify-reload);
	 * older versions ignore the field. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(msg, sizeof(msg),
		 "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=reloading the configuration",
		 (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
	srv_notify_send(msg);
}

void srv_notify_stopping(void)
{
	srv_notify_send("STOPPING=1\nSTATUS=shutting down");
}
