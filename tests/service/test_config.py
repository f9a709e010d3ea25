#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""--test-config as the unit's ExecStartPre uses it, on the shipped file and on copies of it
with one line broken the way an administrator might: exit status, exact message with file and
line, nothing on stdout, and no side effects (no port bound, no data directory made). What a
start refuses from the configuration (a public bind without a token, a weak or missing token)
--test-config refuses too, with the same message and exit status 1, checked against a real
start each time.
tests/integration/test_server.c covers the basics (a small good file, no file, an unknown
key, a cross-field rule, a bad flag, a missing file) and unit.py runs the unit's own
ExecStartPre on the shipped file; this adds the rest.

Usage: test_config.py (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import os
import socket
import subprocess

from servicetest import Tap, env_path, free_port, read, tempdir, write

BIN = env_path("BLOSSOMD_BIN")
SHIPPED = os.path.join(env_path("BLOSSOMD_SOURCE_ROOT"), "conf", "blossomd.conf")


def test_config(path, *flags):
    r = subprocess.run([BIN, "--config", path, *flags, "--test-config"], capture_output=True,
                       text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def shipped_with(tmp, old, new):
    """The shipped file with the line old replaced by new; returns (path, line number)."""
    lines = read(SHIPPED).split("\n")
    n = lines.index(old)
    lines[n] = new
    path = os.path.join(tmp, "blossomd.conf")
    write(path, "\n".join(lines))
    return path, n + 1


def expect_error(old, new, message):
    with tempdir("testconf") as tmp:
        path, line = shipped_with(tmp, old, new)
        got = test_config(path)
    assert got == (1, "", f"blossomd: {path}:{line}: {message}\n"), got


def case_bad_value():
    expect_error("port = 8673", "port = 70000",
                 "bad value for port: '70000' (must be between 1 and 65535)")


def case_bad_size():
    expect_error("max_memory = 4g", "max_memory = 4 GB",
                 "bad value for max_memory: '4 GB' (expected a number of bytes, optionally "
                 "with a k, m or g suffix: 4g, 512m, 65536)")


def case_size_with_unit():
    # The natural mistake: the message lists the suffixes that are accepted.
    expect_error("max_memory = 4g", "max_memory = 4GB",
                 "bad value for max_memory: '4GB' (expected a number of bytes, optionally "
                 "with a k, m or g suffix: 4g, 512m, 65536)")


def case_inline_comments():
    # A comment after a value, with '#' or ';', is a comment (as on a line of its own).
    with tempdir("testconf") as tmp:
        path, _ = shipped_with(tmp, "max_memory = 4g", "max_memory = 512m # half a gig")
        assert test_config(path) == (0, "configuration OK\n", ""), test_config(path)
        path, _ = shipped_with(tmp, "port = 8673", "port = 8673 ; text and RESP")
        assert test_config(path) == (0, "configuration OK\n", ""), test_config(path)


def case_syntax_error():
    expect_error("bind = 127.0.0.1", "bind 127.0.0.1",
                 "syntax error (expected '[section]' or 'key = value')")


def case_unknown_section():
    expect_error("[blossomd]", "[blossom]", "unknown section 'blossom'")


def case_typo_key():
    expect_error("idle_timeout = 300", "idle_timout = 300", "unknown key 'idle_timout'")


PUBLIC = ("refusing to listen on {} without auth_token_file: anyone on the network could "
          "use it")


def start_refuses(path, flags, message):
    """A start on path (with flags) exits 1 with message as its one log line, and
    --test-config on the same exits 1 with the same message, without the priority prefix."""
    got = test_config(path, *flags)
    assert got == (1, "", f"blossomd: {message}\n"), got
    with tempdir("testconf") as tmp:
        r = subprocess.run([BIN, "--config", path, *flags, "--port", str(free_port()),
                            "--http-port", str(free_port()), "--data-dir",
                            os.path.join(tmp, "data")],
                           capture_output=True, text=True, timeout=30)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", f"<3>blossomd: {message}\n"), r


def case_public_bind_in_file():
    with tempdir("testconf") as tmp:
        path, _ = shipped_with(tmp, "bind = 127.0.0.1", "bind = 0.0.0.0")
        start_refuses(path, [], PUBLIC.format("0.0.0.0"))
        path, _ = shipped_with(tmp, "bind = 127.0.0.1", "bind = ::1,::")
        start_refuses(path, [], PUBLIC.format("::"))


def case_public_bind_flag():
    start_refuses(SHIPPED, ["--bind", "127.0.0.1,0.0.0.0"], PUBLIC.format("0.0.0.0"))


def case_bad_token():
    with tempdir("testconf") as tmp:
        token = os.path.join(tmp, "token")
        write(token, "too-short\n")
        path, _ = shipped_with(tmp, "auth_token_file =", f"auth_token_file = {token}")
        start_refuses(path, ["--bind", "0.0.0.0"],
                      f"refusing to start: auth_token_file {token}: token is 9 bytes, at "
                      "least 32 are required")
        os.unlink(token)
        start_refuses(path, [],
                      f"refusing to start: auth_token_file {token}: No such file or directory")


def case_public_bind_with_token():
    with tempdir("testconf") as tmp:
        token = os.path.join(tmp, "token")
        write(token, "0123456789abcdef0123456789abcdef\n")
        path, _ = shipped_with(tmp, "auth_token_file =", f"auth_token_file = {token}")
        got = test_config(path, "--bind", "0.0.0.0")
        assert got == (0, "configuration OK\n", ""), got


def case_directory():
    with tempdir("testconf") as tmp:
        code, out, err = test_config(tmp)
    assert code == 1 and out == "" and err.startswith(f"blossomd: {tmp}: "), (code, out, err)


def case_no_side_effects():
    # The daemon's port is taken and its data_dir does not exist: --test-config checks the
    # file only, so it passes, binds nothing and creates nothing.
    with tempdir("testconf") as tmp, socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        data = os.path.join(tmp, "data")
        got = test_config(SHIPPED, "--port", str(port), "--data-dir", data)
        assert got == (0, "configuration OK\n", ""), got
        assert not os.path.exists(data), "--test-config created the data directory"


def main():
    tap = Tap()
    tap.case("a bad port: exit 1, 'FILE:LINE: bad value ...' on stderr only", case_bad_value)
    tap.case("a size with a space and a unit: its line", case_bad_size)
    tap.case("max_memory = 4GB: the message lists the accepted suffixes", case_size_with_unit)
    tap.case("comments after a value, '#' and ';', are comments", case_inline_comments)
    tap.case("a line without '=': syntax error with its line", case_syntax_error)
    tap.case("a misspelt section header: its line", case_unknown_section)
    tap.case("a misspelt key: its line", case_typo_key)
    tap.case("bind = 0.0.0.0 (or ::) without a token: refused as a start refuses it",
             case_public_bind_in_file)
    tap.case("--bind with a public address without a token: refused as a start refuses it",
             case_public_bind_flag)
    tap.case("a weak or missing token: refused as a start refuses it", case_bad_token)
    tap.case("a public bind with a good token passes", case_public_bind_with_token)
    tap.case("a directory as config file: exit 1, named", case_directory)
    tap.case("no side effects: port taken and data_dir missing still pass",
             case_no_side_effects)
    tap.done()


if __name__ == "__main__":
    main()
