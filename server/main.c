/* SPDX-License-Identifier: MIT */
/*
 * blossomd: command-line flags, the configuration (defaults, then the file, then the flags),
 * then the server until SIGTERM/SIGINT. Exit status: 0 after a clean stop or a successful
 * --test-config/--version/--help, 1 for a bad configuration or a failed start, 2 for bad usage.
 */
#include <getopt.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "server/log.h"
#include "server/server.h"

#ifndef BLOSSOMD_VERSION
#define BLOSSOMD_VERSION "unknown"
#endif

enum {
	OPT_HTTP_PORT = 256,
	OPT_WAL_TRUNCATE,
	OPT_ACCEPT_MISSING,
};

static const struct option main_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"port", required_argument, NULL, 'p'},
    {"http-port", required_argument, NULL, OPT_HTTP_PORT},
    {"bind", required_argument, NULL, 'b'},
    {"data-dir", required_argument, NULL, 'd'},
    {"log-level", required_argument, NULL, 'l'},
    {"test-config", no_argument, NULL, 't'},
    {"wal-truncate-corrupt", no_argument, NULL, OPT_WAL_TRUNCATE},
    {"accept-missing-files", no_argument, NULL, OPT_ACCEPT_MISSING},
    {"version", no_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void main_usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: blossomd [OPTION]...\n"
	    "Serve named Bloom filters over the bloomd text protocol, RESP (Redis) and HTTP.\n"
	    "\n"
	    "  -c, --config FILE     read settings from FILE (INI, section [blossomd])\n"
	    "  -p, --port N          text and RESP port (default 8673)\n"
	    "      --http-port N     HTTP port, 0 disables HTTP (default 8674)\n"
	    "  -b, --bind ADDR[,ADDR...]  IPv4/IPv6 addresses to listen on (default 127.0.0.1)\n"
	    "  -d, --data-dir DIR    directory for snapshots and the write-ahead log\n"
	    "                        (default /var/lib/blossomd)\n"
	    "  -l, --log-level L     emerg alert crit err warning notice info debug, or 0-7\n"
	    "                        (default info)\n"
	    "  -t, --test-config     check the configuration (--config FILE and the flags), print\n"
	    "                        the result and exit\n"
	    "      --wal-truncate-corrupt  cut the write-ahead log at a corrupt record instead of\n"
	    "                        refusing to start (what follows it is lost)\n"
	    "      --accept-missing-files  start although write-ahead log segments or snapshot "
	    "files\n"
	    "                        are missing instead of refusing to (what they held is lost)\n"
	    "  -V, --version         print the version and exit\n"
	    "  -h, --help            print this help and exit\n"
	    "\n"
	    "Flags override the file. SIGHUP re-reads the file; SIGTERM or SIGINT stop.\n");
}

/* The config key a flag sets, or NULL for a flag that is not a setting. */
static const char *main_flag_key(int opt, const char **flag)
{
	switch (opt) {
	case 'p':
		*flag = "--port";
		return "port";
	case OPT_HTTP_PORT:
		*flag = "--http-port";
		return "http_port";
	case 'b':
		*flag = "--bind";
		return "bind";
	case 'd':
		*flag = "--data-dir";
		return "data_dir";
	case 'l':
		*flag = "--log-level";
		return "log_level";
	default:
		return NULL;
	}
}

/* What the command line asks beyond the configuration's keys. */
struct main_args {
	struct srv_override *ov; /* at most one per argument; they point into argv */
	size_t nov;
	const char *config_path; /* -c */
	bool test_config;	 /* -t */
};

/*
 * Read argv into a (the configuration flags as overrides) and opts (the start's flags). -1 to
 * go on, or the status to exit with: 0 after --version or --help, 2 on a usage error.
 */
static int main_args_read(int argc, char **argv, struct main_args *a, struct srv_options *opts)
{
	int opt;

	while ((opt = getopt_long(argc, argv, "c:p:b:d:l:tVh", main_options, NULL)) != -1) {
		const char *flag = NULL, *key = main_flag_key(opt, &flag);

		if (key) {
			a->ov[a->nov].flag = flag;
			a->ov[a->nov].key = key;
			a->ov[a->nov].value = optarg;
			a->nov++;
			continue;
		}
		switch (opt) {
		case 'c':
			a->config_path = optarg;
			break;
		case 't':
			a->test_config = true;
			break;
		case OPT_WAL_TRUNCATE:
			opts->wal_truncate_corrupt = true;
			break;
		case OPT_ACCEPT_MISSING:
			opts->accept_missing_files = true;
			break;
		case 'V':
			printf("blossomd %s\n", BLOSSOMD_VERSION);
			return 0;
		case 'h':
			main_usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'blossomd --help' for more information.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "blossomd: unexpected argument '%s'\n", argv[optind]);
		fprintf(stderr, "Try 'blossomd --help' for more information.\n");
		return 2;
	}
	return -1;
}

/*
 * -t: the configuration read (rc, err) and checked as a start would check it. The status to
 * exit with: 0 and "configuration OK", or 1 with the reason on stderr.
 */
static int main_test_config(int rc, const struct config *cfg, const char *err)
{
	if (rc) {
		fprintf(stderr, "blossomd: %s\n", err);
		return 1;
	}
	/* What a start would refuse from the configuration alone, so does the check, in the same
	 * words, printed as the check's other messages are. */
	srv_log_set_priority_prefix(0);
	if (srv_config_check_start(cfg))
		return 1;
	printf("configuration OK\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct srv_options opts = {0};
	struct main_args a = {0};
	struct config cfg;
	struct srv *srv = NULL;
	char err[768];
	int status = 1;
	int rc;

	a.ov = calloc((size_t)argc + 1, sizeof(*a.ov));
	if (!a.ov) {
		fprintf(stderr, "blossomd: out of memory\n");
		return 1;
	}
	rc = main_args_read(argc, argv, &a, &opts);
	if (rc >= 0) {
		status = rc;
		goto out_ov;
	}

	rc = srv_config_read(a.config_path, a.ov, a.nov, &cfg, err, sizeof(err));
	if (a.test_config) {
		status = main_test_config(rc, &cfg, err);
		goto out_ov;
	}
	if (rc) {
		srv_log(SRV_LOG_ERR, "%s", err);
		goto out_ov;
	}
	srv_log_set_level(cfg.log_level);

	/* A client that goes away mid-write must cost an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);

	opts.config = &cfg;
	opts.config_path = a.config_path;
	opts.overrides = a.ov;
	opts.noverrides = a.nov;
	opts.version = BLOSSOMD_VERSION;
	rc = srv_new(&opts, &srv);
	if (rc)
		goto out_ov;
	rc = srv_run(srv);
	if (rc)
		goto out_srv;
	status = 0;
out_srv:
	if (srv_free(srv))
		status = 1;
out_ov:
	free(a.ov);
	return status;
}
