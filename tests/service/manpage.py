#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint: the blossomd(8) source (doc/blossomd.8.scd) documents every flag of `blossomd --help`
and every key of the shipped conf/blossomd.conf, with the default the file gives, no key that
does not exist, and the signals the daemon handles.

Usage: manpage.py (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import os
import re
import subprocess

from servicetest import Tap, env_path, read

BIN = env_path("BLOSSOMD_BIN")
SRC = env_path("BLOSSOMD_SOURCE_ROOT")
PAGE = read(os.path.join(SRC, "doc", "blossomd.8.scd"))
CONF = read(os.path.join(SRC, "conf", "blossomd.conf"))


def section(name):
    m = re.search(rf"^# {name}\n(.*?)(?=^# |\Z)", PAGE, re.M | re.S)
    assert m, f"no section {name}"
    return m.group(1)


def conf_keys():
    """{key: value} of the shipped file."""
    return dict(re.findall(r"^(\w+)\s*=[ \t]*(.*?)\s*$", CONF, re.M))


def documented_keys():
    """{key: its paragraph} of the CONFIGURATION section ("*key* = _VALUE_" entries)."""
    text = section("CONFIGURATION")
    parts = re.split(r"^\*(\w+)\* = .*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def case_flags():
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", r.stdout))
    assert len(flags) >= 9, flags
    options = section("OPTIONS")
    missing = sorted(f for f in flags if f"*{f}*" not in options)
    assert not missing, f"flags in --help but not in OPTIONS: {missing}"


def case_keys():
    conf, doc = set(conf_keys()), set(documented_keys())
    assert conf == doc, f"only in conf: {sorted(conf - doc)}; only in man: {sorted(doc - conf)}"


def case_defaults():
    # Each entry states the shipped value as "Default *value*" (an empty value: no default
    # to state).
    wrong = []
    docs = documented_keys()
    for key, value in conf_keys().items():
        para = " ".join(docs.get(key, "").split())
        if value and f"Default *{value}*" not in para:
            wrong.append((key, value))
    assert not wrong, f"entries not stating the shipped default: {wrong}"


def case_signals():
    text = section("SIGNALS")
    for sig in ("SIGHUP", "SIGTERM", "SIGINT"):
        assert f"*{sig}*" in text, sig


def case_files():
    text = section("FILES")
    assert "@CONFDIR@/blossomd.conf" in text and "/var/lib/blossomd" in text


def main():
    tap = Tap()
    tap.case("every --help flag is in OPTIONS", case_flags)
    tap.case("CONFIGURATION lists exactly the keys of conf/blossomd.conf", case_keys)
    tap.case("each key's entry states the shipped default", case_defaults)
    tap.case("SIGNALS: SIGHUP, SIGTERM, SIGINT", case_signals)
    tap.case("FILES: the config file and the data directory", case_files)
    tap.done()


if __name__ == "__main__":
    main()
