/* SPDX-License-Identifier: MIT */
/* The trace format of tests/integration/fsrec.c (see there). */
#ifndef BLOSSOMD_TESTS_FSREC_H
#define BLOSSOMD_TESTS_FSREC_H

#include <stdint.h>

#define FSREC_MAGIC 0x43455246u /* "FREC" */

enum fsrec_op {
	FSREC_CREATE = 1, /* path: a new file (ino) linked there */
	FSREC_TRUNC,	  /* ino: size set to len */
	FSREC_WRITE,	  /* ino: len bytes of data at off */
	FSREC_FALLOC,	  /* ino: size at least off + len (zeros) */
	FSREC_SYNC,	  /* ino: its data and size durable, as of cover */
	FSREC_SYNCDIR,	  /* path: the directory's entries durable, as of cover */
	FSREC_RENAME,	  /* path -> path2 */
	FSREC_UNLINK,	  /* path */
	FSREC_MKDIR,	  /* path */
};

struct fsrec_hdr {
	uint32_t magic, op;
	uint64_t ino, off, len, cover;
	uint32_t plen, plen2;
	uint64_t dlen;
};

#endif
