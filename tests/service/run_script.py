#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's first command, scripts/run: it starts a daemon that answers PING, and that
daemon stops cleanly by its PID (the script execs blossomd, so the script's PID is the
daemon's); it prints the message the README shows; and a source tree that does not compile
makes it show the compiler's error and exit 1, starting nothing.

scripts/run normally installs packages and builds ./build first. Here it must neither touch
the checkout nor rebuild the build under test while that build's tests run, so the test runs
a copy of scripts/ and conf/ in a temporary directory (the script's ./data lands there) with
BLOSSOMD_RUN_BIN naming the binary under test, which makes scripts/run skip bootstrap and
build. Free ports are passed as extra arguments, which scripts/run hands to blossomd.

Usage: run_script.py (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import os
import re
import shutil
import signal
import subprocess

from servicetest import (Skip, Tap, env_path, exchange, free_port, read, spawn, stop, tempdir,
                         wait_port)

BIN = os.path.abspath(env_path("BLOSSOMD_BIN"))
SRC = env_path("BLOSSOMD_SOURCE_ROOT")


class Run:
    """scripts/run from a copy of the checkout's scripts/ and conf/ in tmp."""

    def __init__(self, tmp, *args):
        self.root = os.path.join(tmp, "checkout")
        shutil.copytree(os.path.join(SRC, "scripts"), os.path.join(self.root, "scripts"))
        shutil.copytree(os.path.join(SRC, "conf"), os.path.join(self.root, "conf"))
        self.port, self.http = free_port(), free_port()
        self.err = os.path.join(tmp, "stderr")
        with open(self.err, "wb") as err, open(os.path.join(tmp, "stdout"), "wb") as out:
            self.proc = spawn([os.path.join(self.root, "scripts", "run"), "--port",
                               str(self.port), "--http-port", str(self.http), *args],
                              env={"BLOSSOMD_RUN_BIN": BIN}, stdin=subprocess.DEVNULL,
                              stdout=out, stderr=err)

    def stderr(self):
        return read(self.err)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def case_serves(r):
    wait_port(r.port, r.proc)
    exchange(r.port, b"ping\n", b"PONG\n")
    exchange(r.port, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n")


def case_huge_pages(r):
    """glibc's malloc is told to use transparent huge pages (GLIBC_TUNABLES), as the systemd
    unit tells it: after 20,000 small filters (about 15 MB of heap) some of the daemon's
    anonymous memory is in huge pages."""
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        if "[never]" in f.read():
            raise Skip("transparent huge pages are off on this machine")
    with open(f"/proc/{r.proc.pid}/environ", "rb") as f:
        assert b"GLIBC_TUNABLES=glibc.malloc.hugetlb=1" in f.read().split(b"\0")
    if b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout:
        raise Skip("AddressSanitizer's allocator, not glibc's malloc, serves this build")
    n = 20000
    req = b"".join(b"*4\r\n$10\r\nBF.RESERVE\r\n$%d\r\nh%d\r\n$4\r\n0.01\r\n$3\r\n100\r\n"
                   % (len(str(i)) + 1, i) for i in range(n))
    exchange(r.port, req, b"+OK\r\n" * n, timeout=30.0)
    with open(f"/proc/{r.proc.pid}/smaps_rollup") as f:
        huge = [int(line.split()[1]) for line in f if line.startswith("AnonHugePages:")]
    assert huge and huge[0] > 0, f"AnonHugePages: {huge}"


def case_pid_is_daemon(r):
    exe = os.readlink(f"/proc/{r.proc.pid}/exe")
    assert exe == os.path.realpath(BIN), f"pid {r.proc.pid} runs {exe}"


def readme_message():
    """The `text` block of the README's "## The two commands": scripts/run's message."""
    text = read(os.path.join(SRC, "README.md"))
    start = text.index("\n## The two commands\n")
    m = re.search(r"```text\n(.*?)```", text[start:text.index("\n## ", start + 1)], re.S)
    assert m, "no text block in The two commands"
    return m.group(1)


def case_message_and_data(r):
    # Exactly the README's message, but for the ports and the version: where it listens (text
    # and RESP, HTTP, the status page), where the data goes, how to stop it.
    version = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout.strip()
    want = readme_message().replace("8673", str(r.port)).replace("8674", str(r.http))
    want = re.sub(r"^blossomd \S+:", version + ":", want)
    err = r.stderr()
    assert err.startswith(want), f"--- README\n{want}--- scripts/run\n{err}"
    assert os.path.isdir(os.path.join(r.root, "data"))


def case_sigterm(r):
    code = stop(r.proc, signal.SIGTERM)
    assert code == 0, f"exit {code}\n{r.stderr()}"


def case_sigint():
    # What Ctrl-C sends, as the script's message promises.
    with tempdir("run") as tmp:
        r = Run(tmp)
        try:
            wait_port(r.port, r.proc)
            exchange(r.port, b"ping\n", b"PONG\n")
            code = stop(r.proc, signal.SIGINT)
            assert code == 0, f"exit {code}\n{r.stderr()}"
        finally:
            r.kill()


def case_bad_flag():
    # A bad setting stops the script at its --test-config step: exit 1, the reason shown.
    with tempdir("run") as tmp:
        r = Run(tmp, "--max-bogus")
        try:
            code = r.proc.wait(30)
            assert code != 0 and "--max-bogus" in r.stderr(), (code, r.stderr())
        finally:
            r.kill()
        r = Run(tmp + "/2", "--log-level", "loud")
        try:
            code = r.proc.wait(30)
            assert code == 1 and "bad value for log_level: 'loud'" in r.stderr(), \
                (code, r.stderr())
        finally:
            r.kill()


def copy_source(dst):
    """The source tree without its builds, data, git and node_modules."""
    skip = shutil.ignore_patterns("build*", ".git", "node_modules", "data")
    shutil.copytree(SRC, dst, ignore=skip)


def case_build_error():
    # A syntax error: scripts/run builds (no install step: BLOSSOMD_RUN_NO_BOOTSTRAP), shows
    # meson's progress and the compiler's error with its file and line, says the build failed
    # and exits 1 without starting a daemon.
    if not shutil.which("meson") or not shutil.which("cc"):
        raise Skip("meson or cc not installed")
    with tempdir("run") as tmp:
        root = os.path.join(tmp, "checkout")
        copy_source(root)
        main_c = os.path.join(root, "server", "main.c")
        with open(main_c, "a") as f:
            f.write("int blossomd_broken(;\n")
        line = read(main_c).count("\n")
        env = dict(os.environ, BLOSSOMD_RUN_NO_BOOTSTRAP="1")
        env.pop("BLOSSOMD_RUN_BIN", None)
        r = subprocess.run([os.path.join(root, "scripts", "run"), "--port", str(free_port())],
                           env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=600)
        out = r.stdout + r.stderr
        assert r.returncode == 1, f"exit {r.returncode}\n{out}"
        assert re.search(r"^\[\d+/\d+\] Compiling C object", out, re.M), out
        assert re.search(rf"server/main\.c:{line}:\d+: error: ", out), out
        assert "run: the build failed (the compiler's error is above)" in r.stderr, out
        assert not os.path.exists(os.path.join(root, "data")), "the build failed, yet ./data"


def main():
    tap = Tap()
    with tempdir("run") as tmp:
        r = Run(tmp)
        try:
            tap.case("scripts/run starts a daemon that answers PING (text and RESP)",
                     case_serves, r)
            tap.case("the script's PID is the daemon's (it execs blossomd)",
                     case_pid_is_daemon, r)
            tap.case("its malloc uses transparent huge pages, as the systemd unit's does",
                     case_huge_pages, r)
            tap.case("it prints where it listens, and keeps data in ./data",
                     case_message_and_data, r)
            tap.case("SIGTERM to that PID: clean exit 0", case_sigterm, r)
        finally:
            r.kill()
    tap.case("Ctrl-C (SIGINT): clean exit 0", case_sigint)
    tap.case("a bad flag or setting: no daemon, non-zero exit with the reason",
             case_bad_flag)
    tap.case("a syntax error: meson's progress, the compiler's error, exit 1, no daemon",
             case_build_error)
    tap.done()


if __name__ == "__main__":
    main()
