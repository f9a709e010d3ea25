#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint: the four places a user reads blossomd's settings agree. Every flag of `blossomd
--help` is in the man page's SYNOPSIS and OPTIONS and in doc/configuration.md's flag table, and
no other; every key of conf/config.c's key table is in the shipped conf/blossomd.conf, the man
page's CONFIGURATION and doc/configuration.md's key table, and no other; and each key has one
default everywhere: the shipped file's value, the man page's "Default *value*", the table's
default column, and `(default value)` in --help for the flag that sets it. (That the shipped
file holds the built-in defaults is tests/conf's test_shipped_file_is_defaults.)

Usage: config_docs.py (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import os
import re
import subprocess

from servicetest import Tap, env_path, read

BIN = env_path("BLOSSOMD_BIN")
SRC = env_path("BLOSSOMD_SOURCE_ROOT")
PAGE = read(os.path.join(SRC, "doc", "blossomd.8.scd"))
CONF = read(os.path.join(SRC, "conf", "blossomd.conf"))
DOC = read(os.path.join(SRC, "doc", "configuration.md"))
CODE = read(os.path.join(SRC, "conf", "config.c"))


def man_section(name):
    m = re.search(rf"^# {name}\n(.*?)(?=^# |\Z)", PAGE, re.M | re.S)
    assert m, f"no section {name} in the man page"
    return m.group(1)


def doc_table(first_column):
    """The rows of doc/configuration.md's table whose header starts `| first_column |`, as
    lists of cells."""
    m = re.search(rf"^\| {first_column} \|.*\n\|[-|]+\|\n((?:\|.*\n)+)", DOC, re.M)
    assert m, f"no table '| {first_column} |' in doc/configuration.md"
    return [[c.strip() for c in row.strip().strip("|").split("|")]
            for row in m.group(1).splitlines()]


def help_text():
    r = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    return r.stdout


def help_flags():
    """{--flag: its --help entry} of the option lines of --help."""
    entries, flag = {}, None
    for line in help_text().splitlines():
        m = re.match(r"\s+(?:-\w, )?(--[a-z][a-z-]+)", line)
        if m:
            flag = m.group(1)
            entries[flag] = line
        elif flag and line.startswith(" " * 8):
            entries[flag] += " " + line.strip()
        else:
            flag = None
    return entries


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text))


def code_keys():
    return re.findall(r'^\s*\{"(\w+)", CONF_', CODE, re.M)


def conf_values():
    return dict(re.findall(r"^(\w+)\s*=[ \t]*(.*?)\s*$", CONF, re.M))


def man_defaults():
    """{key: the value of its "Default *value*", or None} of the man page's CONFIGURATION."""
    parts = re.split(r"^\*(\w+)\* = .*$", man_section("CONFIGURATION"), flags=re.M)
    out = {}
    for i in range(1, len(parts), 2):
        m = re.search(r"Default\s+\*([^*]+)\*", parts[i + 1])
        out[parts[i]] = m.group(1) if m else None
    return out


def doc_defaults():
    return {row[0]: row[1] for row in doc_table("key")}


def case_flags():
    want = set(help_flags())
    assert len(want) >= 11, want
    places = {
        "the man page's SYNOPSIS": flags_in(man_section("SYNOPSIS")),
        "the man page's OPTIONS": set(re.findall(r"^(?:\*-\w\*, )?\*(--[a-z-]+)\*",
                                                 man_section("OPTIONS"), re.M)),
        "doc/configuration.md's flag table": {f for row in doc_table("flag")
                                               for f in flags_in(row[0])},
    }
    for where, got in places.items():
        assert got == want, f"{where}: missing {sorted(want - got)}, extra {sorted(got - want)}"


def case_keys():
    want = code_keys()
    assert len(want) == len(set(want)) and len(want) >= 30, want
    places = {
        "conf/blossomd.conf": list(conf_values()),
        "the man page's CONFIGURATION": list(man_defaults()),
        "doc/configuration.md's key table": list(doc_defaults()),
    }
    for where, got in places.items():
        assert set(got) == set(want), \
            f"{where}: missing {sorted(set(want) - set(got))}, extra {sorted(set(got) - set(want))}"
        assert got == want, f"{where}: not in conf/config.c's order"


def case_defaults():
    man, doc, wrong = man_defaults(), doc_defaults(), []
    for key, value in conf_values().items():
        if value == "":
            if man.get(key) is not None or doc.get(key) != "(empty)":
                wrong.append((key, "(empty)", man.get(key), doc.get(key)))
        elif man.get(key) != value or doc.get(key) != value:
            wrong.append((key, value, man.get(key), doc.get(key)))
    assert not wrong, f"(key, conf, man, doc) that differ: {wrong}"


def case_help_defaults():
    # A flag that sets a key states that key's default, the shipped file's.
    conf, wrong = conf_values(), []
    for flag, entry in help_flags().items():
        key = flag[2:].replace("-", "_")
        if key in conf:
            m = re.search(r"\(default ([^)]+)\)", entry)
            if not m or m.group(1) != conf[key]:
                wrong.append((flag, m and m.group(1), conf[key]))
    assert not wrong, f"(flag, --help's default, conf's): {wrong}"


def case_test_config_hint():
    # Without --config, --test-config checks the defaults only: the file's header must say how
    # to check the file itself.
    assert "blossomd --config FILE --test-config" in CONF.split("\n[blossomd]\n")[0]


def main():
    tap = Tap()
    tap.case("the flags of --help, and no others, in the man page and doc/configuration.md",
             case_flags)
    tap.case("conf/config.c's keys, in its order, in the shipped file, the man page and "
             "doc/configuration.md", case_keys)
    tap.case("each key's default: the shipped file's, in the man page and "
             "doc/configuration.md", case_defaults)
    tap.case("each flag that sets a key gives the same default in --help", case_help_defaults)
    tap.case("conf/blossomd.conf's header checks a file with --config FILE --test-config",
             case_test_config_hint)
    tap.done()


if __name__ == "__main__":
    main()
