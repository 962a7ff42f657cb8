"""Choosing among plugins, with third-party plugins installed as REAL distributions.

Three tiny packages are written here, built by hatchling and installed by pip
into a temporary ``--target`` directory (never the shared virtualenv); child
processes with that directory on PYTHONPATH find them through their entry
points, as they would a pip-installed plugin:

* ``agentrt-test-pg`` registers ``pg``, a second sink in the ``recorder`` role
  (beside ``sqlite``);
* ``agentrt-test-audit`` registers ``audit``, a sink in no built-in role
  (``other``), attached only when ``--sink`` names it;
* ``agentrt-test-clash`` registers the dialect ``awp-jsonl``, a name the
  ``awp-jsonl`` plugin already holds;
* ``agentrt-test-archive`` registers a sink in a role agentrt does not know.

Each sink appends the type of every event it gets to ``<SINK_LOG_DIR>/<name>.jsonl``.
``agentrt plugins`` and ``agentrt run`` (on the fixture agent) run as real
subprocesses; their output, exit status and what each sink received are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing import write_fixture_agent

TIMEOUT = 120
BASE_PLUGINS = "awp-jsonl,sqlite,tui"

_PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "{dist}"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []

[project.entry-points.agentrt]
{entry} = "{module}"

[tool.hatch.build.targets.wheel]
packages = ["src/{module}"]
"""

_SINK_MODULE = '''\
"""A file sink: one line per event, in <SINK_LOG_DIR>/{name}.jsonl."""
import contextlib
import json
import os
import sqlite3

from agentrt import hookimpl


class _FileSink:
    name = {name!r}
    policy = "block"
    buffer_size = 16

    def __init__(self, options):
        self.path = os.path.join(options["env"]["SINK_LOG_DIR"], {name!r} + ".jsonl")
        self.thread = options.get("thread")

    async def handle(self, batch):
        with open(self.path, "a") as f:
            for event in batch.events:
                f.write(json.dumps({{"thread": self.thread, "type": type(event).__name__}}) + "\\n")

    async def aclose(self):
        pass


@hookimpl
def agentrt_register_sinks(register):
    register({name!r}, _FileSink, role={role!r})
'''

_CLASH_MODULE = '''\
from agentrt import hookimpl


def _dialect():
    raise RuntimeError("never made: the name is taken")


@hookimpl
def agentrt_register_dialects(register):
    register("awp-jsonl", _dialect)
'''


def _package(root: Path, dist: str, entry: str, module: str, code: str) -> Path:
    package = root / dist
    (package / "src" / module).mkdir(parents=True)
    (package / "pyproject.toml").write_text(_PYPROJECT.format(dist=dist, entry=entry, module=module))
    (package / "src" / module / "__init__.py").write_text(code)
    return package


def _env(**extra: str) -> dict[str, str]:
    # An allow-listed environment, never os.environ wholesale.
    env = {k: os.environ[k] for k in ("PATH", "LANG", "TMPDIR") if k in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="--no-build-isolation needs hatchling in the venv")
    sources = tmp_path_factory.mktemp("packages")
    packages = [
        _package(sources, "agentrt-test-pg", "pg-recorder", "agentrt_test_pg",
                 _SINK_MODULE.format(name="pg", role="recorder")),
        _package(sources, "agentrt-test-audit", "audit-sink", "agentrt_test_audit",
                 _SINK_MODULE.format(name="audit", role="other")),
        _package(sources, "agentrt-test-clash", "clash-dialect", "agentrt_test_clash", _CLASH_MODULE),
        _package(sources, "agentrt-test-archive", "archive-sink", "agentrt_test_archive",
                 _SINK_MODULE.format(name="archive", role="archivist")),
    ]
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), *map(str, packages)],
        check=True, timeout=TIMEOUT, env=_env(HOME=str(sources)), capture_output=True,
    )
    for dist in ("agentrt_test_pg", "agentrt_test_audit", "agentrt_test_clash", "agentrt_test_archive"):
        assert list(target.glob(f"{dist}-0.1.0.dist-info/entry_points.txt")), dist
    return target


def _agentrt(site: Path, home: Path, args: list[str], *, plugins: str) -> subprocess.CompletedProcess[str]:
    (home / "logs").mkdir(exist_ok=True)
    env = _env(PYTHONPATH=str(site), HOME=str(home), AGENTRT_LOAD_PLUGINS=plugins, SINK_LOG_DIR=str(home / "logs"),
               AWP_AGENT_CLI_EXECUTABLE=write_fixture_agent(home, "normal"))
    return subprocess.run([sys.executable, "-m", "agentrt", *args], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


def _received(home: Path, sink: str) -> list[dict[str, Any]]:
    path = home / "logs" / f"{sink}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stored_events(home: Path) -> int:
    """How many events the sqlite recorder stored under ``home`` (0 without a database)."""
    path = home / ".local" / "share" / "agentrt" / "agentrt.db"
    if not path.exists():
        return 0
    from agentrt_sqlite.api import read_events

    return len(read_events(path))


def test_plugins_lists_each_sinks_role_and_warns_of_two_recorders(site: Path, tmp_path: Path) -> None:
    proc = _agentrt(site, tmp_path, ["plugins", "--json"], plugins=f"{BASE_PLUGINS},pg-recorder,audit-sink")
    assert proc.returncode == 0, proc.stderr
    by_name = {i["name"]: i for i in json.loads(proc.stdout)}
    assert by_name["pg-recorder"]["distribution"] == "agentrt-test-pg"
    assert by_name["pg-recorder"]["sink_roles"] == {"pg": "recorder"}
    assert by_name["audit-sink"]["sink_roles"] == {"audit": "other"}
    assert by_name["sqlite"]["sink_roles"] == {"sqlite": "recorder"}
    assert by_name["tui"]["sink_roles"] == {"tui": "terminal"}
    # Two recorders and no choice: said now, with both plugins and how to pick, but not an error here.
    assert "agentrt: warning: ambiguous_sink_role:" in proc.stderr
    assert "'pg' (plugin 'pg-recorder')" in proc.stderr and "'sqlite' (plugin 'sqlite')" in proc.stderr
    assert "--sink NAME" in proc.stderr and '[sinks] recorder = "NAME"' in proc.stderr

    text = _agentrt(site, tmp_path, ["plugins"], plugins=f"{BASE_PLUGINS},pg-recorder,audit-sink")
    assert text.returncode == 0, text.stderr
    assert "  sinks: pg (role recorder)\n" in text.stdout and "  sinks: audit (role other)\n" in text.stdout


def test_plugins_exits_non_zero_naming_both_plugins_of_a_taken_name(site: Path, tmp_path: Path) -> None:
    proc = _agentrt(site, tmp_path, ["plugins"], plugins=f"{BASE_PLUGINS},clash-dialect")
    assert proc.returncode == 2, proc.stderr
    assert "agentrt: error: duplicate_registration: dialect 'awp-jsonl'" in proc.stderr
    assert "'awp-jsonl'" in proc.stderr and "'clash-dialect'" in proc.stderr
    assert "AGENTRT_DISABLE_PLUGINS=" in proc.stderr
    # The listing is still printed, so the user sees who provides what.
    assert "clash-dialect (agentrt-test-clash 0.1.0)\n  dialects: awp-jsonl\n" in proc.stdout
    # And a run fails the same way (the check in `plugins` shows it first, not instead).
    run = _agentrt(site, tmp_path, ["run", "hi"], plugins=f"{BASE_PLUGINS},clash-dialect")
    assert run.returncode == 2 and "duplicate_registration" in run.stderr
    # Without the clashing distribution's plugin, `plugins` is clean again.
    ok = _agentrt(site, tmp_path, ["plugins"], plugins=BASE_PLUGINS)
    assert ok.returncode == 0 and "duplicate_registration" not in ok.stderr


def test_run_with_two_recorders_and_no_choice_names_both_and_how_to_pick(site: Path, tmp_path: Path) -> None:
    proc = _agentrt(site, tmp_path, ["run", "hi"], plugins=f"{BASE_PLUGINS},pg-recorder")
    assert proc.returncode == 2, proc.stderr
    assert "agentrt: error: ambiguous_sink_role:" in proc.stderr
    assert "'pg' (plugin 'pg-recorder')" in proc.stderr and "'sqlite' (plugin 'sqlite')" in proc.stderr
    assert "--sink NAME" in proc.stderr and '[sinks] recorder = "NAME"' in proc.stderr
    assert _received(tmp_path, "pg") == []


def test_run_sink_picks_the_recorder_and_adds_a_sink_of_no_role(site: Path, tmp_path: Path) -> None:
    plugins = f"{BASE_PLUGINS},pg-recorder,audit-sink"
    proc = _agentrt(site, tmp_path, ["run", "--sink", "pg", "--sink", "audit", "--thread", "t1", "hi"],
                    plugins=plugins)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()  # the reply
    for sink in ("pg", "audit"):
        rows = _received(tmp_path, sink)
        assert rows and {r["thread"] for r in rows} == {"t1"}, sink
        assert [r["type"] for r in rows].count("TurnCompleted") == 1, sink
    # The sqlite recorder was not chosen: it recorded no event (its thread store still keeps the thread).
    assert _stored_events(tmp_path) == 0


def test_run_sink_picks_sqlite_over_the_second_recorder(site: Path, tmp_path: Path) -> None:
    proc = _agentrt(site, tmp_path, ["run", "--sink", "sqlite", "hi"], plugins=f"{BASE_PLUGINS},pg-recorder")
    assert proc.returncode == 0, proc.stderr
    assert _received(tmp_path, "pg") == []
    assert _stored_events(tmp_path) > 0


def test_the_config_file_picks_the_recorder_and_sink_wins_over_it(site: Path, tmp_path: Path) -> None:
    config = tmp_path / ".config" / "agentrt" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[sinks]\nrecorder = "pg"\n')
    plugins = f"{BASE_PLUGINS},pg-recorder"
    proc = _agentrt(site, tmp_path, ["run", "hi"], plugins=plugins)
    assert proc.returncode == 0, proc.stderr
    assert "TurnCompleted" in {r["type"] for r in _received(tmp_path, "pg")}
    # `plugins` no longer warns: the choice is made.
    listed = _agentrt(site, tmp_path, ["plugins"], plugins=plugins)
    assert listed.returncode == 0 and "ambiguous_sink_role" not in listed.stderr
    # --sink wins over the file.
    (tmp_path / "logs" / "pg.jsonl").unlink()
    proc = _agentrt(site, tmp_path, ["run", "--sink", "sqlite", "hi"], plugins=plugins)
    assert proc.returncode == 0, proc.stderr
    assert _received(tmp_path, "pg") == []
    # A file that names no loaded sink is an error naming it, not a silent fallback.
    config.write_text('[sinks]\nrecorder = "postgres"\n')
    proc = _agentrt(site, tmp_path, ["run", "hi"], plugins=plugins)
    assert proc.returncode == 2
    assert "agentrt: error: unknown_sink:" in proc.stderr and "'postgres'" in proc.stderr


def test_sink_names_are_checked(site: Path, tmp_path: Path) -> None:
    plugins = f"{BASE_PLUGINS},pg-recorder"
    proc = _agentrt(site, tmp_path, ["run", "--sink", "nope", "hi"], plugins=plugins)
    assert proc.returncode == 2
    assert "agentrt: error: unknown_sink: --sink 'nope'" in proc.stderr and "pg, sqlite, tui" in proc.stderr
    proc = _agentrt(site, tmp_path, ["run", "--sink", "pg", "--sink", "sqlite", "hi"], plugins=plugins)
    assert proc.returncode == 2
    assert "agentrt: error: conflicting_sink_choice:" in proc.stderr
    assert _received(tmp_path, "pg") == []


def test_chat_takes_sink_too(site: Path, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    env = _env(PYTHONPATH=str(site), HOME=str(tmp_path), AGENTRT_LOAD_PLUGINS=f"{BASE_PLUGINS},pg-recorder,audit-sink",
               SINK_LOG_DIR=str(tmp_path / "logs"), AWP_AGENT_CLI_EXECUTABLE=write_fixture_agent(tmp_path, "normal"))
    proc = subprocess.run([sys.executable, "-m", "agentrt", "chat", "--sink", "pg", "--sink", "audit"], env=env,
                          input="hi\n", capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    for sink in ("pg", "audit"):
        assert "TurnCompleted" in {r["type"] for r in _received(tmp_path, sink)}, sink
    proc = subprocess.run([sys.executable, "-m", "agentrt", "chat"], env=env, input="hi\n", capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert proc.returncode == 2 and "agentrt: error: ambiguous_sink_role:" in proc.stderr


def test_web_refuses_to_start_without_a_recorder_choice_and_checks_sink_names(site: Path, tmp_path: Path) -> None:
    """``agentrt web`` says it at start-up (exit 2, nothing served), not at the first thread opened."""
    plugins = f"{BASE_PLUGINS},pg-recorder,web"
    proc = _agentrt(site, tmp_path, ["web", "--port", "0", "--no-bots"], plugins=plugins)
    assert proc.returncode == 2, proc.stderr
    assert "agentrt: error: ambiguous_sink_role:" in proc.stderr and "'pg' (plugin 'pg-recorder')" in proc.stderr
    proc = _agentrt(site, tmp_path, ["web", "--port", "0", "--no-bots", "--sink", "nope"], plugins=plugins)
    assert proc.returncode == 2 and "agentrt: error: unknown_sink: --sink 'nope'" in proc.stderr


def test_the_config_files_sinks_table_is_checked(tmp_path: Path) -> None:
    from agentrt import AgentrtError
    from agentrt.config import parse_config

    path = tmp_path / "config.toml"
    assert parse_config('[sinks]\nrecorder = "pg"\nterminal = "tui"\n', path, {}).sinks == {
        "recorder": "pg", "terminal": "tui"}
    for text, said in [('[sinks]\narchivist = "pg"\n', ":2: unknown key sinks.archivist"),
                       ("[sinks]\nrecorder = 3\n", ":2: sinks.recorder must be a sink's name"),
                       ('sinks = "pg"\n', ":1: sinks must be a table")]:
        with pytest.raises(AgentrtError) as info:
            parse_config(text, path, {})
        assert info.value.code == "config_invalid" and said in info.value.detail, text


def test_plugins_exits_non_zero_on_a_sink_of_an_unknown_role(site: Path, tmp_path: Path) -> None:
    """Every command would refuse the registration: `plugins` says so first, naming the plugin and the role."""
    proc = _agentrt(site, tmp_path, ["plugins"], plugins=f"{BASE_PLUGINS},archive-sink")
    assert proc.returncode == 2, proc.stderr
    assert "agentrt: error: invalid_plugin_registration: plugin 'archive-sink': sink 'archive'" in proc.stderr
    assert "'archivist'" in proc.stderr
    assert "  sinks: archive (role archivist)\n" in proc.stdout
    run = _agentrt(site, tmp_path, ["run", "hi"], plugins=f"{BASE_PLUGINS},archive-sink")
    assert run.returncode == 2 and "invalid_plugin_registration" in run.stderr


def test_web_sink_records_each_thread_through_the_chosen_and_added_sinks(site: Path, tmp_path: Path) -> None:
    """A real ``agentrt web --sink pg --sink audit``: a thread's turn reaches both third-party sinks."""
    import signal

    import httpx

    (tmp_path / "logs").mkdir()
    env = _env(PYTHONPATH=str(site), HOME=str(tmp_path), SINK_LOG_DIR=str(tmp_path / "logs"),
               AGENTRT_LOAD_PLUGINS=f"{BASE_PLUGINS},web,pg-recorder,audit-sink",
               AGENTRT_BOTS_CONFIG=str(tmp_path / "no-bots.toml"),
               AWP_AGENT_CLI_EXECUTABLE=write_fixture_agent(tmp_path, "normal"))
    server = subprocess.Popen(
        [sys.executable, "-m", "agentrt", "web", "--port", "0", "--no-bots", "--sink", "pg", "--sink", "audit"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # the first line says where it listens
        assert line.startswith("agentrt web: serving on "), line + (server.stderr.read() if server.stderr else "")
        url = line.split("serving on ", 1)[1].strip()
        with httpx.Client(base_url=url, timeout=60) as client:
            html = client.get("/", headers={"accept": "text/html"}).text
            csrf = {"x-csrf-token": html.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]}
            name = client.post("/api/threads", headers=csrf).json()["name"]
            with client.stream("GET", f"/events/threads/{name}") as events:
                sent = client.post(f"/api/threads/{name}/messages", headers=csrf, json={"text": "hi"})
                assert sent.status_code == 202, sent.text
                for chunk in events.iter_lines():  # until the page is told the turn is done
                    if chunk.startswith("data: ") and any(
                            m["k"] == "done" for m in json.loads(chunk[6:])["m"]):
                        break
        server.send_signal(signal.SIGTERM)  # leaving closes every conversation, flushing its sinks
        assert server.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    for sink in ("pg", "audit"):
        rows = _received(tmp_path, sink)
        assert {r["thread"] for r in rows} == {name}, sink
        assert [r["type"] for r in rows].count("TurnCompleted") == 1, sink
