/* SPDX-License-Identifier: MIT */
/*
 * Service-manager notifications (sd_notify(3)) and the systemd watchdog, for Type=notify.
 *
 * Under systemd, $NOTIFY_SOCKET names the socket these messages go to; without it (a daemon
 * started by hand, or a build without libsystemd, BLOSSOMD_SYSTEMD undefined) every call
 * here does nothing and succeeds. Messages sent over a lifetime:
 *
 *	STATUS=loading snapshots from ...      while starting (srv_notify_status())
 *	READY=1 + STATUS=...                   once listening and loaded (srv_notify_ready())
 *	RELOADING=1 + MONOTONIC_USEC=... + STATUS=...   SIGHUP received (srv_notify_reloading())
 *	READY=1 + STATUS=...                   reload finished, applied or not
 *	WATCHDOG=1                             every half $WATCHDOG_USEC, from a loop timer
 *	STOPPING=1 + STATUS=...                shutdown begins (srv_notify_stopping())
 *
 * The watchdog ping comes from a uv_timer on the loop, so it stops when the loop thread
 * stops making progress, which is what WatchdogSec= is meant to catch. Loop thread only.
 */
#ifndef BLOSSOMD_SERVER_NOTIFY_H
#define BLOSSOMD_SERVER_NOTIFY_H

#include <stdint.h>
#include <uv.h>

struct srv_notify {
	uv_timer_t watchdog;  /* initialised only when watchdog_ms != 0; data = this struct */
	uint64_t watchdog_ms; /* ping interval (half of $WATCHDOG_USEC), 0 = no watchdog */
};

/*
 * Read $WATCHDOG_USEC/$WATCHDOG_PID (sd_watchdog_enabled(3)) and, if the watchdog is on for
 * this process, start the ping timer on loop. The timer is an ordinary handle of the loop:
 * whoever closes every handle (uv_walk + uv_close) stops it, with no callback needed since
 * n is not freed by it. Returns 0 (also when there is no watchdog) or a libuv error from
 * uv_timer_init()/uv_timer_start() (logged).
 */
int srv_notify_init(struct srv_notify *n, uv_loop_t *loop);

/*
 * Send "READY=1" and "STATUS=" + the formatted text (one line; keep it short, systemctl
 * status shows it). Failures to send are logged at debug level and otherwise ignored: a
 * missing service manager must never stop the daemon.
 */
void srv_notify_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "RELOADING=1", "MONOTONIC_USEC=" (now, CLOCK_MONOTONIC) and "STATUS=reloading ...". Follow
 * it with srv_notify_ready() once the reload is done. */
void srv_notify_reloading(void);

/* "STOPPING=1" and "STATUS=shutting down". */
void srv_notify_stopping(void);

/* "STATUS=" + the formatted text alone (progress while starting, e.g. loading snapshots). */
void srv_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* BLOSSOMD_SERVER_NOTIFY_H */
