"""Whole process, end to end: ``agentrt run --protocol stream-json`` against the Claude Agent SDK's ``query()``.

Every contender is a child process of this bench, timed the same way from
spawn to reap, with its stdout a pipe that the bench drains (to nowhere):

* ``agentrt_plain`` / ``agentrt_json``: ``python -m agentrt run --no-log
  --protocol stream-json go`` (plain text, and ``--json``: one event per line);
* ``agentrt_plain_logged``: the same plain run recording into SQLite, as
  ``run`` does by default (the SDK records nothing), into a fresh database in
  a fresh temporary directory every round (removed after the run), so no
  round pays for the rows of the ones before;
* ``agentrt_json_logged``: ``--json`` recorded the same way (the default path
  a ``--json`` user gets), reported also against ``agentrt_plain_logged``;
* ``sdk``: bench/_sdk_query.py, one ``query()`` with ``cli_path`` set to the
  same fake CLI, writing each text delta to stdout (what ``run`` prints);
* with ``AGENTRT_BENCH_BEFORE=<source tree>`` (for example an exported older
  commit), ``agentrt_*_before`` run that tree's code in the same rounds; with
  ``AGENTRT_BENCH_TREE=<source tree>``, the ``agentrt_*`` contenders run that
  tree's code instead of the installed one (a change measured in a worktree of
  its own while the checkout moves on).

The fake CLI (bench/_fake_cli.py) answers the SDK's ``initialize`` request and
writes a 100k-line session built from the bench corpus, corpus.py (its ``result`` lines
moved to a single one at the end, so both hosts read every line of one turn).

Per run: wall seconds (spawn to reap); parent CPU seconds, that is the
``wait4`` rusage of the contender's process tree less the fake CLI's own CPU
(which it reports); peak RSS (``ru_maxrss`` of the waited child, MiB).  All
figures are end to end (whole processes), medians of interleaved rounds with
ranges, and ratios to the SDK measured in the same rounds; the recorded run
also as ratios to the ``--no-log`` run of the same round (what recording
costs).  Each contender is waited for by a fresh helper process (bench/_spawn.py,
``wait4``), never read from ``RUSAGE_CHILDREN`` of this long-lived bench, so
its peak RSS and CPU are its own.  ``AGENTRT_BENCH_ROUNDS`` and
``AGENTRT_BENCH_LINES`` (default 5 and 100,000) shorten a run;
``AGENTRT_BENCH_ONLY`` (comma-separated contender names, for example
``agentrt_plain,agentrt_json``) runs only those; ``AGENTRT_BENCH_ASCII=1``
draws the session's text from the corpus's ASCII words only (most code and
shell output is ASCII).  The ``--json`` run is also reported as ratios to the
plain run of the same round (what ``--json`` costs), the recorded ``--json``
run to the recorded plain run, and the ``_before`` runs to theirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._corpus import corpus_module, write_blob
from ._rounds import Figures, interleave, load_text, print_summary, summarize

HERE = Path(__file__).resolve().parent
FAKE_CLI = str(HERE / "_fake_cli.py")
SDK_QUERY = str(HERE / "_sdk_query.py")
SPAWN = str(HERE / "_spawn.py")
PYTHON = os.path.realpath(sys.executable)  # the fake CLI: stdlib only
VENV_PYTHON = sys.executable  # the contenders: this environment's packages
KEYS = ("wall_s", "parent_cpu_s", "parent_sys_s", "parent_page_faults", "peak_rss_mib")


def session_blob(n_lines: int, ascii_only: bool = False) -> bytes:
    """The corpus mix as one turn: ``result`` lines dropped, one result at the end."""
    corpus = corpus_module()
    lines = [line for kind, line in corpus.corpus_lines(n_lines, ascii_only=ascii_only) if kind != "result"]
    result = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1000,
              "duration_api_ms": 900, "num_turns": 1, "result": "done",
              "session_id": "5b0f6c1e-8a3b-4a8e-9a53-2f1d3c0b7e11", "total_cost_usd": 0.1,
              "usage": {"input_tokens": 1, "output_tokens": 1}, "permission_denials": [],
              "uuid": "a0c3d1f2-1b2c-4d5e-8f90-123456789abc"}
    return b"".join(lines) + json.dumps(result, separators=(",", ":")).encode() + b"\n"


def _launcher(directory: str, session: str, rusage_out: str) -> str:
    # Both hosts exec this with their own flags; it runs the fake CLI on the session.
    path = os.path.join(directory, "fake-claude")
    with open(path, "w") as f:
        f.write(
            f"#!{PYTHON}\nimport runpy, sys\nsys.argv = [{FAKE_CLI!r}, {session!r}, {rusage_out!r}]\n"
            f"runpy.run_path({FAKE_CLI!r}, run_name='__main__')\n"
        )
    os.chmod(path, 0o755)
    return path


def measure(argv: list[str], env: dict[str, str], work: str) -> Figures:
    """Run ``argv`` under bench/_spawn.py, drain its stdout; the run's figures."""
    rusage_out = os.path.join(work, "cli-rusage.json")
    spawn_out = os.path.join(work, "spawn-rusage.json")
    stderr_path = os.path.join(work, "stderr")
    for path in (rusage_out, spawn_out):
        if os.path.exists(path):
            os.unlink(path)
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [PYTHON, "-S", SPAWN, spawn_out, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=err, env=env,
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        out_bytes = 0
        while chunk := os.read(fd, 1 << 20):
            out_bytes += len(chunk)
        proc.stdout.close()
        returncode = proc.wait()
    if returncode != 0:
        raise SystemExit(f"{argv[:4]} exited {returncode}: {Path(stderr_path).read_text()[-2000:]}")
    with open(rusage_out) as f:
        cli = json.load(f)
    with open(spawn_out) as f:
        tree = json.load(f)
    return {
        "wall_s": tree["wall"],
        "parent_cpu_s": tree["cpu"] - cli["cpu"],
        # The kernel's share, and the minor page faults behind much of it (memory paged in again).
        "parent_sys_s": tree["sys"] - cli["sys"],
        "parent_page_faults": tree["minflt"] - cli["minflt"],
        "peak_rss_mib": tree["maxrss_kib"] / 1024,
        "cli_cpu_s": cli["cpu"],
        "out_mb": out_bytes / 1e6,
    }


def _recorded(argv: list[str], env: dict[str, str], work: str) -> Figures:
    """``measure`` with a fresh database of its own, removed afterwards."""
    home = tempfile.mkdtemp(prefix="db-", dir=work)
    try:
        return measure(argv, {**env, "AGENTRT_DATABASE_URL": f"sqlite://{home}/agentrt.db"}, work)
    finally:
        shutil.rmtree(home)


def _pythonpath(tree: str) -> str:
    root = Path(tree)
    paths = [root / "src", *sorted((root / "plugins").glob("*/src"))]
    return os.pathsep.join(str(p) for p in paths)


def main(rounds: int = 5, n_lines: int = 100_000) -> dict[str, Any]:
    """Interleave the contenders for ``rounds`` rounds; print every run and the summary."""
    rounds = int(os.environ.get("AGENTRT_BENCH_ROUNDS", rounds))
    n_lines = int(os.environ.get("AGENTRT_BENCH_LINES", n_lines))
    ascii_only = os.environ.get("AGENTRT_BENCH_ASCII") == "1"
    blob = session_blob(n_lines, ascii_only)
    session = write_blob(blob)
    work = tempfile.mkdtemp(prefix="agentrt-bench-whole-")
    cli = _launcher(work, session, os.path.join(work, "cli-rusage.json"))
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": work}
    agentrt_env = {**base, "AWP_AGENT_CLI_EXECUTABLE": cli}
    tree = os.environ.get("AGENTRT_BENCH_TREE")
    if tree:
        agentrt_env["PYTHONPATH"] = _pythonpath(tree)
    sdk_env = {**base, "CLAUDE_AGENT_SDK_SKIP_VERSION_CHECK": "1"}
    # --no-log: the SDK records nothing, so neither does agentrt here; the
    # recorded run (the default, into SQLite) is its own contender.
    run = [VENV_PYTHON, "-m", "agentrt", "run", "--no-log", "--protocol", "stream-json"]
    logged = [VENV_PYTHON, "-m", "agentrt", "run", "--protocol", "stream-json"]
    contenders = {
        "sdk": lambda: measure([VENV_PYTHON, SDK_QUERY, cli], sdk_env, work),
        "agentrt_plain": lambda: measure([*run, "go"], agentrt_env, work),
        "agentrt_json": lambda: measure([*run, "--json", "go"], agentrt_env, work),
        "agentrt_plain_logged": lambda: _recorded([*logged, "go"], agentrt_env, work),
        "agentrt_json_logged": lambda: _recorded([*logged, "--json", "go"], agentrt_env, work),
    }
    before = os.environ.get("AGENTRT_BENCH_BEFORE")
    if before:
        before_env = {**agentrt_env, "PYTHONPATH": _pythonpath(before)}
        contenders["agentrt_plain_before"] = lambda: measure([*run, "go"], before_env, work)
        contenders["agentrt_json_before"] = lambda: measure(
            [*run, "--json", "go"], before_env, work
        )
    only = [name for name in os.environ.get("AGENTRT_BENCH_ONLY", "").split(",") if name]
    if only:
        unknown = sorted(set(only) - set(contenders))
        if unknown:
            raise SystemExit(f"AGENTRT_BENCH_ONLY: no contender {unknown}; known: {sorted(contenders)}")
        contenders = {name: contenders[name] for name in contenders if name in only}
    n = blob.count(b"\n")
    text = "ASCII text" if ascii_only else "the corpus's text"
    print(f"whole process: {n} lines, {len(blob) / 1e6:.0f} MB of {text}, {rounds} rounds [{load_text()}]")
    try:
        runs = interleave(contenders, rounds)
    finally:
        os.unlink(session)
        shutil.rmtree(work)
    first = "sdk" if "sdk" in runs else next(iter(runs))
    summary = summarize(runs, first, (*KEYS, "cli_cpu_s", "out_mb"))
    # What recording and --json cost: each against the plain run of the same round (recorded
    # --json against the recorded plain run, so the pair differs only by --json).
    for plain, others in (
        ("agentrt_plain", ("agentrt_plain_logged", "agentrt_json")),
        ("agentrt_plain_logged", ("agentrt_json_logged",)),
        ("agentrt_plain_before", ("agentrt_json_before",)),
    ):
        pair = {k: runs[k] for k in (plain, *others) if k in runs}
        if plain in pair and len(pair) > 1:
            cost = summarize(pair, plain, KEYS)
            summary.update({k: v for k, v in cost.items() if k.endswith(f"_vs_{plain}")})
    summary["session_lines"] = n
    title = f"whole process, end to end (medians of {rounds} interleaved rounds [range]; ratios to {first})"
    print_summary(title, summary)
    return summary


if __name__ == "__main__":
    main()
