/* SPDX-License-Identifier: MIT */
/* Integration-test harness; see harness.h. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ITEST_MAX_DAEMONS 8
#define ITEST_START_MS	  20000

/* Daemons started and not yet stopped, for the atexit clean-up. */
static struct itest_daemon *itest_running[ITEST_MAX_DAEMONS];
static bool itest_atexit_set;

int64_t itest_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t itest_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void itest_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

const char *itest_bin(void)
{
	return getenv("BLOSSOMD_BIN");
}

long itest_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -1;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_cur;
}

/* Ports are drawn from below the kernel's ephemeral range (32768 and up on Linux), so that no
 * client socket of any test running beside this one can take a daemon's port while it restarts,
 * and at random, so that tests running side by side rarely draw the same one. */
#define FREE_PORT_LOW  20000
#define FREE_PORT_SPAN 12000

int itest_patience(void)
{
	const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
	double x = m ? strtod(m, NULL) : 1;

	return x > 1 && x < 1000 ? (int)x + (x > (int)x) : 1;
}

int itest_free_port(uint16_t *port)
{
	static unsigned seed;
	int rc = -EADDRINUSE;

	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)time(NULL) << 12;
	for (int tries = 0; tries < 100 && rc == -EADDRINUSE; tries++) {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port =
					    htons(FREE_PORT_LOW + rand_r(&seed) % FREE_PORT_SPAN),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -errno;
		rc = bind(fd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0;
		if (!rc)
			*port = ntohs(a.sin_port);
		close(fd);
	}
	return rc;
}

int itest_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc = 0;

	if (!f)
		return -errno;
	if (fputs(text, f) == EOF)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

static int itest_rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static void itest_rm_dir(struct itest_daemon *d)
{
	if (!d->dir[0])
		return;
	/* The directory is ours (mkdtemp) and holds only what the tests and daemon wrote. */
	nftw(d->dir, itest_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	d->dir[0] = '\0';
}

static void itest_forget(struct itest_daemon *d)
{
	for (int i = 0; i < ITEST_MAX_DAEMONS; i++)
		if (itest_running[i] == d)
			itest_running[i] = NULL;
}

static void itest_cleanup(void)
{
	for (int i = 0; i < ITEST_MAX_DAEMONS; i++) {
		struct itest_daemon *d = itest_running[i];

		if (!d)
			continue;
		if (d->pid > 0) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, NULL, 0);
			d->pid = 0;
		}
		itest_rm_dir(d);
		itest_running[i] = NULL;
	}
}

static void itest_remember(struct itest_daemon *d)
{
	if (!itest_atexit_set) {
		atexit(itest_cleanup);
		itest_atexit_set = true;
	}
	for (int i = 0; i < ITEST_MAX_DAEMONS; i++) {
		if (!itest_running[i]) {
			itest_running[i] = d;
			return;
		}
	}
}

/*
 * Put the command prefix from $BLOSSOMD_WRAPPER (words split at spaces, e.g.
 * "valgrind -q --error-exitcode=99 --leak-check=full") and then bin into argv. The words
 * point into a static copy of the variable. Returns the number of entries used.
 */
static size_t itest_argv_prefix(const char **argv, size_t max, const char *bin)
{
	static char words[1024];
	const char *w = getenv("BLOSSOMD_WRAPPER");
	size_t n = 0;
	char *save = NULL;

	if (w && *w) {
		snprintf(words, sizeof(words), "%s", w);
		for (char *t = strtok_r(words, " ", &save); t && n + 2 < max;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	argv[n++] = bin;
	return n;
}

static int itest_try_connect(uint16_t port)
{
	int fd = itest_connect(port);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* Reap the daemon if it exited: its wait status, or -EAGAIN while it runs. */
static int itest_reap(struct itest_daemon *d)
{
	int st;
	pid_t r = waitpid(d->pid, &st, WNOHANG);

	if (r == d->pid) {
		d->pid = 0;
		d->status = st;
		return st;
	}
	return r < 0 ? -errno : -EAGAIN;
}

/* Draw the text and HTTP ports: distinct (the daemon refuses the same port twice). */
static int itest_draw_ports(struct itest_daemon *d)
{
	int rc = itest_free_port(&d->port);

	for (int tries = 0;
	     !rc && (rc = itest_free_port(&d->http_port)) == 0 && d->http_port == d->port; tries++)
		if (tries == 100)
			return -EADDRINUSE;
	return rc;
}

/* Run argv (its ports in portstr and httpstr, d's) with its output in d's log, and wait until
 * the text port accepts. 0, -ECHILD (it exited), -ETIMEDOUT or -errno. */
static int itest_spawn(struct itest_daemon *d, const char *const *argv)
{
	int64_t deadline;
	int rc;

	d->pid = fork();
	if (d->pid < 0) {
		d->pid = 0;
		return -errno;
	}
	if (d->pid == 0) {
		int log = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
		int null = open("/dev/null", O_RDONLY);

		/* Die with the test process, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (log < 0 || null < 0)
			_exit(127);
		dup2(null, STDIN_FILENO);
		dup2(log, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = itest_now_ms() + (int64_t)ITEST_START_MS * itest_patience();
	while (itest_now_ms() < deadline) {
		if (itest_try_connect(d->port) == 0)
			return 0;
		rc = itest_reap(d);
		if (rc >= 0)
			return -ECHILD;
		itest_sleep_ms(10);
	}
	return -ETIMEDOUT;
}

int itest_start(struct itest_daemon *d, const char *config_text, const char *const *extra)
{
	const char *bin = itest_bin();
	const char *argv[64];
	char portstr[16], httpstr[16];
	size_t argc = 0;
	int rc;

	memset(d, 0, sizeof(*d));
	d->status = -ESRCH;
	if (!bin)
		return -ENOENT;
	snprintf(d->dir, sizeof(d->dir), "/tmp/blossomd-itest-XXXXXX");
	if (!mkdtemp(d->dir)) {
		d->dir[0] = '\0';
		return -errno;
	}
	itest_remember(d);
	snprintf(d->data_dir, sizeof(d->data_dir), "%s/data", d->dir);
	snprintf(d->conf_path, sizeof(d->conf_path), "%s/blossomd.conf", d->dir);
	snprintf(d->log_path, sizeof(d->log_path), "%s/daemon.log", d->dir);
	if (mkdir(d->data_dir, 0700))
		return -errno;

	argc = itest_argv_prefix(argv, 32, bin);
	if (config_text) {
		rc = itest_write_file(d->conf_path, config_text);
		if (rc)
			return rc;
		argv[argc++] = "--config";
		argv[argc++] = d->conf_path;
	}
	argv[argc++] = "--port";
	argv[argc++] = portstr;
	argv[argc++] = "--http-port";
	argv[argc++] = httpstr;
	argv[argc++] = "--data-dir";
	argv[argc++] = d->data_dir;
	for (size_t i = 0; extra && extra[i] && argc < 63; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	/* A port drawn free may be taken before the daemon binds it (by a test beside this one
	 * that drew it too): then the daemon exits saying so, and new ports are drawn. */
	for (int tries = 0;; tries++) {
		rc = itest_draw_ports(d);
		if (rc)
			return rc;
		snprintf(portstr, sizeof(portstr), "%u", (unsigned)d->port);
		snprintf(httpstr, sizeof(httpstr), "%u", (unsigned)d->http_port);
		rc = itest_spawn(d, argv);
		if (rc != -ECHILD || tries == 4 ||
		    !strcasestr(itest_log(d), "address already in use"))
			return rc;
	}
}

int itest_signal(struct itest_daemon *d, int sig)
{
	if (d->pid <= 0)
		return -ESRCH;
	return kill(d->pid, sig) ? -errno : 0;
}

int itest_wait_exit(struct itest_daemon *d, int timeout_ms)
{
	int64_t deadline = itest_now_ms() + timeout_ms;
	int rc;

	if (d->pid <= 0)
		return -ESRCH;
	do {
		rc = itest_reap(d);
		if (rc != -EAGAIN)
			return rc;
		itest_sleep_ms(5);
	} while (itest_now_ms() < deadline);
	return -ETIMEDOUT;
}

int itest_stop(struct itest_daemon *d, int timeout_ms)
{
	int rc = d->status;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		rc = itest_wait_exit(d, timeout_ms);
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "harness: blossomd %d ignored SIGTERM; killing it\n",
				(int)d->pid);
			kill(d->pid, SIGKILL);
			waitpid(d->pid, NULL, 0);
			d->pid = 0;
		}
	}
	if (rc < 0 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
		fprintf(stderr, "harness: daemon log:\n%s\n", itest_log(d));
	itest_rm_dir(d);
	itest_forget(d);
	return rc;
}

const char *itest_log(const struct itest_daemon *d)
{
	/* The whole file, however long: under valgrind a forked child's leak report can put
	 * the daemon's later lines past any fixed size. */
	static char *buf;
	static size_t cap;
	size_t n = 0;
	FILE *f = fopen(d->log_path, "r");

	if (!buf && !(buf = malloc(cap = 64 * 1024)))
		abort();
	buf[0] = '\0';
	if (!f)
		return buf;
	for (char *more;; buf = more, cap *= 2) {
		n += fread(buf + n, 1, cap - 1 - n, f);
		if (n + 1 < cap || feof(f) || ferror(f) || !(more = realloc(buf, cap * 2)))
			break;
	}
	buf[n] = '\0';
	fclose(f);
	return buf;
}

bool itest_log_wait(const struct itest_daemon *d, const char *needle, int timeout_ms)
{
	int64_t deadline = itest_now_ms() + timeout_ms;

	for (;;) {
		if (strstr(itest_log(d), needle))
			return true;
		if (itest_now_ms() >= deadline)
			return false;
		itest_sleep_ms(10);
	}
}

/* Read everything from fd until EOF into buf (NUL-terminated, truncated to fit). */
static void itest_slurp(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	char sink[4096];

	for (;;) {
		ssize_t r = read(fd, n + 1 < cap ? buf + n : sink,
				 n + 1 < cap ? cap - 1 - n : sizeof(sink));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (n + 1 < cap)
			n += (size_t)r;
	}
	if (cap)
		buf[n] = '\0';
}

int itest_run(const char *const *args, char *out, size_t outlen, char *err, size_t errlen,
	      int timeout_ms)
{
	const char *bin = itest_bin();
	const char *argv[64];
	char outpath[] = "/tmp/blossomd-itest-out-XXXXXX";
	char errpath[] = "/tmp/blossomd-itest-err-XXXXXX";
	int ofd, efd, st = -ETIMEDOUT;
	size_t argc = 0;
	int64_t deadline;
	pid_t pid;

	if (!bin)
		return -ENOENT;
	argc = itest_argv_prefix(argv, 32, bin);
	for (size_t i = 0; args && args[i] && argc < 63; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	ofd = mkstemp(outpath);
	efd = mkstemp(errpath);
	if (ofd < 0 || efd < 0)
		return -errno;
	unlink(outpath);
	unlink(errpath);

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, STDIN_FILENO);
		dup2(ofd, STDOUT_FILENO);
		dup2(efd, STDERR_FILENO);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = itest_now_ms() + timeout_ms;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (itest_now_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			st = -ETIMEDOUT;
			break;
		}
		itest_sleep_ms(5);
	}
	lseek(ofd, 0, SEEK_SET);
	lseek(efd, 0, SEEK_SET);
	itest_slurp(ofd, out, outlen);
	itest_slurp(efd, err, errlen);
	close(ofd);
	close(efd);
	return st;
}

static int itest_connect_sa(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -errno;
	if (connect(fd, sa, len)) {
		int e = errno;

		close(fd);
		return -e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int itest_connect(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	return itest_connect_sa((struct sockaddr *)&a, sizeof(a));
}

int itest_connect6(uint16_t port)
{
	struct sockaddr_in6 a = {
	    .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};

	return itest_connect_sa((struct sockaddr *)&a, sizeof(a));
}

int itest_send(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int itest_send_str(int fd, const char *s)
{
	return itest_send(fd, s, strlen(s));
}

/* Wait for input until deadline: 1 readable, 0 timeout, -errno. */
static int itest_wait_in(int fd, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - itest_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r;

		if (left <= 0)
			return 0;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 1;
	}
}

ssize_t itest_recv_n(int fd, void *buf, size_t n, int timeout_ms)
{
	int64_t deadline = itest_now_ms() + timeout_ms;
	size_t got = 0;

	while (got < n) {
		int w = itest_wait_in(fd, deadline);
		ssize_t r;

		if (w <= 0)
			break;
		r = recv(fd, (char *)buf + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return got ? (ssize_t)got : -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

ssize_t itest_recv_until(int fd, char *buf, size_t cap, const char *term, int timeout_ms)
{
	int64_t deadline = itest_now_ms() + timeout_ms;
	size_t tl = strlen(term), got = 0;

	if (!cap)
		return 0;
	buf[0] = '\0';
	while (got + 1 < cap) {
		int w = itest_wait_in(fd, deadline);
		ssize_t r;

		if (w <= 0)
			break;
		r = recv(fd, buf + got, cap - 1 - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		buf[got] = '\0';
		if (got >= tl && memcmp(buf + got - tl, term, tl) == 0)
			break;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

int itest_wait_closed(int fd, int timeout_ms, size_t *drained)
{
	int64_t deadline = itest_now_ms() + timeout_ms;
	char sink[65536];
	size_t total = 0;
	int rc = -ETIMEDOUT;

	for (;;) {
		int w = itest_wait_in(fd, deadline);
		ssize_t r;

		if (w == 0)
			break;
		if (w < 0) {
			rc = 0;
			break;
		}
		r = recv(fd, sink, sizeof(sink), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = 0; /* EOF, or reset */
			break;
		}
		total += (size_t)r;
	}
	if (drained)
		*drained = total;
	return rc;
}

int itest_wait_hup(int fd, int timeout_ms)
{
	int64_t deadline = itest_now_ms() + timeout_ms;

	for (;;) {
		int64_t left = deadline - itest_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLRDHUP};
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0)
			return 0;
	}
}

bool itest_quiet(int fd, int quiet_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, quiet_ms) == 0;
}

/* Print b[0..n) with non-printable bytes escaped, at most 400 bytes. */
static void itest_dump(const char *label, const void *b, size_t n)
{
	const unsigned char *p = b;

	fprintf(stderr, "%s (%zu bytes): \"", label, n);
	for (size_t i = 0; i < n && i < 400; i++) {
		if (p[i] == '\n')
			fputs("\\n", stderr);
		else if (p[i] == '\r')
			fputs("\\r", stderr);
		else if (p[i] < 0x20 || p[i] >= 0x7f)
			fprintf(stderr, "\\x%02x", p[i]);
		else
			fputc(p[i], stderr);
	}
	fprintf(stderr, "%s\"\n", n > 400 ? "..." : "");
}

bool itest_exchange_n(int fd, const void *req, size_t reqlen, const void *expect, size_t expectlen,
		      int timeout_ms)
{
	char *got = malloc(expectlen + 1);
	ssize_t n;
	bool ok;

	if (!got)
		return false;
	if (reqlen && itest_send(fd, req, reqlen)) {
		free(got);
		fprintf(stderr, "harness: send failed: %s\n", strerror(errno));
		return false;
	}
	n = itest_recv_n(fd, got, expectlen, timeout_ms);
	ok = n == (ssize_t)expectlen && memcmp(got, expect, expectlen) == 0;
	if (!ok) {
		itest_dump("harness: sent", req, reqlen);
		itest_dump("harness: expected", expect, expectlen);
		itest_dump("harness: got", got, n > 0 ? (size_t)n : 0);
	}
	free(got);
	return ok;
}

bool itest_exchange(int fd, const char *req, const char *expect, int timeout_ms)
{
	return itest_exchange_n(fd, req, strlen(req), expect, strlen(expect), timeout_ms);
}
