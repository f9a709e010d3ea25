#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real systemd: boot systemd as PID 1 in a container (systemd-nspawn), install the Debian
package in it with dpkg, and run the unit as packaged: the maintainer scripts enable and start
it, READY=1 makes it active, `systemctl reload` applies a changed setting, a SIGKILL'ed daemon
is restarted with its data, a hung one (SIGSTOP) is killed by the watchdog and restarted,
`systemctl stop` ends it cleanly, and `dpkg --purge` removes it and its data.
tests/service/notify.py checks the same protocol against a fake service manager; this checks
it against systemd itself, with the unit's sandbox in force.

The container needs no download: its root is a temporary directory holding a fresh /etc (a
new machine-id, so no first-boot presets enable anything; the host's passwd and group, which
the host's packages name), /usr and /var/lib/dpkg are the host's under throwaway overlays
(nspawn's --overlay=LOWER::TARGET puts the writable layer in a temporary directory it
deletes), so dpkg sees the host's installed packages, blossomd's dependencies among them, and
writes nothing to the host. --private-network gives it its own loopback, so the daemon's
default ports cannot collide with anything on the host. The test talks to it with nsenter.

Whatever the host has installed, the container starts without blossomd: if the host has the
package (a developer who tried the .deb on the build machine), its entry in the dpkg database
and its files are removed inside the container, from the throwaway overlays only, before the
package under test is installed. Otherwise dpkg in the container would take the install for
an upgrade of a package whose conffile the fresh /etc lacks (deleted by the admin, to dpkg):
no /etc/blossomd/blossomd.conf, and most cases failed.

Needs root, systemd-nspawn (systemd-container), nsenter and a merged-/usr host (Debian 12);
HTTP requests run the host's python3 in the container's network namespace.

Usage: systemd_real.py (with $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

from deb import build_package
from servicetest import Skip, Tap, read, tempdir, write

UNIT = "blossomd.service"
CONF = "/etc/blossomd/blossomd.conf"

# Run by the host's python3 inside the container's network namespace: one HTTP request,
# printed as the status code, a newline and the body.
HTTP_CLIENT = """
import sys, urllib.request, urllib.error
method, url, body = sys.argv[1], sys.argv[2], sys.argv[3]
req = urllib.request.Request(url, method=method, data=body.encode() if body else None,
                             headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
"""


# Run by the host's python3 inside the container (its root and overlays): package argv[1]
# made absent, as on a machine that never had it. Its files and links go, and the directories
# it leaves empty, deepest first; never a directory that is a link (its list names /lib, which
# on a merged-/usr root is the link to usr/lib). Then its info files and its stanza of the
# status file. Prints the number of paths removed, or "absent".
FORGET_PACKAGE = """
import os, sys
pkg, info = sys.argv[1], "/var/lib/dpkg/info"
mine = [f for f in os.listdir(info) if f.startswith((pkg + ".", pkg + ":"))]
lists = [os.path.join(info, f) for f in mine if f.endswith(".list")]
if not lists:
    print("absent")
    sys.exit(0)
paths = sorted({p.rstrip("\\n") for f in lists for p in open(f)}, reverse=True)
gone = 0
for p in paths:
    if os.path.isdir(p):
        if not os.path.islink(p) and os.path.normpath(p) != "/":
            try:
                os.rmdir(p)
                gone += 1
            except OSError:
                pass
    elif os.path.lexists(p):
        os.unlink(p)
        gone += 1
for f in mine:
    os.unlink(os.path.join(info, f))
with open("/var/lib/dpkg/status") as f:
    stanzas = f.read().split("\\n\\n")
kept = [s for s in stanzas if not s.lstrip("\\n").startswith("Package: " + pkg + "\\n")]
with open("/var/lib/dpkg/status", "w") as f:
    f.write("\\n\\n".join(kept))
print(gone)
"""


def _term_with_parent():
    """In nspawn before exec: SIGTERM if the test process dies, which nspawn turns into a
    clean shutdown of the container (a SIGKILL'ed nspawn would leave its systemd running)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


class Container:
    def __init__(self, tmp):
        self.tmp = tmp
        self.root = os.path.join(tmp, "root")
        self.name = f"blossomd-test-{os.getpid()}"
        self.machine_id = uuid.uuid4().hex
        self.proc = None
        self.pid = None   # the container's PID 1 (systemd), as the host sees it
        self.deb = None

    def make_root(self):
        for d in ("etc", "usr", "var/lib/dpkg", "var/log", "tmp", "run", "root", "dev",
                  "proc", "sys"):
            os.makedirs(os.path.join(self.root, d))
        # Merged /usr, as on the host: /bin, /lib ... are links into /usr.
        for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            if os.path.islink("/" + link):
                os.symlink(os.readlink("/" + link), os.path.join(self.root, link))
        # nspawn looks for os-release before it mounts /usr.
        shutil.copy("/usr/lib/os-release", os.path.join(self.root, "etc", "os-release"))
        write(os.path.join(self.root, "etc", "machine-id"), self.machine_id + "\n")
        for f in ("passwd", "group"):
            shutil.copy(os.path.join("/etc", f), os.path.join(self.root, "etc", f))

    def boot(self):
        log = open(os.path.join(self.tmp, "console.log"), "w")
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "--quiet", "--directory", self.root, "--machine", self.name,
             "--boot", "--register=no", "--keep-unit", "--private-network",
             "--console=pipe", "--overlay=/usr::/usr", "--overlay=/var/lib/dpkg::/var/lib/dpkg"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_term_with_parent)
        log.close()
        deadline = time.monotonic() + 30
        while self.pid is None:
            assert self.proc.poll() is None, (
                f"systemd-nspawn exited with {self.proc.returncode}:\n{self.console()}")
            assert time.monotonic() < deadline, f"no systemd in the container:\n{self.console()}"
            self.pid = self.find_init()
            time.sleep(0.05)
        # systemctl fails until systemd has its private socket; then --wait waits for boot.
        while True:
            r = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=60)
            state = r.stdout.strip()
            if state in ("running", "degraded"):
                break
            assert time.monotonic() < deadline + 30, (
                state, r.stderr, self.run("systemctl", "--failed", "--no-pager",
                                          check=False).stdout)
            time.sleep(0.1)

    def find_init(self):
        """The systemd the container runs as its PID 1: a child of nspawn whose root holds
        this container's machine-id (so nsenter never aims at the host)."""
        try:
            children = read(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").split()
        except OSError:
            return None
        for child in children:
            try:
                if (read(f"/proc/{child}/comm").strip() == "systemd" and
                        read(f"/proc/{child}/root/etc/machine-id").strip() == self.machine_id):
                    return int(child)
            except OSError:
                continue
        return None

    def console(self):
        return read(os.path.join(self.tmp, "console.log"))[-3000:]

    def run(self, *args, check=True, timeout=60):
        """args run inside the container (all its namespaces, its root)."""
        r = subprocess.run(["nsenter", "--target", str(self.pid), "--all", "--", *args],
                           capture_output=True, text=True, timeout=timeout)
        assert not check or r.returncode == 0, f"{args}: {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    def forget_host_package(self):
        """The host's blossomd, if installed, made absent in the container (FORGET_PACKAGE)."""
        out = self.run("python3", "-c", FORGET_PACKAGE, "blossomd").stdout.strip()
        if out != "absent":
            print(f"# the host has blossomd installed: {out} of its paths and its dpkg entry "
                  "removed in the container", flush=True)
        assert self.run("dpkg-query", "-W", "blossomd", check=False).returncode != 0

    def show(self, *props):
        out = self.run("systemctl", "show", UNIT, *(f"--property={p}" for p in props)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self):
        return self.run("journalctl", "--unit", UNIT, "--no-pager", "--output=cat").stdout

    def http(self, method, path, body=""):
        """(status, parsed JSON body) of a request to the daemon's HTTP port, from inside the
        container's network namespace."""
        r = subprocess.run(["nsenter", "--target", str(self.pid), "--net", "--", "python3",
                            "-c", HTTP_CLIENT, method, "http://127.0.0.1:8674" + path, body],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r
        status, text = r.stdout.split("\n", 1)
        return int(status), json.loads(text) if text.strip() else None

    def wait_restarted(self, old_pid, timeout=30):
        """Wait until the unit is active again under a main PID other than old_pid."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.show("ActiveState", "MainPID", "NRestarts")
            if s["ActiveState"] == "active" and s["MainPID"] not in ("0", old_pid):
                return s
            assert time.monotonic() < deadline, f"not restarted within {timeout} s: {s}"
            time.sleep(0.2)

    def poweroff(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        # nspawn turns SIGTERM into a clean shutdown of the container's systemd.
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            # Killing a PID namespace's init kills everything in it.
            if self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait()


def need(c):
    if c.pid is None:
        raise Skip("the container did not boot")
    if c.deb is None:
        raise Skip("no package")


def case_boot(c):
    if os.geteuid() != 0:
        raise Skip("needs root (systemd-nspawn)")
    for tool in ("systemd-nspawn", "nsenter"):
        if not shutil.which(tool):
            raise Skip(f"{tool} not installed (systemd-container, util-linux)")
    if not os.path.islink("/bin"):
        raise Skip("the host is not merged-/usr: its /usr alone is no root for the container")
    c.make_root()
    c.boot()
    version = c.run("systemctl", "--version").stdout.splitlines()[0]
    print(f"# container booted: {version}", flush=True)


def case_build(c):
    if c.pid is None:
        raise Skip("the container did not boot")
    c.deb, _ = build_package(os.path.join(c.tmp, "pkg"))


def case_install(c):
    need(c)
    shutil.copy(c.deb, os.path.join(c.root, "root", "blossomd.deb"))
    # The host image's policy-rc.d (Docker's, which forbids starting services while an image
    # is built) would stop the maintainer scripts from starting the unit; the container is a
    # booted system, so it goes, from the container's throwaway /usr layer only.
    c.run("rm", "-f", "/usr/sbin/policy-rc.d")
    c.forget_host_package()
    c.run("dpkg", "--install", "/root/blossomd.deb", timeout=120)
    # postinst enabled and started it; systemctl start returned once READY=1 came (Type=notify).
    assert c.run("systemctl", "is-enabled", UNIT, check=False).stdout.strip() == "enabled"
    assert c.run("systemctl", "is-active", UNIT, check=False).stdout.strip() == "active"
    s = c.show("MainPID", "StatusText", "NRestarts", "WatchdogUSec", "User", "DynamicUser",
               "Environment")
    assert s["StatusText"] == "serving 0 filters on 127.0.0.1 port 8673, HTTP port 8674", s
    assert s["Environment"] == "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", s
    assert s["NRestarts"] == "0" and s["WatchdogUSec"] == "30s", s
    assert s["DynamicUser"] == "yes", s
    journal = c.journal()
    assert "configuration OK" in journal, journal   # ExecStartPre's --test-config
    assert f"ready (pid {s['MainPID']})" in journal, journal
    assert c.http("GET", "/readyz") == (200, {"status": "ready"})
    # The data directory is the unit's StateDirectory, owned by the dynamic user.
    assert os.readlink(os.path.join(c.root, "var", "lib", "blossomd")) == "private/blossomd"


def case_reload(c):
    need(c)
    pid = c.show("MainPID")["MainPID"]
    conf = c.root + CONF
    text = read(conf)
    assert "\ndefault_capacity = 100000\n" in text
    write(conf, text.replace("\ndefault_capacity = 100000\n", "\ndefault_capacity = 5000\n"))
    c.run("systemctl", "reload", UNIT)
    s = c.show("MainPID", "ActiveState", "NRestarts")
    assert s == {"MainPID": pid, "ActiveState": "active", "NRestarts": "0"}, s
    assert "configuration reloaded from /etc/blossomd/blossomd.conf" in c.journal()
    # The new default applies to a filter created over HTTP without a capacity.
    assert c.http("PUT", "/v1/filters/reloaded", "{}")[0] == 201
    status, info = c.http("GET", "/v1/filters/reloaded")
    assert status == 200 and info["capacity"] == 5000, info


def case_sigkill_restart(c):
    need(c)
    assert c.http("PUT", "/v1/filters/kept", '{"capacity":1000,"error_rate":0.01}')[0] == 201
    assert c.http("PUT", "/v1/filters/kept/keys/k1") == (200, {"added": True})
    pid = c.show("MainPID")["MainPID"]
    c.run("kill", "-KILL", pid)
    # Restart=on-failure, RestartSec=2s; active again only once the new process is READY.
    s = c.wait_restarted(pid)
    assert s["NRestarts"] == "1", s
    # The acknowledged add survived the kill (the write-ahead log, wal_fsync = always).
    assert c.http("GET", "/v1/filters/kept/keys/k1") == (200, {"present": True})


def case_watchdog(c):
    need(c)
    # A 2 s watchdog (the unit has 30 s) so the test is quick; no core file of the abort.
    dropin = os.path.join(c.root, "etc", "systemd", "system", UNIT + ".d")
    os.makedirs(dropin)
    write(os.path.join(dropin, "watchdog.conf"),
          "[Service]\nWatchdogSec=2s\nTimeoutAbortSec=5s\nLimitCORE=0\n")
    c.run("systemctl", "daemon-reload")
    c.run("systemctl", "restart", UNIT)
    s = c.show("MainPID", "NRestarts", "WatchdogUSec")
    assert s["WatchdogUSec"] == "2s", s
    # The daemon pings: three watchdog periods go by without a restart.
    time.sleep(6)
    assert c.show("MainPID", "NRestarts", "ActiveState") == {
        "MainPID": s["MainPID"], "NRestarts": s["NRestarts"], "ActiveState": "active"}
    # A hung daemon does not: systemd aborts it and starts a new one.
    c.run("kill", "-STOP", s["MainPID"])
    after = c.wait_restarted(s["MainPID"])
    assert int(after["NRestarts"]) == int(s["NRestarts"]) + 1, (s, after)
    assert "Failed with result 'watchdog'" in c.run(
        "journalctl", "--unit", UNIT, "--no-pager").stdout
    assert c.http("GET", "/readyz") == (200, {"status": "ready"})


def case_stop(c):
    need(c)
    before = len(c.journal())
    c.run("systemctl", "stop", UNIT)
    assert c.run("systemctl", "is-active", UNIT, check=False).stdout.strip() == "inactive"
    s = c.show("Result", "ExecMainCode", "ExecMainStatus")
    # Exited (code 1 = CLD_EXITED) with status 0 on SIGTERM.
    assert s == {"Result": "success", "ExecMainCode": "1", "ExecMainStatus": "0"}, s
    journal = c.journal()[before:]
    assert re.search(r"SIGTERM received; shutting down\n(.*\n)*blossomd: stopped\n", journal), \
        journal


def case_purge(c):
    need(c)
    c.run("dpkg", "--purge", "blossomd", timeout=120)
    for path in ("/etc/blossomd", "/var/lib/private/blossomd", "/var/lib/blossomd",
                 "/etc/systemd/system/multi-user.target.wants/blossomd.service",
                 "/usr/bin/blossomd"):
        assert c.run("test", "-e", path, check=False).returncode != 0, path


def main():
    t = Tap()
    with tempdir("systemd") as tmp:
        c = Container(tmp)
        try:
            t.case("systemd boots as PID 1 in systemd-nspawn", case_boot, c)
            t.case("the Debian package builds", case_build, c)
            t.case("dpkg -i: unit enabled, started, active once READY", case_install, c)
            t.case("systemctl reload: SIGHUP applies the changed file", case_reload, c)
            t.case("SIGKILL of the main PID: restarted, data kept", case_sigkill_restart, c)
            t.case("watchdog: pings keep it, a hung daemon is aborted and restarted",
                   case_watchdog, c)
            t.case("systemctl stop: clean exit", case_stop, c)
            t.case("dpkg --purge: unit, configuration and data gone", case_purge, c)
        finally:
            c.poweroff()
    t.done()


if __name__ == "__main__":
    main()
