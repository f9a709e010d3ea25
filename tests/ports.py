# SPDX-License-Identifier: MIT
"""Loopback ports for the daemons the tests start.

A port is drawn at random from 20000-31999, below the kernel's ephemeral range (32768 and up),
so that no client socket of a suite running beside this one is given it before its daemon
binds it (tests/integration/harness.c draws its daemons' ports the same way), and is never one
this process was given before (a daemon's text and HTTP ports must differ). Imported by the
Python tests (tests/service, tests/compat, tests/integration/guard.py); run as a program, it
prints one (tests/compat/lib.sh).
"""
import random
import socket

_given_ports = set()


def free_port():
    """A loopback TCP port that was free a moment ago (bound, then closed)."""
    while True:
        port = random.randrange(20000, 32000)
        if port in _given_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port


if __name__ == "__main__":
    print(free_port())
