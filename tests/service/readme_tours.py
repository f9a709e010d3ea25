# SPDX-License-Identifier: MIT
"""The README's quick tour, run as printed: every `console` block of the section "A quick
tour" (the text protocol with nc, RESP with redis-cli, HTTP with curl) is run against a fresh
daemon, command by command, and what each prints must be the README's lines byte for byte. The
only change made to a command is the ports (8673 and 8674 become free ones), so a README
example cannot drift from what blossomd answers."""
import os
import re
import subprocess

from servicetest import Skip, Tap, free_port, spawn, stop, tempdir, wait_port, env_path

README = os.path.join(env_path("BLOSSOMD_SOURCE_ROOT"), "README.md")


def tour_blocks():
    """The console blocks of "## A quick tour": lists of (command, expected output)."""
    text = open(README, encoding="utf-8").read()
    start = text.index("\n## A quick tour\n")
    end = text.index("\n## ", start + 1)
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", text[start:end], re.S):
        steps = []
        for line in body.splitlines(keepends=True):
            if line.startswith("$ "):
                steps.append([line[2:].rstrip("\n"), ""])
            else:
                assert steps, f"output before any command in a tour block: {line!r}"
                steps[-1][1] += line
        blocks.append(steps)
    return blocks


def run_block(steps, port, http):
    for cmd, want in steps:
        cmd = cmd.replace("8673", str(port)).replace("8674", str(http))
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
        # A blank line closes a block in the README after its last output.
        assert r.stdout == want or r.stdout == want.rstrip("\n") + "\n", \
            f"$ {cmd}\n--- README\n{want}--- blossomd\n{r.stdout}{r.stderr}"


def main():
    tap = Tap()
    missing = [t for t in ("nc", "redis-cli", "curl")
               if subprocess.run(["bash", "-c", f"command -v {t}"],
                                 capture_output=True).returncode]
    if missing:
        def skip():
            raise Skip(f"{', '.join(missing)} not installed")
        tap.case("README tour", skip)
        tap.done()
    blocks = tour_blocks()
    port, http = free_port(), free_port()
    tmp = tempdir("readme")
    proc = spawn([env_path("BLOSSOMD_BIN"), "--port", str(port), "--http-port", str(http),
                  "--data-dir", os.path.join(tmp.name, "data"), "--log-level", "warning"])
    try:
        wait_port(port, proc)
        wait_port(http, proc)
        names = ["text protocol (nc)", "RESP (redis-cli)", "HTTP (curl)"]
        def three_blocks():
            assert len(blocks) == 3, f"{len(blocks)} console blocks in the tour"
        tap.case("the quick tour has its three blocks", three_blocks)
        for i, steps in enumerate(blocks):
            name = names[i] if i < len(names) else f"block {i + 1}"
            tap.case(f"README tour, {name}: {len(steps)} commands, output as printed",
                     run_block, steps, port, http)
    finally:
        stop(proc)
        tmp.cleanup()
    tap.done()


if __name__ == "__main__":
    main()
