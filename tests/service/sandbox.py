#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The unit's seccomp and socket sandbox lets the daemon do its work: a session under strace
(start, filters created over text, RESP and HTTP, a filter big enough for the huge-page path,
snapshots, SIGHUP, SIGTERM with the final snapshot) makes only system calls that the unit's
SystemCallFilter= lines allow, opens only sockets of its RestrictAddressFamilies=, writes
only below data_dir (the one writable place under ProtectSystem=strict + StateDirectory=) and
opens nothing the unit hides (ProcSubset=pid, ProtectHome=, PrivateDevices=).
(Under the unit a denied call fails with EPERM, SystemCallErrorNumber=: a feature that
breaks only in production. This catches it here, e.g. a libuv that starts using io_uring.)

Usage: sandbox.py UNIT SANITIZE (SANITIZE: meson's b_sanitize; the sanitizer runtimes make
calls of their own, so a sanitized build is skipped), with $BLOSSOMD_BIN set; prints TAP."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from servicetest import (Skip, Tap, connect, env_path, exchange, free_port, read, spawn,
                         tempdir, wait_port, write)

UNIT, SANITIZE = sys.argv[1:3]
BIN = env_path("BLOSSOMD_BIN")


def unit_values(key):
    return [line.split("=", 1)[1].strip() for line in read(UNIT).splitlines()
            if line.startswith(key + "=")]


def syscall_groups():
    """{"@group": [members, possibly "@subgroups"]} from systemd-analyze."""
    r = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    groups, cur = {}, None
    for line in r.stdout.splitlines():
        if re.fullmatch(r"@[\w-]+", line):
            cur = groups.setdefault(line, [])
        elif cur is not None and line.strip() and not line.strip().startswith("#"):
            cur.append(line.strip())
    return groups


def expand(names, groups):
    out = set()
    for n in names:
        out |= expand(groups[n], groups) if n.startswith("@") else {n}
    return out


def allowed_syscalls():
    """What the unit's SystemCallFilter= lines allow: the first line is an allow list (no
    "~"), later "~" lines remove from it, as systemd.exec(5) describes."""
    groups = syscall_groups()
    lines = unit_values("SystemCallFilter")
    assert lines and not lines[0].startswith("~"), lines
    allow = set()
    for line in lines:
        deny = line.startswith("~")
        names = expand(line.lstrip("~").split(), groups)
        allow = allow - names if deny else allow | names
    return allow


class Session:
    """blossomd under strace -f, driven through a typical life."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.trace = os.path.join(tmp, "trace")
        self.log = os.path.join(tmp, "daemon.log")
        self.port, self.http_port = free_port(), free_port()
        conf = os.path.join(tmp, "blossomd.conf")
        write(conf, "[blossomd]\nsnapshot_interval = 1\n")
        self.data = os.path.join(tmp, "data")
        with open(self.log, "wb") as log:
            self.proc = spawn(["strace", "-f", "-qq", "-y", "-o", self.trace, BIN,
                               "--config", conf, "--port", str(self.port),
                               "--http-port", str(self.http_port), "--data-dir", self.data],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def daemon_pid(self):
        # The text port opens before the HTTP port and the "ready" line: wait for the line.
        deadline = time.monotonic() + 30
        while True:
            m = re.search(r"ready \(pid (\d+)\)", read(self.log))
            if m or time.monotonic() > deadline or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        assert m, read(self.log)
        return int(m.group(1))

    def run(self):
        try:
            wait_port(self.port, self.proc, timeout=30)
        except AssertionError:
            if "PTRACE" in read(self.log) or "ptrace" in read(self.log):
                raise Skip("strace cannot trace here (ptrace not permitted)")
            raise
        pid = self.daemon_pid()
        exchange(self.port, b"create small\nset small k\ncheck small k\n", b"Done\nYes\nYes\n",
                 timeout=30)
        exchange(self.port, b"create big capacity=3000000\nset big k\n", b"Done\nYes\n",
                 timeout=30)
        exchange(self.port, b"*3\r\n$6\r\nBF.ADD\r\n$1\r\nr\r\n$1\r\nk\r\n", b":1\r\n",
                 timeout=30)
        self.http_get("/v1/filters")
        exchange(self.port, b"flush\n", b"Done\n", timeout=30)
        time.sleep(1.5)  # a periodic snapshot on the threadpool
        os.kill(pid, signal.SIGHUP)
        time.sleep(0.3)
        exchange(self.port, b"set small k2\n", b"Yes\n", timeout=30)
        os.kill(pid, signal.SIGTERM)
        code = self.proc.wait(60)
        assert code == 0, f"exit {code}\n{read(self.log)}"

    def http_get(self, path):
        with connect(self.http_port, 30) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]

    def calls(self):
        """[(name, args text)] of every traced call."""
        out = []
        # A call that another thread's call interrupts prints in two lines, "<unfinished ...>"
        # then "<... name resumed>": it is listed where it began, and its arguments completed
        # when it resumes (a thread has one call in flight; one that never resumes, cut short
        # by the daemon's end, is listed with what it printed).
        unfinished = {}
        for line in read(self.trace).splitlines():
            m = re.match(r"(\d+)\s+(\w+)\((.*) <unfinished \.\.\.>$", line)
            if m:
                unfinished[m.group(1)] = len(out)
                out.append((m.group(2), m.group(3)))
                continue
            m = re.match(r"(\d+)\s+<\.\.\. (\w+) resumed>(.*)", line)
            i = unfinished.pop(m.group(1), None) if m else None
            if i is not None and out[i][0] == m.group(2):
                out[i] = (out[i][0], out[i][1] + m.group(3))
                continue
            m = re.match(r"\d+\s+(?:<\.\.\. )?(\w+)(?:\(| resumed>)(.*)", line)
            if m:
                out.append((m.group(1), m.group(2)))
        return out


def session():
    if SANITIZE not in ("", "none"):
        raise Skip(f"sanitized build (b_sanitize={SANITIZE}): its runtime makes calls of its own")
    if not shutil.which("strace"):
        raise Skip("strace not installed")
    if not shutil.which("systemd-analyze"):
        raise Skip("systemd-analyze not installed")
    tmp = tempdir("sandbox")
    s = Session(tmp.name)
    try:
        s.run()
        return s.calls(), s.data
    finally:
        if s.proc.poll() is None:
            # The daemon is strace's child and would outlive strace: kill it first.
            try:
                os.kill(s.daemon_pid(), signal.SIGKILL)
            except (AssertionError, OSError):
                pass
            s.proc.kill()
            s.proc.wait()
        tmp.cleanup()


CALLS = []
DATA = []


def case_session():
    calls, data = session()
    CALLS.extend(calls)
    DATA.append(data)
    assert len(CALLS) > 100, f"only {len(CALLS)} calls traced"


def case_syscalls():
    if not CALLS:
        raise Skip("no trace")
    used = {name for name, _ in CALLS} - {"execve"}  # strace's exec of the daemon itself
    denied = sorted(used - allowed_syscalls())
    assert not denied, f"calls the unit's SystemCallFilter= would refuse: {denied}"


def case_families():
    if not CALLS:
        raise Skip("no trace")
    allowed = set(unit_values("RestrictAddressFamilies")[0].split())
    families = {args.split(",")[0] for name, args in CALLS if name == "socket"}
    assert families, "no socket() traced"
    assert families <= allowed, f"socket families {sorted(families)} not all in {allowed}"


# With strace -y a descriptor prints as "9</path>".
FD_PATH = r"-?\d+<([^>]*)>"


def written_paths():
    """Paths the daemon created, wrote, renamed or removed."""
    out = []
    for name, args in CALLS:
        if name == "openat" and re.search(r"O_(WRONLY|RDWR|CREAT|TRUNC)", args):
            m = re.search(r"= " + FD_PATH, args)
            if m:
                out.append(m.group(1))
        elif name in ("mkdir", "mkdirat") and re.search(r"\) += 0$", args):
            out.append(re.search(r'"([^"]*)"', args).group(1))
        elif name in ("unlinkat", "renameat", "renameat2", "linkat"):
            for m in re.finditer(FD_PATH + r', "([^"]*)"', args):
                out.append(os.path.join(m.group(1), m.group(2)))
        elif name in ("unlink", "rename", "truncate", "link"):
            out.extend(re.findall(r'"([^"]*)"', args))
    return out


def case_writes():
    if not CALLS:
        raise Skip("no trace")
    data = DATA[0]
    paths = written_paths()
    assert any(p.startswith(data + "/") for p in paths), f"no snapshot written: {paths}"
    outside = sorted({p for p in paths if p != data and not p.startswith(data + "/")})
    assert not outside, f"written outside data_dir {data}: {outside}"


# What PrivateDevices= leaves in /dev.
PSEUDO_DEVICES = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                  "/dev/tty", "/dev/pts", "/dev/ptmx", "/dev/shm"}


def hidden(path):
    """True if the unit's sandbox hides path from the daemon."""
    if path.startswith("/proc/"):
        first = path.split("/")[2]
        return not (first in ("self", "thread-self") or first.isdigit())
    if path.startswith("/dev/"):
        return not any(path == d or path.startswith(d + "/") for d in PSEUDO_DEVICES)
    return any(path == d or path.startswith(d + "/") for d in ("/home", "/root", "/run/user"))


def case_hidden():
    if not CALLS:
        raise Skip("no trace")
    paths = set()
    for name, args in CALLS:
        if name in ("open", "openat", "stat", "newfstatat", "statx", "access", "faccessat",
                    "faccessat2", "readlink", "readlinkat", "opendir"):
            paths.update(re.findall(r'"(/[^"]*)"', args))
    # The test's own files (config, data_dir) sit in its temporary directory, wherever that is.
    tmp = os.path.dirname(DATA[0])
    seen = sorted(p for p in paths if hidden(p) and not p.startswith(tmp + "/"))
    assert not seen, f"paths the unit hides from the daemon: {seen}"


def main():
    tap = Tap()
    tap.case("a session under strace: start, text/RESP/HTTP, snapshots, SIGHUP, SIGTERM",
             case_session)
    tap.case("every system call made is allowed by SystemCallFilter=", case_syscalls)
    tap.case("every socket() is of a family in RestrictAddressFamilies=", case_families)
    tap.case("files are written only below data_dir", case_writes)
    tap.case("nothing opened that ProcSubset=/ProtectHome=/PrivateDevices= hide", case_hidden)
    tap.done()


if __name__ == "__main__":
    main()
