#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Debian package: `dpkg-buildpackage -us -uc -b` on a copy of the source tree builds
blossomd_*.deb; it holds the daemon, the unit (enabled and started by its maintainer scripts),
the configuration as a conffile and the man page; lintian reports no errors, and every other
tag it reports is justified in debian/README.lintian; the packaged binary, unpacked with
`dpkg-deb -x`, passes --test-config on the packaged configuration.

The copy is the working tree as it would be committed: tracked files and untracked ones git
does not ignore (git ls-files --cached --others --exclude-standard), so the package is built
from a clean tree, never from this checkout's build directories or leftovers. The package's
own build runs no tests (DEB_BUILD_OPTIONS=nocheck; debian/rules skips them anyway): CI runs
them from scripts/test.

Usage: deb.py (with $BLOSSOMD_SOURCE_ROOT set); prints TAP."""
import glob
import os
import re
import shutil
import subprocess

from servicetest import Skip, Tap, env_path, read, tempdir

SRC = env_path("BLOSSOMD_SOURCE_ROOT")
TOOLS = ("git", "dpkg-buildpackage", "dh", "dpkg-deb", "lintian")


def run(args, timeout, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    assert r.returncode == 0, (f"{' '.join(args)} failed ({r.returncode}):\n"
                               f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r.stdout


class Package:
    """The package built once in a temporary directory, shared by the cases."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.deb = None
        self.changes = None
        self.contents = {}   # path in the package ("/usr/bin/blossomd") -> dpkg-deb -c line
        self.root = os.path.join(tmp, "root")

    def need(self):
        if self.deb is None:
            raise Skip("no package was built")


def copy_source(dest):
    listed = run(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others",
                  "--exclude-standard"], 60)
    for rel in filter(None, listed.split("\0")):
        src = os.path.join(SRC, rel)
        if not os.path.lexists(src):   # tracked but deleted in the working tree
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)


def build_package(tmp):
    """Build the package from a copy of the tree in tmp/blossomd; return the paths of
    blossomd_*.deb and blossomd_*.changes (in tmp). Raises Skip when a tool is missing."""
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise Skip(f"{', '.join(missing)} not installed (scripts/bootstrap installs them)")
    if not os.path.exists(os.path.join(SRC, ".git")):
        raise Skip(f"{SRC} is not a git checkout")
    src = os.path.join(tmp, "blossomd")
    copy_source(src)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2", LC_ALL="C.UTF-8")
    run(["dpkg-buildpackage", "-us", "-uc", "-b"], 600, cwd=src, env=env)
    debs = glob.glob(os.path.join(tmp, "blossomd_*.deb"))
    changes = glob.glob(os.path.join(tmp, "blossomd_*.changes"))
    assert len(debs) == 1 and len(changes) == 1, os.listdir(tmp)
    return debs[0], changes[0]


def case_build(pkg):
    pkg.deb, pkg.changes = build_package(pkg.tmp)
    for line in run(["dpkg-deb", "-c", pkg.deb], 60).splitlines():
        # "-rwxr-xr-x root/root 391424 2026-12-03 11:04 ./usr/bin/blossomd"
        path = line.split(None, 5)[5].split(" -> ")[0]
        pkg.contents[path[1:].rstrip("/") or "/"] = line
    run(["dpkg-deb", "-x", pkg.deb, pkg.root], 60)


def unit_path(pkg):
    units = [p for p in ("/lib/systemd/system/blossomd.service",
                         "/usr/lib/systemd/system/blossomd.service") if p in pkg.contents]
    assert len(units) == 1, sorted(pkg.contents)
    return units[0]


def case_contents(pkg):
    pkg.need()
    c = pkg.contents
    assert c["/usr/bin/blossomd"].startswith("-rwxr-xr-x root/root"), c["/usr/bin/blossomd"]
    assert c["/etc/blossomd/blossomd.conf"].startswith("-rw-r--r-- root/root"), c
    assert "/usr/share/man/man8/blossomd.8.gz" in c, sorted(c)
    assert "/usr/share/doc/blossomd/copyright" in c, sorted(c)
    unit_path(pkg)
    # Nothing under /usr/local (a package never installs there) and no stray files: every
    # regular file is one of these.
    files = sorted(p for p, line in c.items() if line.startswith("-"))
    # The README, the Grafana dashboard and the Prometheus rules with the docs, the last two
    # uncompressed so they import as they are.
    doc = "/usr/share/doc/blossomd/"
    expected = sorted(["/usr/bin/blossomd", "/etc/blossomd/blossomd.conf", unit_path(pkg),
                       "/usr/share/man/man8/blossomd.8.gz", doc + "copyright",
                       doc + "changelog.gz", doc + "README.md.gz", doc + "blossomd.json",
                       doc + "blossomd.rules.yml"])
    assert files == expected, files


def case_docs(pkg):
    # The dashboard and the rules in the package are the checkout's, byte for byte.
    pkg.need()
    doc = os.path.join(pkg.root, "usr", "share", "doc", "blossomd")
    for name, src in (("blossomd.json", "contrib/grafana/blossomd.json"),
                      ("blossomd.rules.yml", "contrib/prometheus/blossomd.rules.yml")):
        assert read(os.path.join(doc, name)) == read(os.path.join(SRC, src)), name


def case_leftovers_ignored(pkg):
    # What dpkg-buildpackage leaves in the tree (debian/blossomd.postrm.debhelper, ...) is
    # ignored by .gitignore, so `git status` stays clean after a package build.
    pkg.need()
    src = os.path.join(pkg.tmp, "blossomd")
    sources = set(filter(None, run(["git", "-C", SRC, "ls-files", "-z", "--cached", "--others",
                                    "--exclude-standard"], 60).split("\0")))
    left = []
    for top, dirs, files in os.walk(src):
        for f in files:
            rel = os.path.relpath(os.path.join(top, f), src)
            if rel not in sources:
                left.append(rel)
    assert left, "the build left nothing behind: is this test still looking at the right tree?"
    r = subprocess.run(["git", "-C", SRC, "check-ignore", "--no-index", "--stdin"],
                       input="\n".join(left) + "\n", capture_output=True, text=True, timeout=60)
    shown = [f for f in left if f not in r.stdout.splitlines()]
    assert not shown, f"left by the build and not in .gitignore: {sorted(shown)}"


def control_file(pkg, name):
    return run(["dpkg-deb", "-I", pkg.deb, name], 60)


def case_control(pkg):
    pkg.need()
    info = run(["dpkg-deb", "-I", pkg.deb], 60)
    depends = re.search(r"^ Depends: (.*)$", info, re.M)
    assert depends, info
    # ${shlibs:Depends} filled in from the libraries the binary links.
    for lib in ("libc6", "libuv1", "libmicrohttpd12", "libsystemd0", "libinih1"):
        assert re.search(rf"\b{lib}\b", depends.group(1)), depends.group(1)
    assert control_file(pkg, "conffiles").split() == ["/etc/blossomd/blossomd.conf"]
    # dh_installsystemd: enabled and started on install, stopped on remove.
    postinst = control_file(pkg, "postinst")
    assert "deb-systemd-helper enable 'blossomd.service'" in postinst, postinst
    assert "deb-systemd-invoke $_dh_action 'blossomd.service'" in postinst, postinst
    prerm = control_file(pkg, "prerm")
    assert "deb-systemd-invoke stop 'blossomd.service'" in prerm, prerm


def case_lintian(pkg):
    pkg.need()
    r = subprocess.run(["lintian", "--display-info", pkg.changes], capture_output=True,
                       text=True, timeout=300)
    tags = [line for line in r.stdout.splitlines() if re.match(r"[EWIPX]: ", line)]
    for line in tags:
        print(f"# {line}", flush=True)
    errors = [line for line in tags if line.startswith("E: ")]
    assert not errors, errors
    assert r.returncode == 0, f"lintian exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    # Every tag kept is justified in debian/README.lintian, by name.
    justified = read(os.path.join(SRC, "debian", "README.lintian"))
    unjustified = [line for line in tags if line.split()[2] not in justified]
    assert not unjustified, f"not justified in debian/README.lintian: {unjustified}"


def case_unit_paths(pkg):
    pkg.need()
    unit = read(pkg.root + unit_path(pkg))
    for key in ("ExecStartPre", "ExecStart"):
        value = re.search(rf"^{key}=(.*)$", unit, re.M).group(1)
        assert value == ("/usr/bin/blossomd --config /etc/blossomd/blossomd.conf"
                         + (" --test-config" if key == "ExecStartPre" else "")), value
    assert re.search(r"^StateDirectory=blossomd$", unit, re.M), unit
    assert re.search(r"^DynamicUser=yes$", unit, re.M), unit
    # The shipped data_dir is the unit's state directory.
    conf = read(pkg.root + "/etc/blossomd/blossomd.conf")
    assert re.search(r"^data_dir = /var/lib/blossomd$", conf, re.M), "data_dir"


def case_man_page(pkg):
    pkg.need()
    # Roff with scdoc's zero-width escapes (\&) taken out.
    page = run(["zcat", pkg.root + "/usr/share/man/man8/blossomd.8.gz"], 60).replace("\\&", "")
    assert re.search(r'^\.TH "blossomd" "8" ', page, re.M), page[:300]
    # The page names the configuration where the package puts it.
    assert "/etc/blossomd/blossomd.conf" in page, "configuration path not in the man page"


def case_test_config(pkg):
    pkg.need()
    # --test-config reads the file only (no port bound, no data_dir needed), so the packaged
    # data_dir (/var/lib/blossomd) need not exist here.
    r = subprocess.run([pkg.root + "/usr/bin/blossomd", "--config",
                        pkg.root + "/etc/blossomd/blossomd.conf", "--test-config"],
                       capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "configuration OK\n", ""), r


def main():
    t = Tap()
    with tempdir("deb") as tmp:
        pkg = Package(tmp)
        t.case("dpkg-buildpackage builds blossomd_*.deb from a copy of the tree", case_build,
               pkg)
        t.case("package contents: binary, unit, conffile, man page, README, dashboard, rules, "
               "nothing else", case_contents, pkg)
        t.case("the dashboard and the rules in /usr/share/doc/blossomd, as in contrib/",
               case_docs, pkg)
        t.case("what the build leaves in the tree is in .gitignore", case_leftovers_ignored, pkg)
        t.case("control: shlibs Depends, conffiles, unit enabled and started", case_control,
               pkg)
        t.case("lintian: no errors, every other tag justified", case_lintian, pkg)
        t.case("packaged unit runs /usr/bin/blossomd on /etc/blossomd/blossomd.conf",
               case_unit_paths, pkg)
        t.case("packaged man page", case_man_page, pkg)
        t.case("packaged binary: --test-config on the packaged configuration",
               case_test_config, pkg)
    t.done()


if __name__ == "__main__":
    main()
