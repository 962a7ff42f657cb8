"""The plugin guide's provider, tool and sink examples, installed as REAL distributions.

pip builds docs/examples/agentrt-example-{provider,tool,sink} (hatchling, offline) into one
target directory; children with it on PYTHONPATH see the three exactly as pip-installed
third-party plugins: listed by ``agentrt plugins``, passing their own tests, and, all three
together, serving a real ``agentrt run``: the reference agent asks the example provider (a
loopback Ollama-style server here), calls the example tool, and the example sink records it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from agentrt.testing import ReplayResponse, serve_replay

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
NAMES = ("agentrt-example-provider", "agentrt-example-tool", "agentrt-example-sink")
AGENTRT = str(Path(sys.executable).parent / "agentrt")
TIMEOUT = 300


def _env(**extra: str) -> dict[str, str]:
    # An allow-listed environment, never os.environ wholesale.
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="--no-build-isolation needs hatchling in the venv")
    target = tmp_path_factory.mktemp("site")
    # Build from copies so that nothing is written into the source tree.
    sources = tmp_path_factory.mktemp("src")
    for name in NAMES:
        shutil.copytree(EXAMPLES / name, sources / name, ignore=shutil.ignore_patterns("__pycache__", "build"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), *(str(sources / name) for name in NAMES)],
        check=True, timeout=TIMEOUT, env=_env(), capture_output=True,
    )
    return target


def test_the_examples_are_listed_with_what_they_provide(site: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentrt", "plugins", "--json"],
        env=_env(PYTHONPATH=str(site), AGENTRT_LOAD_PLUGINS="example-provider,example-tool,example-sink"),
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert out.returncode == 0, out.stderr
    by_name = {i["name"]: i for i in json.loads(out.stdout)}
    assert sorted(by_name) == ["example-provider", "example-sink", "example-tool"]
    assert by_name["example-provider"]["providers"] == ["example-ollama"]
    assert by_name["example-tool"]["tools"] == ["read_note"]
    assert by_name["example-sink"]["sinks"] == ["jsonl-file"]
    assert by_name["example-sink"]["sink_roles"] == {"jsonl-file": "other"}
    for name in NAMES:
        info = by_name[name.removeprefix("agentrt-")]
        assert (info["distribution"], info["version"]) == (name, "0.1.0")


@pytest.mark.parametrize("name", NAMES)
def test_each_examples_hooks_module_is_thin(name: str, site: Path) -> None:
    package = name.replace("-", "_")
    probe = f"import sys, {package}; loaded = sorted(m for m in sys.modules if m.startswith('{package}.')); " \
            "assert not loaded, loaded"
    out = subprocess.run([sys.executable, "-c", probe], env=_env(PYTHONPATH=str(site)), capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("name", NAMES)
def test_each_examples_own_test_passes(name: str, site: Path, tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    shutil.copytree(EXAMPLES / name / "tests", tests)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tests)],
        env=_env(PYTHONPATH=str(site)), capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert " passed" in out.stdout and "failed" not in out.stdout


def _ndjson(*objs: Any) -> ReplayResponse:
    return ReplayResponse(headers=[("content-type", "application/x-ndjson")],
                          chunks=[orjson.dumps(o) + b"\n" for o in objs])


async def test_agentrt_run_uses_all_three(site: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("buy milk", encoding="utf-8")
    call = {"function": {"name": "read_note", "arguments": {"name": "todo.txt"}}}
    rounds = [
        _ndjson({"message": {"role": "assistant", "content": "", "tool_calls": [call]}, "done": False},
                {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                 "prompt_eval_count": 20, "eval_count": 4}),
        _ndjson({"message": {"role": "assistant", "content": "Your note: "}, "done": False},
                {"message": {"role": "assistant", "content": "buy milk."}, "done": False},
                {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                 "prompt_eval_count": 40, "eval_count": 6}),
    ]
    events = tmp_path / "events.jsonl"
    async with serve_replay(rounds) as server:
        agent_env = {
            "AGENTRT_PROVIDER": "example-ollama", "EXAMPLE_OLLAMA_URL": server.url,
            "EXAMPLE_NOTES_DIR": str(notes), "AGENTRT_STATE_DIR": str(tmp_path / "state"),
            "AGENTRT_LOAD_PLUGINS": "example-provider,example-tool,awp-jsonl", "PYTHONPATH": str(site),
        }
        env = _env(
            PYTHONPATH=str(site), XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path),
            AGENTRT_LOAD_PLUGINS="example-sink,awp-jsonl", EXAMPLE_JSONL_FILE=str(events),
            AWP_AGENT_CLI_EXECUTABLE=AGENTRT, AWP_AGENT_CLI_ARGS_JSON='["agent"]',
            AWP_AGENT_CLI_ENV_JSON=json.dumps(agent_env), AWP_AGENT_CLI_PROTOCOL="awp-jsonl",
            AWP_AGENT_DEFAULT_MODEL="llama-test",
        )
        with trio.fail_after(TIMEOUT):  # a hang guard only
            proc = await trio.run_process(
                [AGENTRT, "run", "--no-log", "--sink", "jsonl-file", "What is on my todo list?"],
                env=env, cwd=tmp_path, capture_stdout=True, capture_stderr=True, check=False,
            )
        assert proc.returncode == 0, proc.stderr.decode()
        assert "Your note: buy milk." in proc.stdout.decode()
        first, second = server.requests
    assert first.path == second.path == "/api/chat"
    assert first.json["model"] == "llama-test"
    assert [t["function"]["name"] for t in first.json["tools"]] == ["read_note"]
    tool_message = second.json["messages"][-1]
    assert tool_message["role"] == "tool" and json.loads(tool_message["content"])["text"] == "buy milk"
    recorded = [orjson.loads(line) for line in events.read_bytes().splitlines()]
    kinds = [r["event"]["type"] for r in recorded]
    assert "tool_use" in kinds and kinds[-1] in ("turn_completed", "process_exited")
    used = next(r["event"] for r in recorded if r["event"]["type"] == "tool_use")
    assert used["name"] == "read_note" and used["input"] == {"name": "todo.txt"}
    done = next(r["event"] for r in recorded if r["event"]["type"] == "turn_completed")
    assert done["result"] == "Your note: buy milk."
    assert [r["seq"] for r in recorded if r["source"] == recorded[0]["source"]] == sorted(
        r["seq"] for r in recorded if r["source"] == recorded[0]["source"])
