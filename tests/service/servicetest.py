# SPDX-License-Identifier: MIT
"""Shared pieces of the service tests: a small TAP runner and ways to start, reach and stop
blossomd. Standard library only (python3 from Debian)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ports import free_port  # noqa: E402,F401  (tests/ports.py; the service tests import it from here)


class Tap:
    """Run test cases and print TAP: one "ok"/"not ok" line per case, the plan at the end.
    A case is a function that raises (usually AssertionError) to fail, or Skip to skip."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def case(self, name, fn, *args):
        self.n += 1
        try:
            fn(*args)
        except Skip as e:
            print(f"ok {self.n} - {name} # SKIP {e}", flush=True)
            return
        except Exception:  # any failure of the case, reported with its traceback
            self.failed += 1
            print(f"not ok {self.n} - {name}", flush=True)
            for line in traceback.format_exc().splitlines():
                print(f"# {line}", flush=True)
            return
        print(f"ok {self.n} - {name}", flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)


class Skip(Exception):
    pass


def env_path(name):
    """The path in environment variable name (set by tests/service/meson.build)."""
    value = os.environ.get(name)
    assert value, f"${name} is not set (run this through meson test)"
    return value


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def wait_port(port, proc, timeout=10.0):
    """Wait until 127.0.0.1:port accepts a connection; fail if proc exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            connect(port, 0.5).close()
            return
        except OSError:
            pass
        assert proc.poll() is None, f"daemon exited with {proc.returncode} during start-up"
        assert time.monotonic() < deadline, f"port {port} not accepting after {timeout} s"
        time.sleep(0.02)


def exchange(port, request, expect, timeout=5.0):
    """Send request on a new connection and assert the reply is exactly expect (bytes)."""
    with connect(port, timeout) as s:
        s.sendall(request)
        got = b""
        deadline = time.monotonic() + timeout
        while len(got) < len(expect) and time.monotonic() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    assert got == expect, f"sent {request!r}: expected {expect!r}, got {got!r}"


def _die_with_parent():
    """In the child before exec: be killed if the test process dies (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def spawn(args, env=None, **kw):
    """Start args with env added to this process's environment (None values removed), its
    output to files or pipes as kw says, killed if the test process dies first."""
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.Popen(args, env=full, preexec_fn=_die_with_parent, **kw)


def stop(proc, sig=signal.SIGTERM, timeout=10.0):
    """Send sig (None: none, it was sent already) and wait for the exit status; SIGKILL (and
    fail) if that takes too long."""
    if sig is not None and proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"no exit within {timeout} s of signal {sig}")


def tempdir(tag):
    return tempfile.TemporaryDirectory(prefix=f"blossomd-{tag}-")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
