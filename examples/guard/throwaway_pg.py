#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A throwaway PostgreSQL cluster, for trying the guard and for its test and bench.

Debian's initdb and pg_ctl (/usr/lib/postgresql/<version>/bin, the newest one) make a cluster
in a temporary directory, listening on a free loopback port, its unix socket in that directory,
pg_stat_statements loaded (so PostgreSQL itself counts the queries it runs), fsync off (nothing
here is worth keeping). stop() ends it by the postmaster's PID, from postmaster.pid, and
removes the directory. As root, the cluster runs as the postgres user (initdb refuses root).

    python3 examples/guard/throwaway_pg.py    # prints the DSN, stops on Ctrl-C
"""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class PgError(Exception):
    pass


def pg_bindir():
    """The newest /usr/lib/postgresql/N/bin with initdb, or PgError."""
    dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.access(d + "/initdb", os.X_OK)]
    if not dirs:
        raise PgError("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")
    return max(dirs, key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0)


_given_ports = set()


def free_port():
    """A loopback TCP port that was free a moment ago, never one this process was given before
    (the kernel may hand the same free port out twice in a row)."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _given_ports:
            _given_ports.add(port)
            return port


def _gone(pid):
    """True once pid has exited (a zombie nobody reaps counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Cluster:
    def __init__(self, prefix="guard-pg."):
        self.bindir = pg_bindir()
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.pid = None
        self.port = None
        self.run_as = {}
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _run(self, *argv):
        p = subprocess.run([os.path.join(self.bindir, argv[0]), *argv[1:]], cwd=self.dir,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           **self.run_as)
        if p.returncode != 0:
            raise PgError(f"{argv[0]} exited {p.returncode}: {p.stderr.strip()}\n{self.log()}")
        return p.stdout

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def start(self):
        """initdb, then pg_ctl start on a free port (three tries); returns self."""
        self._run("initdb", "-D", self.data, "-U", "postgres", "--auth=trust",
                  "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C")
        base_conf = open(os.path.join(self.data, "postgresql.conf")).read()
        for _ in range(3):
            self.port = free_port()
            with open(os.path.join(self.data, "postgresql.conf"), "w") as f:
                f.write(base_conf + f"""
listen_addresses = '127.0.0.1'
port = {self.port}
unix_socket_directories = '{self.dir}'
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track = top
max_connections = 100
fsync = off
synchronous_commit = off
full_page_writes = off
""")
            try:
                self._run("pg_ctl", "-D", self.data, "-l", self.log_path, "-w", "-t", "30",
                          "start")
            except PgError:
                if "already in use" in self.log():
                    continue
                raise
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                self.pid = int(f.readline())
            self._run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.dsn,
                      "-c", "CREATE EXTENSION pg_stat_statements")
            return self
        raise PgError("no free port after three tries\n" + self.log())

    @property
    def dsn(self):
        return f"host=127.0.0.1 port={self.port} dbname=postgres user=postgres"

    def stop(self):
        """Fast shutdown by PID (SIGINT), SIGQUIT then SIGKILL if it lingers; rm the dir."""
        if self.pid is not None:
            for sig, wait in ((signal.SIGINT, 20), (signal.SIGQUIT, 5), (signal.SIGKILL, 5)):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while not _gone(self.pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if _gone(self.pid):
                    break
            self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM])
    pg = Cluster().start()
    try:
        print(f"postgres pid {pg.pid}, DSN: {pg.dsn}", flush=True)
        print(f"Ctrl-C (or kill {os.getpid()}) stops it and removes its directory", flush=True)
        signal.sigwait([signal.SIGINT, signal.SIGTERM])
    finally:
        pg.stop()
