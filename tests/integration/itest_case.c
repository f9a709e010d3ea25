/* SPDX-License-Identifier: MIT */
/* Check-level helpers for cases with a data directory and exact conversations; see itest_case.h. */
#define ITEST_CASE_IMPL
#include "tests/integration/itest_case.h"

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

char case_dir[256];

static struct itest_daemon *case_daemon; /* the including file's d */
static int case_ms = 5000;		 /* and its T */

void itest_case_bind(struct itest_daemon *daemon, int timeout_ms)
{
	case_daemon = daemon;
	case_ms = timeout_ms;
}

const char *esc(const char *s)
{
	static char buf[4][1024];
	static int i;
	size_t o = 0;

	i = (i + 1) % 4;
	for (; *s && o + 3 < sizeof(buf[i]); s++) {
		if (*s == '\r' || *s == '\n') {
			buf[i][o++] = '\\';
			buf[i][o++] = *s == '\r' ? 'r' : 'n';
		} else {
			buf[i][o++] = *s;
		}
	}
	buf[i][o] = '\0';
	return buf[i];
}

/* ---------------------------------------------------------------------------------------- */
/* The case's data directory */

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static void case_dir_remove(void)
{
	if (case_dir[0])
		nftw(case_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	case_dir[0] = '\0';
}

void data_dir_new(void)
{
	static bool registered;

	if (!registered) {
		atexit(case_dir_remove);
		registered = true;
	}
	case_dir_remove();
	FMT(case_dir, "/tmp/blossomd-%s-XXXXXX", program_invocation_short_name);
	ck_assert_ptr_nonnull(mkdtemp(case_dir));
}

const char *path_in(const char *file)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	FMT(buf[i], "%s/%s", case_dir, file);
	return buf[i];
}

bool exists(const char *file)
{
	return access(path_in(file), F_OK) == 0;
}

/* The bytes of case_dir/file (malloc'd), or NULL if it cannot be opened. */
static unsigned char *slurp_or_null(const char *file, size_t *len)
{
	FILE *f = fopen(path_in(file), "rb");
	unsigned char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

unsigned char *slurp(const char *file, size_t *len)
{
	unsigned char *buf = slurp_or_null(file, len);

	ck_assert_msg(buf != NULL, "cannot open %s", file);
	return buf;
}

void spit(const char *file, const void *p, size_t len)
{
	FILE *f = fopen(path_in(file), "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

const char *pack_with(const char *name)
{
	static char file[32];

	for (int i = 0; i < 16; i++) {
		unsigned char *buf;
		size_t n;
		bool hit;

		snprintf(file, sizeof(file), "pack-%02d.bpack", i);
		buf = slurp_or_null(file, &n);
		if (!buf)
			continue;
		hit = memmem(buf, n, name, strlen(name)) != NULL;
		free(buf);
		if (hit)
			return file;
	}
	return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* RESP */

/* The length of the complete RESP value at p[0, n), or 0 if it is not complete yet. */
static size_t resp_complete(const char *p, size_t n)
{
	const char *eol = memmem(p, n, "\r\n", 2);
	size_t head;
	long v;

	if (!eol)
		return 0;
	head = (size_t)(eol - p) + 2;
	switch (p[0]) {
	case '+':
	case '-':
	case ':':
		return head;
	case '$':
	case '=':
		v = atol(p + 1);
		if (v < 0)
			return head;
		return n >= head + (size_t)v + 2 ? head + (size_t)v + 2 : 0;
	case '*':
		v = atol(p + 1);
		for (long i = 0; i < v; i++) {
			size_t one = head < n ? resp_complete(p + head, n - head) : 0;

			if (!one)
				return 0;
			head += one;
		}
		return head;
	default:
		ck_abort_msg("not RESP: %s", esc(p));
		return 0;
	}
}

/* Send out[0, len) (NUL-terminated, one command) and read its whole reply (static). */
static const char *resp_round_trip(int fd, const char *out, size_t len)
{
	static char in[1 << 16];
	size_t n = 0;

	ck_assert_int_eq(itest_send(fd, out, len), 0);
	while (!n || !resp_complete(in, n)) {
		ssize_t r = itest_recv_until(fd, in + n, sizeof(in) - n, "\r\n", case_ms);

		ck_assert_msg(r > 0, "no reply to %s", esc(out));
		n += (size_t)r;
	}
	ck_assert_uint_eq(resp_complete(in, n), n);
	in[n] = '\0';
	return in;
}

void resp_encode(char *out, size_t cap, size_t *len, const char *words)
{
	char copy[4096], *save = NULL;
	const char *w[64];
	int n = 0;

	FMT(copy, "%s", words);
	for (char *t = strtok_r(copy, " ", &save); t && n < 64; t = strtok_r(NULL, " ", &save))
		w[n++] = t;
	*len += (size_t)snprintf(out + *len, cap - *len, "*%d\r\n", n);
	for (int i = 0; i < n; i++)
		*len +=
		    (size_t)snprintf(out + *len, cap - *len, "$%zu\r\n%s\r\n", strlen(w[i]), w[i]);
	ck_assert_uint_lt(*len, cap);
}

const char *callv(int fd, int argc, const char *const *argv, const size_t *lens)
{
	static char out[1 << 16];
	size_t len = 0;

	len += (size_t)snprintf(out, sizeof(out), "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		ck_assert_uint_lt(len + lens[i] + 32, sizeof(out));
		len += (size_t)snprintf(out + len, sizeof(out) - len, "$%zu\r\n", lens[i]);
		memcpy(out + len, argv[i], lens[i]);
		len += lens[i];
		memcpy(out + len, "\r\n", 2);
		len += 2;
	}
	out[len] = '\0';
	return resp_round_trip(fd, out, len);
}

const char *call(int fd, const char *words)
{
	static char out[8192];
	size_t len = 0;

	resp_encode(out, sizeof(out), &len, words);
	return resp_round_trip(fd, out, len);
}

/* The command "cmd filter <tag>:<from> ... <tag>:<from + m - 1>" (m at most 200), sent, its reply
 * returned. */
static const char *resp_keys_cmd(int fd, const char *cmd, const char *filter, const char *tag,
				 unsigned from, unsigned m)
{
	static char keys[200][64];
	const char *argv[202] = {cmd, filter};
	size_t lens[202] = {strlen(cmd), strlen(filter)};

	for (unsigned i = 0; i < m; i++) {
		lens[2 + i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "%s:%u", tag, from + i);
		argv[2 + i] = keys[i];
	}
	return callv(fd, (int)m + 2, argv, lens);
}

void resp_add_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	static char expect[200 * 4 + 16];

	for (unsigned from = 0; from < n; from += 200) {
		unsigned m = n - from < 200 ? n - from : 200;
		size_t el = (size_t)snprintf(expect, sizeof(expect), "*%u\r\n", m);

		for (unsigned i = 0; i < m; i++) {
			memcpy(expect + el, ":1\r\n", 5);
			el += 4;
		}
		EQ(resp_keys_cmd(fd, "BF.MADD", filter, tag, from, m), expect);
	}
}

unsigned resp_count_keys(int fd, const char *filter, const char *tag, unsigned n)
{
	unsigned present = 0;

	for (unsigned from = 0; from < n; from += 200) {
		unsigned m = n - from < 200 ? n - from : 200;
		const char *r = resp_keys_cmd(fd, "BF.MEXISTS", filter, tag, from, m);

		ck_assert_msg(r[0] == '*' && (unsigned)atoi(r + 1) == m, "%s", esc(r));
		for (const char *p = strstr(r, "\r\n:"); p; p = strstr(p + 1, "\r\n:"))
			present += p[3] == '1';
	}
	return present;
}

void absent(int fd, const char *name)
{
	char cmd[256];

	FMT(cmd, "EXISTS %s", name);
	ck_assert_msg(!strcmp(call(fd, cmd), ":0\r\n"), "%s exists", name);
}

void bgsave_done(int fd)
{
	int64_t t0 = itest_now_ms();

	while (strstr(call(fd, "INFO persistence"), "rdb_bgsave_in_progress:1\r\n")) {
		ck_assert_msg(itest_now_ms() - t0 < case_ms, "a background save ran for %d ms",
			      case_ms);
		itest_sleep_ms(10);
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Text protocol and HTTP */

const char *txt(int fd, const char *line)
{
	static char buf[64 * 1024];
	size_t n = 0;

	ck_assert_int_eq(itest_send_str(fd, line), 0);
	ck_assert_int_eq(itest_send_str(fd, "\n"), 0);
	for (;;) {
		ssize_t r = itest_recv_until(fd, buf + n, sizeof(buf) - n, "\n", case_ms);

		ck_assert_msg(r > 0, "no reply to '%s'", esc(line));
		n += (size_t)r;
		if (strncmp(buf, "START\n", n < 6 ? n : 6))
			break; /* not a START ... END reply */
		if (n >= 4 && !strcmp(buf + n - 4, "END\n"))
			break;
	}
	return buf;
}

const char *http(const char *method, const char *path, const char *body)
{
	static char buf[16384];
	char req[2048];
	size_t got = 0, want;
	const char *cl;
	int fd = itest_connect(case_daemon->http_port);

	ck_assert_int_ge(fd, 0);
	if (!body)
		body = "";
	FMT(req,
	    "%s %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
	    method, path, strlen(body), body);
	ck_assert_int_eq(itest_send_str(fd, req), 0);
	while (got < 4 || memcmp(buf + got - 4, "\r\n\r\n", 4)) {
		ck_assert_uint_lt(got + 1, sizeof(buf));
		ck_assert_msg(itest_recv_n(fd, buf + got, 1, case_ms) == 1, "%s %s: no response",
			      method, path);
		got++;
	}
	buf[got] = '\0';
	cl = strcasestr(buf, "Content-Length: ");
	want = cl ? (size_t)atol(cl + 16) : 0;
	ck_assert_uint_lt(got + want, sizeof(buf));
	ck_assert_int_eq(itest_recv_n(fd, buf + got, want, case_ms), (ssize_t)want);
	buf[got + want] = '\0';
	close(fd);
	return buf;
}
