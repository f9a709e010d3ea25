/* SPDX-License-Identifier: MIT */
/*
 * Configuration: one table describes every key (name, type, where it lives in struct config,
 * its range); conf_set() parses and checks a value through it, conf_validate() re-checks a
 * whole struct through it, and conf_load() feeds conf_set() from an INI file via libinih.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* GNU strerror_r, fopen "e" */
#endif

#include "conf/config.h"
#include "core/bf_filter.h" /* BF_MIN_ERROR_RATE */

#include <arpa/inet.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

enum conf_type {
	CONF_STRING,	/* char array; min = least length */
	CONF_ADDRS,	/* char array of comma-separated address literals; min = least length */
	CONF_UINT,	/* unsigned integer of 2, 4 or 8 bytes, plain decimal; min..max */
	CONF_SIZE,	/* as CONF_UINT, with an optional k/m/g suffix */
	CONF_RATE,	/* double, 0 < p < 1 */
	CONF_LOG_LEVEL, /* int, syslog priority 0..7 */
	CONF_CHOICE,	/* int: the index of one of the key's choices */
	CONF_EVENTS,	/* char array of Redis's notify-keyspace-events letters, "" for none */
};

/* The letters of Redis's notify-keyspace-events classes (proto/pubsub.h reads them). */
#define CONF_EVENT_LETTERS "Ag$lshzxeKEtmdn"

struct conf_key {
	const char *name;
	enum conf_type type;
	size_t offset;
	size_t size;
	uint64_t min;
	uint64_t max;
	const char *const *choices; /* CONF_CHOICE: the words, NULL-terminated */
};

#define CONF_FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)

static const char *const conf_wal_names[] = {"off", "on", NULL};
static const char *const conf_wal_fsync_names[] = {"always", "everysec", "no", NULL};

static const struct conf_key conf_keys[] = {
    {"bind", CONF_ADDRS, CONF_FIELD(bind), 1, 0, NULL},
    {"port", CONF_UINT, CONF_FIELD(port), 1, UINT16_MAX, NULL},
    {"http_port", CONF_UINT, CONF_FIELD(http_port), 0, UINT16_MAX, NULL},
    {"data_dir", CONF_STRING, CONF_FIELD(data_dir), 1, 0, NULL},
    {"snapshot_interval", CONF_UINT, CONF_FIELD(snapshot_interval), 0, UINT32_MAX, NULL},
    {"snapshot_pack_bytes", CONF_SIZE, CONF_FIELD(snapshot_pack_bytes), 0, 1u << 30, NULL},
    {"cold_interval", CONF_UINT, CONF_FIELD(cold_interval), 0, UINT32_MAX, NULL},
    {"wal", CONF_CHOICE, CONF_FIELD(wal), 0, 0, conf_wal_names},
    {"wal_fsync", CONF_CHOICE, CONF_FIELD(wal_fsync), 0, 0, conf_wal_fsync_names},
    {"wal_segment_bytes", CONF_SIZE, CONF_FIELD(wal_segment_bytes), 4096, UINT64_MAX, NULL},
    {"wal_max_bytes", CONF_SIZE, CONF_FIELD(wal_max_bytes), 0, UINT64_MAX, NULL},
    {"default_capacity", CONF_UINT, CONF_FIELD(default_capacity), 1, UINT64_MAX, NULL},
    {"default_error_rate", CONF_RATE, CONF_FIELD(default_error_rate), 0, 0, NULL},
    {"text_default_capacity", CONF_UINT, CONF_FIELD(text_default_capacity), 1, UINT64_MAX, NULL},
    {"text_default_error_rate", CONF_RATE, CONF_FIELD(text_default_error_rate), 0, 0, NULL},
    {"resp_default_capacity", CONF_UINT, CONF_FIELD(resp_default_capacity), 1, UINT64_MAX, NULL},
    {"resp_default_error_rate", CONF_RATE, CONF_FIELD(resp_default_error_rate), 0, 0, NULL},
    {"max_memory", CONF_SIZE, CONF_FIELD(max_memory), 0, UINT64_MAX, NULL},
    {"max_line_bytes", CONF_SIZE, CONF_FIELD(max_line_bytes), 1, UINT32_MAX, NULL},
    {"max_bulk_bytes", CONF_SIZE, CONF_FIELD(max_bulk_bytes), 1, UINT32_MAX, NULL},
    {"max_args", CONF_UINT, CONF_FIELD(max_args), 1, UINT32_MAX, NULL},
    {"multi_max_commands", CONF_UINT, CONF_FIELD(multi_max_commands), 1, UINT32_MAX, NULL},
    {"multi_max_bytes", CONF_SIZE, CONF_FIELD(multi_max_bytes), 1, UINT64_MAX, NULL},
    {"max_key_bytes", CONF_SIZE, CONF_FIELD(max_key_bytes), 1, UINT32_MAX, NULL},
    {"max_body_bytes", CONF_SIZE, CONF_FIELD(max_body_bytes), 1, UINT64_MAX, NULL},
    {"max_gzip_bytes", CONF_SIZE, CONF_FIELD(max_gzip_bytes), 1, UINT64_MAX, NULL},
    {"max_gzip_ratio", CONF_UINT, CONF_FIELD(max_gzip_ratio), 1, UINT32_MAX, NULL},
    {"max_connections", CONF_UINT, CONF_FIELD(max_connections), 1, UINT32_MAX, NULL},
    {"idle_timeout", CONF_UINT, CONF_FIELD(idle_timeout), 0, UINT32_MAX, NULL},
    {"request_timeout", CONF_UINT, CONF_FIELD(request_timeout), 0, UINT32_MAX, NULL},
    {"max_output_bytes", CONF_SIZE, CONF_FIELD(max_output_bytes), 1, UINT64_MAX, NULL},
    {"max_client_memory", CONF_SIZE, CONF_FIELD(max_client_memory), 0, UINT64_MAX, NULL},
    {"max_channel_bytes", CONF_SIZE, CONF_FIELD(max_channel_bytes), 1, UINT32_MAX, NULL},
    {"notify_keyspace_events", CONF_EVENTS, CONF_FIELD(notify_keyspace_events), 0, 0, NULL},
    {"log_level", CONF_LOG_LEVEL, CONF_FIELD(log_level), 0, 7, NULL},
    {"log_create_bytes", CONF_SIZE, CONF_FIELD(log_create_bytes), 0, UINT64_MAX, NULL},
    {"log_progress_bytes", CONF_SIZE, CONF_FIELD(log_progress_bytes), 0, UINT64_MAX, NULL},
    {"log_progress_interval", CONF_UINT, CONF_FIELD(log_progress_interval), 0, 3600, NULL},
    {"auth_token_file", CONF_STRING, CONF_FIELD(auth_token_file), 0, 0, NULL},
    {"replicaof", CONF_STRING, CONF_FIELD(replicaof), 0, 0, NULL},
    {"primary_auth", CONF_STRING, CONF_FIELD(primary_auth), 0, 0, NULL},
    {"repl_timeout", CONF_UINT, CONF_FIELD(repl_timeout), 0, UINT32_MAX, NULL},
    {"repl_backlog_size", CONF_SIZE, CONF_FIELD(repl_backlog_size), 0, UINT64_C(1) << 40, NULL},
    {"repl_output_bytes", CONF_SIZE, CONF_FIELD(repl_output_bytes), 0, UINT64_MAX, NULL},
    {"replica_priority", CONF_UINT, CONF_FIELD(replica_priority), 0, INT32_MAX, NULL},
};

#define CONF_NKEYS (sizeof(conf_keys) / sizeof(conf_keys[0]))

static const char *const conf_level_names[] = {
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

#define CONF_LEVEL_HINT "expected emerg, alert, crit, err, warning, notice, info, debug or 0-7"
#define CONF_ADDRS_HINT "expected comma-separated IPv4/IPv6 addresses"
/* Room for every bind item: the field holds 255 bytes, and the shortest item ("::") takes 3
 * with its comma, so at most 86 items. */
#define CONF_MAX_BIND  86
#define CONF_RATE_HINT "must be greater than 0 and less than 1"

__attribute__((format(printf, 3, 4))) static void conf_errf(char *err, size_t errlen,
							    const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void conf_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->bind, "127.0.0.1");
	c->port = 8673;
	c->http_port = 8674;
	strcpy(c->data_dir, "/var/lib/blossomd");
	c->snapshot_interval = 5;
	c->snapshot_pack_bytes = 64 * 1024;
	c->cold_interval = 3600;
	c->wal = 1;
	c->wal_fsync = 0;
	c->wal_segment_bytes = UINT64_C(64) << 20;
	c->wal_max_bytes = UINT64_C(1) << 30;
	c->default_capacity = 100000;
	c->default_error_rate = 0.01;
	c->text_default_capacity = 100000;
	c->text_default_error_rate = 0.0001;
	c->resp_default_capacity = 100;
	c->resp_default_error_rate = 0.01;
	c->max_memory = UINT64_C(4) << 30;
	c->max_line_bytes = UINT32_C(1) << 20;
	c->max_bulk_bytes = UINT32_C(64) << 20;
	c->max_args = 1048576;
	c->multi_max_commands = 100000;
	c->multi_max_bytes = UINT64_C(16) << 20;
	c->max_key_bytes = UINT32_C(64) << 10;
	c->max_body_bytes = UINT64_C(16) << 20;
	c->max_gzip_bytes = UINT64_C(64) << 30;
	c->max_gzip_ratio = 100;
	c->max_connections = 10000;
	c->idle_timeout = 300;
	c->request_timeout = 30;
	c->max_output_bytes = UINT64_C(64) << 20;
	c->max_client_memory = UINT64_C(1) << 30;
	c->max_channel_bytes = 1024;
	c->notify_keyspace_events[0] = '\0';
	c->log_level = 6;
	c->log_create_bytes = UINT64_C(256) << 20;
	c->log_progress_bytes = UINT64_C(256) << 20;
	c->log_progress_interval = 5;
	c->auth_token_file[0] = '\0';
	c->replicaof[0] = '\0';
	c->primary_auth[0] = '\0';
	c->repl_timeout = 60;
	c->repl_backlog_size = UINT64_C(16) << 20;
	c->repl_output_bytes = UINT64_C(256) << 20;
	c->replica_priority = 100;
}

const char *conf_log_level_name(int level)
{
	if (level < 0 || level > 7)
		return NULL;
	return conf_level_names[level];
}

static const struct conf_key *conf_find_key(const char *name)
{
	for (size_t i = 0; i < CONF_NKEYS; i++)
		if (strcmp(conf_keys[i].name, name) == 0)
			return &conf_keys[i];
	return NULL;
}

static uint64_t conf_get_uint(const struct config *c, const struct conf_key *k)
{
	const char *p = (const char *)c + k->offset;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (k->size) {
	case sizeof(v16):
		memcpy(&v16, p, sizeof(v16));
		return v16;
	case sizeof(v32):
		memcpy(&v32, p, sizeof(v32));
		return v32;
	default:
		memcpy(&v64, p, sizeof(v64));
		return v64;
	}
}

/* v has been checked against k->max, which fits the field. */
static void conf_put_uint(struct config *c, const struct conf_key *k, uint64_t v)
{
	char *p = (char *)c + k->offset;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (k->size) {
	case sizeof(v16):
		memcpy(p, &v16, sizeof(v16));
		break;
	case sizeof(v32):
		memcpy(p, &v32, sizeof(v32));
		break;
	default:
		memcpy(p, &v, sizeof(v));
		break;
	}
}

/*
 * Decimal digits, then (if suffix) one of k/K, m/M, g/G, then nothing. Returns 0, -EINVAL for
 * bad syntax, -ERANGE when the value does not fit in 64 bits.
 */
static int conf_parse_uint(const char *s, bool suffix, uint64_t *out)
{
	uint64_t v = 0;
	bool overflow = false;
	unsigned shift = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (suffix) {
		switch (*s) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		}
		if (shift)
			s++;
	}
	if (*s)
		return -EINVAL;
	if (overflow || v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

/* A finite decimal number ("0.01", "1e-3", "-1"); no hex, inf, nan or spaces. */
static int conf_parse_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || s[strspn(s, "0123456789.eE+-")])
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end || !isfinite(v))
		return -EINVAL;
	*out = v;
	return 0;
}

static int conf_parse_level(const char *s, int *out)
{
	if (s[0] >= '0' && s[0] <= '7' && !s[1]) {
		*out = s[0] - '0';
		return 0;
	}
	if (strcasecmp(s, "error") == 0) {
		*out = 3;
		return 0;
	}
	for (int i = 0; i < 8; i++) {
		if (strcasecmp(s, conf_level_names[i]) == 0) {
			*out = i;
			return 0;
		}
	}
	return -EINVAL;
}

/* One bind item as its family and bytes, so that two spellings of one address compare equal. */
struct conf_addr {
	int family;
	unsigned char bytes[sizeof(struct in6_addr)];
};

static bool conf_addr_parse(const char *item, struct conf_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = AF_INET;
	if (inet_pton(AF_INET, item, a->bytes) == 1)
		return true;
	a->family = AF_INET6;
	return inet_pton(AF_INET6, item, a->bytes) == 1;
}

/*
 * "a,b,c", each item an IPv4 or IPv6 literal, no address twice: the second listener on one
 * address would fail at start with "address in use" after --test-config passed. Returns 0,
 * or -EINVAL with the message in err.
 */
static int conf_check_addrs(const struct conf_key *k, const char *s, char *err, size_t errlen)
{
	struct conf_addr seen[CONF_MAX_BIND];
	char item[INET6_ADDRSTRLEN], first[INET6_ADDRSTRLEN];
	const char *all = s;
	size_t nseen = 0;

	for (;;) {
		size_t n = strcspn(s, ",");
		struct conf_addr a;

		if (n == 0 || n >= sizeof(item))
			goto bad;
		memcpy(item, s, n);
		item[n] = '\0';
		if (!conf_addr_parse(item, &a))
			goto bad;
		for (size_t i = 0; i < nseen; i++) {
			if (memcmp(&seen[i], &a, sizeof(a)))
				continue;
			inet_ntop(a.family, a.bytes, first, sizeof(first));
			conf_errf(err, errlen,
				  "bad value for %s: '%s' (address %s is given twice: a second "
				  "listener on it could not bind)",
				  k->name, all, first);
			return -EINVAL;
		}
		if (nseen < CONF_MAX_BIND)
			seen[nseen++] = a;
		if (!s[n])
			return 0;
		s += n + 1;
	}
bad:
	conf_errf(err, errlen, "bad value for %s: '%s' (" CONF_ADDRS_HINT ")", k->name, all);
	return -EINVAL;
}

static int conf_range_err(const struct conf_key *k, const char *shown, char *err, size_t errlen)
{
	conf_errf(err, errlen,
		  "bad value for %s: '%s' (must be between %" PRIu64 " and %" PRIu64 ")", k->name,
		  shown, k->min, k->max);
	return -EINVAL;
}

static int conf_check_uint(const struct conf_key *k, uint64_t v, const char *shown, char *err,
			   size_t errlen)
{
	if (v < k->min || v > k->max)
		return conf_range_err(k, shown, err, errlen);
	return 0;
}

static int conf_check_rate(const struct conf_key *k, double v, const char *shown, char *err,
			   size_t errlen)
{
	if (!(v > 0.0 && v < 1.0)) {
		conf_errf(err, errlen, "bad value for %s: '%s' (" CONF_RATE_HINT ")", k->name,
			  shown);
		return -EINVAL;
	}
	/* Below the core's floor every create that takes this default would fail. */
	if (v < BF_MIN_ERROR_RATE) {
		conf_errf(err, errlen,
			  "bad value for %s: '%s' (must be at least %g, the smallest error rate "
			  "a filter can be created with)",
			  k->name, shown, BF_MIN_ERROR_RATE);
		return -EINVAL;
	}
	return 0;
}

/* s is NUL-terminated and shorter than the field. */
/* replicaof: empty, or "HOST PORT": a numeric IPv4/IPv6 address or localhost, a port 1-65535. */
static int conf_check_replicaof(const struct conf_key *k, const char *s, char *err, size_t errlen)
{
	char host[256], tail;
	unsigned char addr[16];
	unsigned port;

	if (!*s)
		return 0;
	if (sscanf(s, "%255s %u %c", host, &port, &tail) != 2 || port < 1 || port > 65535 ||
	    (strcmp(host, "localhost") && inet_pton(AF_INET, host, addr) != 1 &&
	     inet_pton(AF_INET6, host, addr) != 1)) {
		conf_errf(err, errlen,
			  "bad value for %s: '%s' (expected HOST PORT: a numeric address or "
			  "localhost, and a port 1-65535)",
			  k->name, s);
		return -EINVAL;
	}
	return 0;
}

static int conf_check_string(const struct conf_key *k, const char *s, char *err, size_t errlen)
{
	/* A newline would end the value's line in a rewritten file (and start another there);
	 * no key has a use for any control byte. The value is not shown: it may hold a secret. */
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			conf_errf(err, errlen,
				  "bad value for %s: control characters (byte 0x%02x) are not "
				  "allowed",
				  k->name, (unsigned char)*p);
			return -EINVAL;
		}
	if (strlen(s) < k->min) {
		conf_errf(err, errlen, "bad value for %s: '%s' (must not be empty)", k->name, s);
		return -EINVAL;
	}
	if (!strcmp(k->name, "replicaof"))
		return conf_check_replicaof(k, s, err, errlen);
	if (k->type == CONF_ADDRS)
		return conf_check_addrs(k, s, err, errlen);
	if (k->type == CONF_EVENTS && s[strspn(s, CONF_EVENT_LETTERS)]) {
		conf_errf(err, errlen,
			  "bad value for %s: '%s' (expected letters of " CONF_EVENT_LETTERS
			  ", or nothing)",
			  k->name, s);
		return -EINVAL;
	}
	return 0;
}

int conf_set(struct config *c, const char *key, const char *value, char *err, size_t errlen)
{
	const struct conf_key *k = conf_find_key(key);
	char *field;
	uint64_t u;
	double d;
	int level, r;

	if (!k) {
		conf_errf(err, errlen, "unknown key '%s'", key);
		return -EINVAL;
	}
	field = (char *)c + k->offset;

	switch (k->type) {
	case CONF_STRING:
	case CONF_EVENTS:
	case CONF_ADDRS: {
		size_t len = strlen(value);

		if (len >= k->size) {
			conf_errf(err, errlen, "bad value for %s: too long (max %zu bytes)",
				  k->name, k->size - 1);
			return -EINVAL;
		}
		r = conf_check_string(k, value, err, errlen);
		if (r)
			return r;
		/* Zero the tail too, so equal configs are equal byte for byte. */
		memset(field, 0, k->size);
		memcpy(field, value, len);
		return 0;
	}
	case CONF_UINT:
	case CONF_SIZE:
		r = conf_parse_uint(value, k->type == CONF_SIZE, &u);
		if (r == -EINVAL) {
			conf_errf(err, errlen, "bad value for %s: '%s' (%s)", k->name, value,
				  k->type == CONF_SIZE ? "expected a number of bytes, optionally "
							 "with a k, m or g suffix: 4g, 512m, 65536"
						       : "expected a whole number");
			return -EINVAL;
		}
		if (r == -ERANGE) /* beyond 64 bits: reported as any other range error */
			return conf_range_err(k, value, err, errlen);
		r = conf_check_uint(k, u, value, err, errlen);
		if (r)
			return r;
		conf_put_uint(c, k, u);
		return 0;
	case CONF_RATE:
		if (conf_parse_double(value, &d)) {
			conf_errf(err, errlen, "bad value for %s: '%s'", k->name, value);
			return -EINVAL;
		}
		r = conf_check_rate(k, d, value, err, errlen);
		if (r)
			return r;
		memcpy(field, &d, sizeof(d));
		return 0;
	case CONF_CHOICE:
		for (int i = 0; k->choices[i]; i++) {
			if (strcasecmp(value, k->choices[i]) == 0) {
				memcpy(field, &i, sizeof(i));
				return 0;
			}
		}
		conf_errf(err, errlen, "bad value for %s: '%s' (expected %s)", k->name, value,
			  k->choices == conf_wal_names ? "on or off" : "always, everysec or no");
		return -EINVAL;
	case CONF_LOG_LEVEL:
		if (conf_parse_level(value, &level)) {
			conf_errf(err, errlen, "bad value for %s: '%s' (" CONF_LEVEL_HINT ")",
				  k->name, value);
			return -EINVAL;
		}
		memcpy(field, &level, sizeof(level));
		return 0;
	}
	return -EINVAL; /* not reached: every type is handled above */
}

/* Keys only a restart changes: the listeners, the data directory, the log's, the token file.
 * CONFIG SET refuses them; CONFIG REWRITE leaves their lines alone. */
static const char *const conf_restart_keys[] = {
    "bind",	 "port",      "http_port",	   "data_dir",
    "wal",	 "wal_fsync", "wal_segment_bytes", "auth_token_file",
    "replicaof",
};

bool conf_key_live(const char *name)
{
	if (!conf_find_key(name))
		return false;
	for (size_t i = 0; i < sizeof(conf_restart_keys) / sizeof(conf_restart_keys[0]); i++)
		if (strcmp(name, conf_restart_keys[i]) == 0)
			return false;
	return true;
}

const char *conf_key_at(size_t i)
{
	return i < CONF_NKEYS ? conf_keys[i].name : NULL;
}

/* The shortest decimal form of d that reads back as d ("0.01", not "0.010000000000000000208"). */
static void conf_format_rate(double d, char *buf, size_t len)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

int conf_format(const struct config *c, const char *key, char *buf, size_t len)
{
	const struct conf_key *k = conf_find_key(key);
	const char *field;
	uint64_t u;
	double d;
	int i;

	if (!k)
		return -ENOENT;
	field = (const char *)c + k->offset;
	switch (k->type) {
	case CONF_STRING:
	case CONF_EVENTS:
	case CONF_ADDRS:
		snprintf(buf, len, "%s", field);
		break;
	case CONF_SIZE:
		/* The largest unit that divides it: 4g, 64k, 1000. */
		u = conf_get_uint(c, k);
		if (u && u % (UINT64_C(1) << 30) == 0)
			snprintf(buf, len, "%" PRIu64 "g", u >> 30);
		else if (u && u % (UINT64_C(1) << 20) == 0)
			snprintf(buf, len, "%" PRIu64 "m", u >> 20);
		else if (u && u % (UINT64_C(1) << 10) == 0)
			snprintf(buf, len, "%" PRIu64 "k", u >> 10);
		else
			snprintf(buf, len, "%" PRIu64, u);
		break;
	case CONF_UINT:
		snprintf(buf, len, "%" PRIu64, conf_get_uint(c, k));
		break;
	case CONF_RATE:
		memcpy(&d, field, sizeof(d));
		conf_format_rate(d, buf, len);
		break;
	case CONF_CHOICE:
		memcpy(&i, field, sizeof(i));
		snprintf(buf, len, "%s", k->choices[i]);
		break;
	case CONF_LOG_LEVEL:
		memcpy(&i, field, sizeof(i));
		snprintf(buf, len, "%s", conf_log_level_name(i) ? conf_log_level_name(i) : "info");
		break;
	}
	return 0;
}

static int conf_validate_key(const struct conf_key *k, const struct config *c, char *err,
			     size_t errlen)
{
	const char *field = (const char *)c + k->offset;
	char shown[64];
	uint64_t u;
	double d;
	int level;

	switch (k->type) {
	case CONF_STRING:
	case CONF_EVENTS:
	case CONF_ADDRS:
		if (!memchr(field, '\0', k->size)) {
			conf_errf(err, errlen, "bad value for %s: not NUL-terminated", k->name);
			return -EINVAL;
		}
		return conf_check_string(k, field, err, errlen);
	case CONF_UINT:
	case CONF_SIZE:
		u = conf_get_uint(c, k);
		snprintf(shown, sizeof(shown), "%" PRIu64, u);
		return conf_check_uint(k, u, shown, err, errlen);
	case CONF_RATE:
		memcpy(&d, field, sizeof(d));
		snprintf(shown, sizeof(shown), "%g", d);
		return conf_check_rate(k, d, shown, err, errlen);
	case CONF_CHOICE:
		memcpy(&level, field, sizeof(level));
		for (int i = 0; k->choices[i]; i++)
			if (level == i)
				return 0;
		conf_errf(err, errlen, "bad value for %s: %d", k->name, level);
		return -EINVAL;
	case CONF_LOG_LEVEL:
		memcpy(&level, field, sizeof(level));
		if (level < 0 || level > 7) {
			conf_errf(err, errlen, "bad value for %s: '%d' (" CONF_LEVEL_HINT ")",
				  k->name, level);
			return -EINVAL;
		}
		return 0;
	}
	return -EINVAL; /* not reached */
}

static int conf_not_above(const char *a, uint64_t av, const char *b, uint64_t bv, char *err,
			  size_t errlen)
{
	if (av > bv) {
		conf_errf(err, errlen, "%s (%" PRIu64 ") must not exceed %s (%" PRIu64 ")", a, av,
			  b, bv);
		return -EINVAL;
	}
	return 0;
}

int conf_validate(const struct config *c, char *err, size_t errlen)
{
	int r;

	for (size_t i = 0; i < CONF_NKEYS; i++) {
		r = conf_validate_key(&conf_keys[i], c, err, errlen);
		if (r)
			return r;
	}
	/* A key must fit in one text line and in one RESP bulk string. */
	r = conf_not_above("max_key_bytes", c->max_key_bytes, "max_line_bytes", c->max_line_bytes,
			   err, errlen);
	if (r)
		return r;
	r = conf_not_above("max_key_bytes", c->max_key_bytes, "max_bulk_bytes", c->max_bulk_bytes,
			   err, errlen);
	if (r)
		return r;
	/* Both listeners bind the same addresses. */
	if (c->http_port && c->http_port == c->port) {
		conf_errf(err, errlen, "http_port must differ from port (both are %u)",
			  (unsigned)c->port);
		return -EINVAL;
	}
	return 0;
}

/* State of one conf_load(): libinih calls back into both the reader and the handler. */
struct conf_parse {
	struct config tmp; /* the result, copied to the caller only on success */
	const char *path;
	FILE *f;
	char *buf; /* getline() buffer */
	size_t cap;
	unsigned line;	   /* number of the line last handed to libinih */
	unsigned err_line; /* line of the first error found here, 0 if none */
	int io_err;	   /* errno of a failed read, 0 if none */
	char *err;
	size_t errlen;
};

/* Record the first error, at the current line; later ones are dropped. */
__attribute__((format(printf, 2, 3))) static void conf_fail(struct conf_parse *p, const char *fmt,
							    ...)
{
	char msg[512];
	va_list ap;

	if (p->err_line)
		return;
	p->err_line = p->line;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	conf_errf(p->err, p->errlen, "%s:%u: %s", p->path, p->line, msg);
}

static bool conf_space(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

/*
 * The length of the line s[0, len) without a comment after its value ("max_memory = 4g # four
 * gigs", "port = 8673 ; main"), and without the spaces before that comment. A '#' or ';'
 * starts a comment where it begins the value or follows a space or tab, so a path such as
 * /srv/a#b keeps its '#'. libinih alone would drop a ';' comment but keep a '#' one as part
 * of the value; here both go, the same way.
 */
static size_t conf_strip_comment(const char *s, size_t len)
{
	const char *eq = memchr(s, '=', len), *colon = memchr(s, ':', len), *v, *end = s + len;

	if (!eq || (colon && colon < eq))
		eq = colon; /* libinih splits a line at its first '=' or ':' */
	if (!eq)
		return len;
	for (v = eq + 1; v < end && conf_space(*v); v++)
		;
	for (const char *c = v; c < end; c++) {
		if ((*c == '#' || *c == ';') && (c == v || c[-1] == ' ' || c[-1] == '\t')) {
			while (c > eq + 1 && conf_space(c[-1]))
				c--;
			return (size_t)(c - s);
		}
	}
	return len;
}

/*
 * libinih's line reader (fgets-like, num = its line buffer size). Counting lines here is how
 * errors get their line number, since the handler is not told it. It also:
 * - stops the parse (returns NULL) once an error has been recorded;
 * - refuses lines that would not fit libinih's buffer (it would split them silently) and lines
 *   with NUL bytes, but lets long comments through;
 * - strips leading whitespace, so an indented key is a key and never a continuation line;
 * - drops a comment after a value (conf_strip_comment);
 * - refuses any section header but [blossomd] at its own line, even if no key follows.
 */
static char *conf_read_line(char *str, int num, void *stream)
{
	struct conf_parse *p = stream;
	char *s, *end;
	ssize_t n;
	size_t len;

	if (p->err_line || p->io_err || num < 2)
		return NULL;
	errno = 0;
	n = getline(&p->buf, &p->cap, p->f);
	if (n < 0) {
		if (!feof(p->f))
			p->io_err = errno ? errno : EIO;
		return NULL;
	}
	p->line++;
	if (memchr(p->buf, '\0', (size_t)n)) {
		conf_fail(p, "line contains a NUL byte");
		return NULL;
	}
	s = p->buf;
	if (p->line == 1 && n >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
		s += 3;
	while (conf_space(*s))
		s++;
	end = s + strlen(s);
	while (end > s && conf_space(end[-1]))
		end--;
	len = (size_t)(end - s);

	if (len && (*s == '#' || *s == ';')) {
		strcpy(str, ";");
		return str;
	}
	if (len && *s != '[')
		len = conf_strip_comment(s, len);
	if (len && *s == '[') {
		const char *close = memchr(s, ']', len);
		size_t nlen = close ? (size_t)(close - s - 1) : 0;

		/* Without ']' libinih reports the syntax error itself. */
		if (close && (nlen != strlen(CONF_SECTION) || memcmp(s + 1, CONF_SECTION, nlen))) {
			conf_fail(p, "unknown section '%.*s'", (int)nlen, s + 1);
			return NULL;
		}
	}
	if (len >= (size_t)num) {
		conf_fail(p, "line too long (max %d bytes)", num - 1);
		return NULL;
	}
	memcpy(str, s, len);
	str[len] = '\0';
	return str;
}

static int conf_on_key(void *user, const char *section, const char *name, const char *value)
{
	struct conf_parse *p = user;
	char msg[512];

	if (strcmp(section, CONF_SECTION) != 0) {
		if (!*section)
			conf_fail(p, "key '%s' before the [" CONF_SECTION "] section header", name);
		else
			conf_fail(p, "unknown section '%s'", section);
		return 0;
	}
	if (conf_set(&p->tmp, name, value, msg, sizeof(msg))) {
		conf_fail(p, "%s", msg);
		return 0;
	}
	return 1;
}

int conf_load(struct config *c, const char *path, char *err, size_t errlen)
{
	struct conf_parse *p;
	char ebuf[128];
	struct stat st;
	int r, ret;

	/* struct config is large; keep the working copy off the stack. */
	p = calloc(1, sizeof(*p));
	if (!p) {
		conf_errf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	p->tmp = *c;
	p->path = path;
	p->err = err;
	p->errlen = errlen;

	p->f = fopen(path, "re");
	if (!p->f) {
		r = -errno;
		conf_errf(err, errlen, "%s: cannot open: %s", path,
			  strerror_r(-r, ebuf, sizeof(ebuf)));
		goto out;
	}
	if (fstat(fileno(p->f), &st) == 0 && S_ISDIR(st.st_mode)) {
		r = -EISDIR;
		conf_errf(err, errlen, "%s: cannot open: %s", path,
			  strerror_r(-r, ebuf, sizeof(ebuf)));
		goto out;
	}

	ret = ini_parse_stream(conf_read_line, p, conf_on_key, p);

	if (p->io_err) {
		r = -p->io_err;
		conf_errf(err, errlen, "%s: cannot read: %s", path,
			  strerror_r(-r, ebuf, sizeof(ebuf)));
	} else if (ret < 0) {
		r = -ENOMEM;
		conf_errf(err, errlen, "%s: out of memory", path);
	} else if (ret > 0 && (!p->err_line || (unsigned)ret < p->err_line)) {
		/* libinih found a line it cannot parse before any error of ours. */
		r = -EINVAL;
		conf_errf(err, errlen,
			  "%s:%d: syntax error (expected '[section]' or 'key = value')", path, ret);
	} else if (p->err_line) {
		r = -EINVAL;
	} else {
		*c = p->tmp;
		r = 0;
	}
out:
	if (p->f)
		fclose(p->f);
	free(p->buf);
	free(p);
	return r;
}
