#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Lint of systemd/blossomd.service as configured for this build (the file `meson install`
copies, byte for byte, as the install test checks): systemd-analyze verify says nothing,
systemd-analyze security scores it at most 2.0, it carries the settings the service relies
on, and the commands it runs work.

Usage: unit.py UNIT SBINDIR CONFDIR (with $BLOSSOMD_BIN and $BLOSSOMD_SOURCE_ROOT set);
prints TAP."""
import os
import re
import shutil
import subprocess
import sys

from servicetest import Skip, Tap, env_path, read, tempdir, write

UNIT, SBINDIR, CONFDIR = sys.argv[1:4]
BIN = env_path("BLOSSOMD_BIN")
SRC = env_path("BLOSSOMD_SOURCE_ROOT")
MAX_EXPOSURE = 2.0
INSTALLED_BIN = os.path.join(SBINDIR, "blossomd")
INSTALLED_CONF = os.path.join(CONFDIR, "blossomd.conf")


def settings():
    """[(section, key, value)] in file order (keys may repeat, e.g. SystemCallFilter=)."""
    out, section = [], None
    for line in read(UNIT).splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.append((section, key.strip(), value.strip()))
    return out


def values(key):
    return [v for _, k, v in settings() if k == key]


def value(key):
    vs = values(key)
    assert len(vs) == 1, f"{key}= set {len(vs)} times: {vs}"
    return vs[0]


def analyze(*args):
    exe = shutil.which("systemd-analyze")
    if not exe:
        raise Skip("systemd-analyze not installed (Debian package systemd)")
    env = dict(os.environ, SYSTEMD_COLORS="0", SYSTEMD_PAGER="", LC_ALL="C.UTF-8")
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=60)


def unit_for_this_build(tmp):
    """A copy of the unit whose binary is this build's (systemd-analyze verify wants every
    command to exist); everything else unchanged."""
    text = read(UNIT)
    assert INSTALLED_BIN in text
    path = os.path.join(tmp, "blossomd.service")
    write(path, text.replace(INSTALLED_BIN, BIN))
    return path


def case_verify():
    with tempdir("unit") as tmp:
        r = analyze("verify", "--man=no", unit_for_this_build(tmp))
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", \
        f"exit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}"


def case_security():
    with tempdir("unit") as tmp:
        r = analyze("security", "--offline=yes", "--no-pager", unit_for_this_build(tmp))
    m = re.search(r"Overall exposure level for blossomd\.service: (\d+\.\d+)", r.stdout)
    assert m, f"no exposure line (exit {r.returncode})\n{r.stdout}\n{r.stderr}"
    score = float(m.group(1))
    print(f"# exposure level {score} (at most {MAX_EXPOSURE})")
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}\n{r.stdout}"


def case_paths():
    pre = value("ExecStartPre").split()
    start = value("ExecStart").split()
    assert pre == [INSTALLED_BIN, "--config", INSTALLED_CONF, "--test-config"], pre
    assert start == [INSTALLED_BIN, "--config", INSTALLED_CONF], start


def case_lifecycle():
    assert value("Type") == "notify"
    assert value("NotifyAccess") == "main"
    assert value("ExecReload").split() in (["kill", "-HUP", "$MAINPID"],
                                           ["/bin/kill", "-HUP", "$MAINPID"])
    assert value("Restart") == "on-failure"
    m = re.fullmatch(r"(\d+)s", value("WatchdogSec"))
    assert m and int(m.group(1)) > 0, value("WatchdogSec")
    assert int(value("LimitNOFILE")) >= 10000 + 64  # max_connections default + reserve
    assert value("WantedBy") == "multi-user.target"


def case_state_directory():
    # StateDirectory=blossomd is /var/lib/blossomd, the only writable place under
    # ProtectSystem=strict: the shipped config must keep its snapshots there.
    assert value("DynamicUser") == "yes"
    assert value("StateDirectory") == "blossomd"
    conf = read(os.path.join(SRC, "conf", "blossomd.conf"))
    m = re.search(r"^data_dir\s*=\s*(\S+)\s*$", conf, re.M)
    assert m and m.group(1) == "/var/lib/blossomd", m and m.group(0)
    assert "ReadWritePaths" not in {k for _, k, _ in settings()}


def case_sandbox():
    want = {
        "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
        "PrivateDevices": "yes", "NoNewPrivileges": "yes", "MemoryDenyWriteExecute": "yes",
        "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "CapabilityBoundingSet": "",
        "SystemCallArchitectures": "native", "LockPersonality": "yes",
        "RestrictNamespaces": "yes", "RestrictRealtime": "yes", "RestrictSUIDSGID": "yes",
        "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "ProtectClock": "yes",
        "ProtectHostname": "yes", "UMask": "0077", "IPAddressDeny": "any",
    }
    bad = {k: (values(k), v) for k, v in want.items() if values(k) != [v]}
    assert not bad, f"settings (found, wanted): {bad}"
    assert values("SystemCallFilter")[0] == "@system-service", values("SystemCallFilter")


def case_test_config_command():
    # The unit's ExecStartPre, run with this build's binary on the shipped configuration.
    cmd = [BIN if a == INSTALLED_BIN else a for a in value("ExecStartPre").split()]
    cmd = [os.path.join(SRC, "conf", "blossomd.conf") if a == INSTALLED_CONF else a
           for a in cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "configuration OK\n", ""), r


def main():
    tap = Tap()
    tap.case("systemd-analyze verify --man=no: exit 0, no output", case_verify)
    tap.case(f"systemd-analyze security --offline=yes: exposure <= {MAX_EXPOSURE}",
             case_security)
    tap.case("ExecStartPre/ExecStart run the installed binary on the installed config",
             case_paths)
    tap.case("Type=notify, SIGHUP reload, watchdog, restart, LimitNOFILE, install target",
             case_lifecycle)
    tap.case("DynamicUser + StateDirectory=blossomd match the shipped data_dir",
             case_state_directory)
    tap.case("sandboxing settings", case_sandbox)
    tap.case("the ExecStartPre command passes on the shipped config", case_test_config_command)
    tap.done()


if __name__ == "__main__":
    main()
