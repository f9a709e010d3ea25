#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""blossomd under a fake service manager: the test binds the unix datagram socket named by
$NOTIFY_SOCKET, as systemd does for Type=notify, and checks every message the daemon sends
(its fields, its order, its sender) through start, reload, stop and the watchdog.

Usage: notify.py (with $BLOSSOMD_BIN set); prints TAP."""
import os
import signal
import socket
import struct
import subprocess
import time

from servicetest import Tap, env_path, exchange, free_port, connect, spawn, stop, tempdir, write

BIN = env_path("BLOSSOMD_BIN")
PING = (b"ping\n", b"PONG\n")
WAIT = 10.0  # seconds for any one message; generous for sanitizer builds


# From <asm-generic/socket.h>; Python's socket module does not name them.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS


class Listener:
    """The manager's end of $NOTIFY_SOCKET: a datagram socket that also receives the
    sender's credentials (SO_PASSCRED), as systemd checks them for NotifyAccess=main, and the
    time the kernel queued each message (SO_TIMESTAMPNS), so a busy test process does not
    blur the daemon's timing."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sent_at = None  # kernel time (s) of the last message received
        self.sock.bind(path)
        # What the daemon is told: abstract names ("\0name") are written "@name".
        self.address = "@" + path[1:] if path.startswith("\0") else path

    def recv(self, timeout=WAIT):
        """The next message as (fields in order as [(key, value)], sender pid), or None."""
        self.sock.settimeout(timeout)
        try:
            data, anc, _, _ = self.sock.recvmsg(
                4096, socket.CMSG_SPACE(12) + socket.CMSG_SPACE(16))
        except socket.timeout:
            return None
        pid = None
        self.sent_at = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
            elif level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", payload[:16])
                self.sent_at = sec + nsec / 1e9
        fields = []
        for line in data.decode().split("\n"):
            assert "=" in line, f"malformed notify line {line!r} in {data!r}"
            key, value = line.split("=", 1)
            fields.append((key, value))
        return fields, pid

    def expect(self, keys, proc, timeout=WAIT):
        """The next message, asserting its field names are exactly keys (in order) and that
        it came from proc. Returns its fields as a dict."""
        got = self.recv(timeout)
        assert got is not None, f"no message within {timeout} s (expected {keys})"
        fields, pid = got
        assert [k for k, _ in fields] == keys, f"expected fields {keys}, got {fields}"
        assert pid == proc.pid, f"sent by pid {pid}, not by the daemon (pid {proc.pid})"
        return dict(fields)

    def expect_nothing(self, seconds):
        got = self.recv(seconds)
        assert got is None, f"unexpected message {got}"

    def close(self):
        self.sock.close()


class Daemon:
    """blossomd on free ports with its own config file and data dir inside tmp."""

    def __init__(self, tmp, env, binary=BIN):
        self.tmp = tmp
        self.port, self.http_port = free_port(), free_port()
        self.conf = os.path.join(tmp, "blossomd.conf")
        self.log = os.path.join(tmp, "daemon.log")
        write(self.conf, "[blossomd]\nlog_level = info\n")
        args = [binary, "--config", self.conf, "--port", str(self.port),
                "--http-port", str(self.http_port), "--data-dir", os.path.join(tmp, "data")]
        base = {"NOTIFY_SOCKET": None, "WATCHDOG_USEC": None, "WATCHDOG_PID": None}
        base.update(env)
        with open(self.log, "wb") as log:
            self.proc = spawn(args, env=base, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.pid = self.proc.pid

    def logtext(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def monotonic_usec():
    return int(time.monotonic() * 1_000_000)


# ---- one daemon through start, reload (good and bad file) and stop, message by message ----

class Session:
    def __init__(self):
        self.tmpdir = tempdir("notify")
        self.tmp = self.tmpdir.name
        self.lis = Listener(os.path.join(self.tmp, "notify.sock"))
        self.d = None

    def close(self):
        if self.d:
            self.d.kill()
        self.lis.close()
        self.tmpdir.cleanup()


def case_start(s):
    s.d = Daemon(s.tmp, {"NOTIFY_SOCKET": s.lis.address})
    m = s.lis.expect(["STATUS"], s.d.proc)
    assert m["STATUS"] == f"loading snapshots from {s.tmp}/data", m
    m = s.lis.expect(["STATUS"], s.d.proc)
    assert m["STATUS"] == "replaying the write-ahead log", m
    m = s.lis.expect(["READY", "STATUS"], s.d.proc)
    assert m["READY"] == "1"
    assert m["STATUS"] == (f"serving 0 filters on 127.0.0.1 port {s.d.port}, "
                           f"HTTP port {s.d.http_port}"), m["STATUS"]
    # READY means serving: both ports answer at once, without retrying.
    exchange(s.d.port, *PING)
    with connect(s.d.http_port) as c:
        c.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head = c.recv(4096)
    assert head.startswith(b"HTTP/1.1 200 "), head
    exchange(s.d.port, b"create f\nset f k\n", b"Done\nYes\n")


def case_reload(s):
    before = monotonic_usec()
    os.kill(s.d.pid, signal.SIGHUP)
    m = s.lis.expect(["RELOADING", "MONOTONIC_USEC", "STATUS"], s.d.proc)
    after = monotonic_usec()
    assert m["RELOADING"] == "1"
    assert before <= int(m["MONOTONIC_USEC"]) <= after, (before, m["MONOTONIC_USEC"], after)
    m = s.lis.expect(["READY", "STATUS"], s.d.proc)
    assert m["READY"] == "1" and f"port {s.d.port}" in m["STATUS"], m
    exchange(s.d.port, *PING)


def case_reload_bad_file(s):
    # A reload that fails must still end in READY=1, or systemd would wait in "reloading".
    write(s.d.conf, "[blossomd]\nlog_level = loud\n")
    os.kill(s.d.pid, signal.SIGHUP)
    s.lis.expect(["RELOADING", "MONOTONIC_USEC", "STATUS"], s.d.proc)
    m = s.lis.expect(["READY", "STATUS"], s.d.proc)
    assert m["READY"] == "1"
    assert "reload failed" in s.d.logtext()
    exchange(s.d.port, *PING)


def case_stop(s):
    os.kill(s.d.pid, signal.SIGTERM)
    m = s.lis.expect(["STOPPING", "STATUS"], s.d.proc)
    assert m["STOPPING"] == "1"
    assert stop(s.d.proc, None) == 0, s.d.logtext()
    s.lis.expect_nothing(0.3)


def case_restart_loads_first(s):
    # The filter made above was saved at stop; the next start loads it before READY=1.
    s.d = Daemon(s.tmp, {"NOTIFY_SOCKET": s.lis.address})
    s.lis.expect(["STATUS"], s.d.proc)
    s.lis.expect(["STATUS"], s.d.proc)
    m = s.lis.expect(["READY", "STATUS"], s.d.proc)
    assert m["STATUS"].startswith("serving 1 filter on "), m
    exchange(s.d.port, b"check f k\n", b"Yes\n")
    os.kill(s.d.pid, signal.SIGTERM)
    s.lis.expect(["STOPPING", "STATUS"], s.d.proc)
    assert stop(s.d.proc, None) == 0, s.d.logtext()


def case_no_watchdog_without_usec(s):
    # The session's daemon ran without $WATCHDOG_USEC: everything it sent was checked above,
    # and no WATCHDOG=1 came in between (expect() would have failed on it).
    assert "watchdog" not in s.d.logtext().lower(), s.d.logtext()


# ---- watchdog ----

def pings(lis, d, seconds):
    """Kernel times of the WATCHDOG=1 messages received within seconds."""
    times = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        got = lis.recv(left)
        if got is None:
            break
        fields, pid = got
        assert fields == [("WATCHDOG", "1")], f"expected WATCHDOG=1 only, got {fields}"
        assert pid == d.pid, f"ping sent by pid {pid}, not the daemon ({d.pid})"
        assert lis.sent_at is not None, "no SCM_TIMESTAMPNS"
        times.append(lis.sent_at)
    return times


def watchdog_run(env, seconds, via_shell=False):
    """Start a daemon with the watchdog environment env, wait for READY, and return the
    arrival times of its pings over the next seconds, then stop it (exit 0 asserted)."""
    with tempdir("watchdog") as tmp:
        lis = Listener(os.path.join(tmp, "notify.sock"))
        env = dict(env, NOTIFY_SOCKET=lis.address)
        d = None
        try:
            d = Daemon(tmp, env, binary=with_own_pid(tmp) if via_shell else BIN)
            # Before READY: the loading status, and maybe pings (the timer starts first).
            while True:
                got = lis.recv(WAIT)
                assert got is not None, "no READY=1"
                if got[0][0] == ("READY", "1"):
                    break
                assert got[0] == [("WATCHDOG", "1")] or got[0][0][0] == "STATUS", got
            times = pings(lis, d, seconds)
            os.kill(d.pid, signal.SIGTERM)
            while True:  # a last ping may cross the stop
                got = lis.recv(WAIT)
                assert got is not None, "no STOPPING=1"
                if got[0][0] == ("STOPPING", "1"):
                    break
                assert got[0] == [("WATCHDOG", "1")], got
            assert stop(d.proc, None) == 0, d.logtext()
            return times
        finally:
            if d:
                d.kill()
            lis.close()


def with_own_pid(tmp):
    """A script that runs blossomd with WATCHDOG_PID set to its own pid, as systemd sets it:
    the shell exports its pid ($$) and execs the daemon, which keeps that pid."""
    shim = os.path.join(tmp, "with-own-pid")
    write(shim, f'#!/bin/sh\nexport WATCHDOG_PID=$$\nexec "{BIN}" "$@"\n')
    os.chmod(shim, 0o755)
    return shim


def check_pings(times, interval, seconds):
    # Pings every interval (half of WATCHDOG_USEC); allow for a slow, loaded machine but never
    # a gap that would let the watchdog (2 * interval) fire.
    assert len(times) >= seconds / interval / 2, f"{len(times)} pings in {seconds} s"
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert gaps and max(gaps) < 2 * interval, f"gaps {gaps}"


def case_watchdog():
    # WATCHDOG_USEC = 300 ms: a ping every 150 ms.
    times = watchdog_run({"WATCHDOG_USEC": "300000"}, 1.5)
    check_pings(times, 0.15, 1.5)


def case_watchdog_own_pid():
    times = watchdog_run({"WATCHDOG_USEC": "300000"}, 1.0, via_shell=True)
    check_pings(times, 0.15, 1.0)


def case_watchdog_other_pid():
    # The settings are for another process (e.g. inherited): no pings.
    times = watchdog_run({"WATCHDOG_USEC": "300000", "WATCHDOG_PID": str(os.getpid())}, 0.6)
    assert times == [], times


def case_abstract_socket():
    with tempdir("notify-abstract") as tmp:
        lis = Listener(f"\0blossomd-test-{os.getpid()}-{time.monotonic_ns()}")
        d = None
        try:
            d = Daemon(tmp, {"NOTIFY_SOCKET": lis.address})
            lis.expect(["STATUS"], d.proc)
            lis.expect(["STATUS"], d.proc)
            assert lis.expect(["READY", "STATUS"], d.proc)["READY"] == "1"
            os.kill(d.pid, signal.SIGTERM)
            lis.expect(["STOPPING", "STATUS"], d.proc)
            assert stop(d.proc, None) == 0, d.logtext()
        finally:
            if d:
                d.kill()
            lis.close()


def case_socket_gone():
    # A manager that went away must not disturb the daemon: it serves, reloads, stops as usual.
    with tempdir("notify-gone") as tmp:
        d = Daemon(tmp, {"NOTIFY_SOCKET": os.path.join(tmp, "nobody-listens.sock"),
                         "WATCHDOG_USEC": "100000"})
        try:
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    connect(d.port, 0.5).close()
                    break
                except OSError:
                    assert d.proc.poll() is None, d.logtext()
                    assert time.monotonic() < deadline, "daemon not listening"
                    time.sleep(0.02)
            os.kill(d.pid, signal.SIGHUP)
            time.sleep(0.3)
            exchange(d.port, *PING)
            assert stop(d.proc) == 0, d.logtext()
        finally:
            d.kill()


def main():
    tap = Tap()
    s = Session()
    try:
        tap.case("start: STATUS=loading snapshots, then READY=1 + STATUS= once serving; all "
                 "from the main pid", case_start, s)
        tap.case("reload: SIGHUP gives RELOADING=1 + MONOTONIC_USEC=now, then READY=1",
                 case_reload, s)
        tap.case("reload of a bad file: still RELOADING=1 then READY=1, old config serves",
                 case_reload_bad_file, s)
        tap.case("stop: SIGTERM gives STOPPING=1, exit 0, nothing after", case_stop, s)
        tap.case("restart: snapshots loaded before READY=1 (STATUS counts them)",
                 case_restart_loads_first, s)
        tap.case("no WATCHDOG_USEC: no watchdog, no pings", case_no_watchdog_without_usec, s)
    finally:
        s.close()
    tap.case("watchdog: WATCHDOG_USEC=300000 gives WATCHDOG=1 every ~150 ms", case_watchdog)
    tap.case("watchdog: WATCHDOG_PID = the daemon's pid also pings", case_watchdog_own_pid)
    tap.case("watchdog: WATCHDOG_PID of another process: no pings", case_watchdog_other_pid)
    tap.case("abstract NOTIFY_SOCKET (@name) works", case_abstract_socket)
    tap.case("NOTIFY_SOCKET with nobody listening: serves, reloads, stops 0", case_socket_gone)
    tap.done()


if __name__ == "__main__":
    main()
