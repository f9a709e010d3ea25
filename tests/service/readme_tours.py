# SPDX-License-Identifier: MIT
"""The user documentation's examples, run as printed against a fresh daemon:
- every `console` block of the README's section "A quick tour" (the text protocol with nc, RESP
  with redis-cli, HTTP with curl), command by command: what each prints on stdout must be the
  README's lines byte for byte (blank lines included), with nothing on stderr and exit status 0;
- the curl block of doc/http-api.md's "Client snippets": each command exits 0, and one whose
  line ends in a comment `# OUTPUT` must print exactly OUTPUT and a newline.
The only change made to a command is the ports (8673 and 8674 become free ones), so an example
cannot drift from what blossomd answers. (scripts/run's message, shown in the README, is
checked by run_script.py; the Python and Node snippets by tests/integration/guard.py.)"""
import os
import re
import subprocess

from servicetest import Skip, Tap, free_port, spawn, stop, tempdir, wait_port, env_path

README = os.path.join(env_path("BLOSSOMD_SOURCE_ROOT"), "README.md")
HTTP_API = os.path.join(env_path("BLOSSOMD_SOURCE_ROOT"), "doc", "http-api.md")


def section(path, heading):
    """The lines of the section `heading` (a whole line, such as "## A quick tour") of the file
    at path, up to the next heading of the same or a higher level outside a code block."""
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    start = lines.index(heading + "\n")
    level, fenced = heading.index(" "), False
    for i in range(start + 1, len(lines)):
        if lines[i].startswith("```"):
            fenced = not fenced
        m = re.match(r"(#+) ", lines[i])
        if m and not fenced and len(m.group(1)) <= level:
            return "".join(lines[start:i])
    return "".join(lines[start:])


def tour_blocks():
    """The console blocks of the README's "## A quick tour": lists of (command, expected
    output)."""
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", section(README, "## A quick tour"), re.S):
        steps = []
        for line in body.splitlines(keepends=True):
            if line.startswith("$ "):
                steps.append([line[2:].rstrip("\n"), ""])
            else:
                assert steps, f"output before any command in a tour block: {line!r}"
                steps[-1][1] += line
        blocks.append(steps)
    return blocks


def curl_snippet():
    """The curl block of doc/http-api.md's "## Client snippets": (command, expected output or
    None)."""
    m = re.search(r"\ncurl:\n\n```sh\n(.*?)```", section(HTTP_API, "## Client snippets"), re.S)
    assert m, "no curl block in Client snippets"
    steps = []
    for cmd in re.sub(r"\\\n", " ", m.group(1)).splitlines():
        c = re.match(r"(.*?)\s+# (.*)$", cmd)
        steps.append((c.group(1), c.group(2) + "\n") if c else (cmd, None))
    return steps


def run(cmd, port, http):
    cmd = cmd.replace("8673", str(port)).replace("8674", str(http))
    return cmd, subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)


def run_block(steps, port, http):
    for cmd, want in steps:
        cmd, r = run(cmd, port, http)
        assert (r.stdout, r.stderr, r.returncode) == (want, "", 0), \
            f"$ {cmd}\n--- README\n{want}--- blossomd (exit {r.returncode})\n{r.stdout}" \
            f"--- stderr\n{r.stderr}"


def run_snippet(steps, port, http):
    for cmd, want in steps:
        cmd, r = run(cmd, port, http)
        assert r.returncode == 0, f"$ {cmd}\nexit {r.returncode}\n{r.stderr}"
        if want is not None:
            assert r.stdout == want, f"$ {cmd}\n--- README\n{want}--- blossomd\n{r.stdout}"


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
        snippet = curl_snippet()
        tap.case(f"doc/http-api.md client snippet, curl: {len(snippet)} commands, output as in "
                 "its comments", run_snippet, snippet, port, http)
    finally:
        stop(proc)
        tmp.cleanup()
    tap.done()


if __name__ == "__main__":
    main()
