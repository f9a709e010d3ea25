#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh FUZZER SEED-CORPUS-DIR ARTIFACT-DIR: run a libFuzzer target for FUZZ_SECONDS
# (default 20) on a scratch copy of its seed corpus (the seeds in the tree stay as they are).
# Exit status: the fuzzer's, non-zero on a crash, leak, timeout or out-of-memory; the input
# that did it is left in ARTIFACT-DIR (reproduce with: FUZZER ARTIFACT-DIR/crash-...).
set -eu
fuzzer=$1 seeds=$2 artifacts=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$seeds"/. "$work"/
mkdir -p "$artifacts"
"$fuzzer" -max_total_time="${FUZZ_SECONDS:-20}" -rss_limit_mb=2048 -timeout=10 \
	-print_final_stats=1 -artifact_prefix="$artifacts/" "$work"
