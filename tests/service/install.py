#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`meson install --destdir` into a temporary directory: every file lands where it belongs
(binary in sbindir, unit in the systemd unit dir, config in sysconfdir/blossomd, man page in
mandir/man8), nothing else is installed, and the installed files work together.

Usage: install.py MESON BUILDDIR SBINDIR UNITDIR CONFDIR MAN8DIR MANPAGE (MANPAGE: the built
page, or "" when the build has no man page), with $BLOSSOMD_SOURCE_ROOT set; prints TAP.
The directories are absolute, as meson computed them from prefix and the options."""
import filecmp
import os
import subprocess
import sys

from servicetest import Skip, Tap, env_path, read, tempdir

MESON, BUILD, SBINDIR, UNITDIR, CONFDIR, MAN8DIR, MANPAGE = sys.argv[1:8]
SRC = env_path("BLOSSOMD_SOURCE_ROOT")


class Installed:
    def __init__(self, dest):
        self.dest = dest
        self.bin = self.at(SBINDIR, "blossomd")
        self.unit = self.at(UNITDIR, "blossomd.service")
        self.conf = self.at(CONFDIR, "blossomd.conf")
        self.man = self.at(MAN8DIR, "blossomd.8") if MANPAGE else None

    def at(self, directory, name):
        return os.path.join(self.dest + directory, name)

    def files(self):
        out = set()
        for root, _, names in os.walk(self.dest):
            out.update(os.path.join(root, n) for n in names)
        return out


def install(dest):
    # --no-rebuild: the build is the one under test, already made; never rebuild it from
    # inside its own test run.
    r = subprocess.run([MESON, "install", "-C", BUILD, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"meson install failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"


def case_binary(i):
    assert os.path.isfile(i.bin) and os.access(i.bin, os.X_OK), i.bin
    r = subprocess.run([i.bin, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("blossomd "), r


def case_unit(i):
    assert os.path.isfile(i.unit), i.unit
    built = os.path.join(BUILD, "systemd", "blossomd.service")
    assert filecmp.cmp(i.unit, built, shallow=False), "installed unit differs from the built one"


def case_unit_names_installed_files(i):
    # Every absolute path the unit runs or reads is one of the installed files.
    text = read(i.unit)
    bin_path = os.path.join(SBINDIR, "blossomd")
    conf_path = os.path.join(CONFDIR, "blossomd.conf")
    assert f"ExecStart={bin_path} --config {conf_path}\n" in text, text
    assert os.path.exists(i.dest + bin_path) and os.path.exists(i.dest + conf_path)


def case_conf(i):
    assert os.path.isfile(i.conf), i.conf
    shipped = os.path.join(SRC, "conf", "blossomd.conf")
    assert filecmp.cmp(i.conf, shipped, shallow=False), "installed config differs from conf/"


def case_installed_pair(i):
    # The installed binary accepts the installed config: what ExecStartPre runs.
    r = subprocess.run([i.bin, "--config", i.conf, "--test-config"], capture_output=True,
                       text=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "configuration OK\n", ""), r


def case_man(i):
    if not i.man:
        raise Skip("built without scdoc (-Dman=disabled or scdoc missing)")
    assert os.path.isfile(i.man), i.man
    assert filecmp.cmp(i.man, MANPAGE, shallow=False)
    page = read(i.man)
    assert '.TH "blossomd" "8"' in page, page[:300]
    for section in ("OPTIONS", "CONFIGURATION", "SIGNALS", "FILES"):
        assert f".SH {section}" in page, section
    # scdoc writes "\&" after a period (so roff never takes it for a sentence end).
    assert os.path.join(CONFDIR, "blossomd.conf") in page.replace("\\&", "")


def case_nothing_else(i):
    want = {i.bin, i.unit, i.conf} | ({i.man} if i.man else set())
    extra = i.files() - want
    assert not extra, f"installed but not expected: {sorted(extra)}"


def main():
    tap = Tap()
    with tempdir("install") as dest:
        tap.case("meson install --destdir succeeds", install, dest)
        i = Installed(dest)
        tap.case(f"binary in sbindir ({SBINDIR}) and runs", case_binary, i)
        tap.case(f"unit in {UNITDIR}, identical to the verified build/systemd one", case_unit, i)
        tap.case("the unit's ExecStart names the installed binary and config",
                 case_unit_names_installed_files, i)
        tap.case(f"config in {CONFDIR}, identical to conf/blossomd.conf", case_conf, i)
        tap.case("installed binary --test-config on the installed config: OK",
                 case_installed_pair, i)
        tap.case(f"man page blossomd(8) in {MAN8DIR}", case_man, i)
        tap.case("nothing else installed", case_nothing_else, i)
    tap.done()


if __name__ == "__main__":
    main()
