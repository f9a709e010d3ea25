/* SPDX-License-Identifier: MIT */
/*
 * Integration-test harness: start the real blossomd (path in the BLOSSOMD_BIN environment
 * variable) on a free loopback port with its own temporary directory, talk to it over TCP,
 * and stop it by PID. Blocking sockets with poll() timeouts; no libuv, no libcheck, so the
 * helpers report failures as return values and the tests assert on them.
 *
 * $BLOSSOMD_WRAPPER, if set, is put in front of the binary (words split at spaces), so the
 * whole suite can run the daemon under a tool:
 *	BLOSSOMD_WRAPPER="valgrind -q --leak-check=full --error-exitcode=99" meson test ...
 * (every case asserts exit status 0 after SIGTERM, so any error or leak fails it).
 *
 * A started daemon dies with the test process (PR_SET_PDEATHSIG), and an atexit handler
 * kills what is still running and removes the temporary directories, so a failed assertion
 * never leaves a daemon behind.
 */
#ifndef BLOSSOMD_TESTS_INTEGRATION_HARNESS_H
#define BLOSSOMD_TESTS_INTEGRATION_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct itest_daemon {
	pid_t pid;	     /* 0 when not running */
	int status;	     /* wait status once reaped, else -ESRCH */
	uint16_t port;	     /* text + RESP port (--port) */
	uint16_t http_port;  /* HTTP port (--http-port), free when the daemon started */
	char dir[128];	     /* the mkdtemp() directory holding everything below */
	char data_dir[192];  /* dir/data, passed as --data-dir */
	char conf_path[192]; /* dir/blossomd.conf, passed as --config when a config is given */
	char log_path[192];  /* dir/daemon.log: the daemon's stdout and stderr */
};

/* The daemon binary: $BLOSSOMD_BIN, or NULL if unset. */
const char *itest_bin(void);

/* Raise this process's open-file limit to its hard limit (for tests holding many sockets).
 * Returns the new soft limit. */
long itest_raise_fd_limit(void);

/*
 * How many times slower than usual the daemon may be: $CK_TIMEOUT_MULTIPLIER (Check's own scale
 * of a case's time limit; scripts/test sets 3 for the valgrind pass), 1 when unset. Deadlines for
 * something to happen (a start, a reply, an exit) are multiplied by it: they cost nothing when
 * it happens, and a loaded machine running the daemon under valgrind needs them longer.
 */
int itest_patience(void);

/* A loopback TCP port below the ephemeral range that was free a moment ago (bound, then
 * closed). 0 or -errno. */
int itest_free_port(uint16_t *port);

/*
 * Start blossomd in the foreground: a new temporary directory, config_text (NULL: none)
 * written to conf_path and passed with --config, then --port and --http-port (free ports) and
 * --data-dir, then the NULL-terminated extra arguments (may be NULL). Waits up to 20 s (times
 * itest_patience()) until the port accepts connections. Returns 0 with d filled, or -errno (-ECHILD
 * if the daemon exited during start-up; its log is then in d->log_path until itest_stop()).
 */
int itest_start(struct itest_daemon *d, const char *config_text, const char *const *extra);

/* Replace the config file's contents (for SIGHUP tests). 0 or -errno. */
int itest_write_file(const char *path, const char *text);

/* Send sig to the daemon. 0 or -errno. */
int itest_signal(struct itest_daemon *d, int sig);

/*
 * Stop the daemon: SIGTERM, wait up to timeout_ms for it to exit, then SIGKILL. Removes the
 * temporary directory. Returns the wait status (use WIFEXITED/WEXITSTATUS), or -errno. If
 * the daemon had already exited (itest_wait_exit()), returns its status then.
 */
int itest_stop(struct itest_daemon *d, int timeout_ms);

/* Wait up to timeout_ms for the daemon to exit by itself; returns its wait status, or
 * -ETIMEDOUT. */
int itest_wait_exit(struct itest_daemon *d, int timeout_ms);

/* True if the daemon's log contains needle, waiting up to timeout_ms for it to appear. */
bool itest_log_wait(const struct itest_daemon *d, const char *needle, int timeout_ms);

/* The daemon's log so far, whole, NUL-terminated, in a buffer of the harness's (valid until
 * the next call). */
const char *itest_log(const struct itest_daemon *d);

/*
 * Run the daemon binary with args (NULL-terminated, without argv[0]) to completion, capturing
 * stdout and stderr (each NUL-terminated, truncated to fit). Kills it after timeout_ms.
 * Returns the wait status, or -errno.
 */
int itest_run(const char *const *args, char *out, size_t outlen, char *err, size_t errlen,
	      int timeout_ms);

/* A blocking TCP connection to 127.0.0.1:port (or ::1 with ipv6). Returns the fd or -errno. */
int itest_connect(uint16_t port);
int itest_connect6(uint16_t port);

/* Send all n bytes (MSG_NOSIGNAL). 0 or -errno. */
int itest_send(int fd, const void *p, size_t n);
int itest_send_str(int fd, const char *s);

/*
 * Read until n bytes have arrived, the peer closed, or timeout_ms passed in total.
 * Returns the number of bytes read (< n on EOF or timeout), or -errno if nothing was read
 * and the connection failed.
 */
ssize_t itest_recv_n(int fd, void *buf, size_t n, int timeout_ms);

/*
 * Read until the data read ends with term (compared after each read, so pass a term that can
 * only end the stream), cap - 1 bytes are in, the peer closed, or timeout_ms passed. buf is
 * NUL-terminated. Returns the number of bytes read.
 */
ssize_t itest_recv_until(int fd, char *buf, size_t cap, const char *term, int timeout_ms);

/*
 * Wait until the peer has closed the connection (EOF or reset), discarding anything it still
 * sends, up to timeout_ms. Returns 0 when closed, -ETIMEDOUT if still open. *drained (may be
 * NULL) receives the bytes discarded.
 */
int itest_wait_closed(int fd, int timeout_ms, size_t *drained);

/* Wait until the peer closed or reset the connection, without reading (pending input stays
 * unread). 0 when closed, -ETIMEDOUT if still open, -errno. */
int itest_wait_hup(int fd, int timeout_ms);

/* True if nothing arrives (and the connection stays open) for quiet_ms. */
bool itest_quiet(int fd, int quiet_ms);

/*
 * One exchange: send req, read exactly strlen(expect) bytes and compare. Returns true on a
 * match; on a mismatch prints both to stderr (escaped) and returns false.
 */
bool itest_exchange(int fd, const char *req, const char *expect, int timeout_ms);
bool itest_exchange_n(int fd, const void *req, size_t reqlen, const void *expect, size_t expectlen,
		      int timeout_ms);

/* Milliseconds on a monotonic clock. */
int64_t itest_now_ms(void);
/* The same in microseconds. */
int64_t itest_now_us(void);

/* Sleep for ms milliseconds. */
void itest_sleep_ms(int ms);

#endif /* BLOSSOMD_TESTS_INTEGRATION_HARNESS_H */
