"""The real agent CLIs pinned in a checkout's ``.peers/`` (npm), and how to run them against the fake APIs.

Tests of real peers find them through :func:`peers_dir`, never by a path relative to the test file, so a
plugin's tests run the same from a monorepo checkout and from a copy of the plugin alone (where a missing
peer skips, and fails when ``CI`` is set).

* :func:`peer_path` names a file of an installed peer (``peer_path(CLAUDE_CODE)``).
* The real ACP peers, each against its loopback fake model API (:mod:`agentrt.testing.fake_apis`):
  Gemini CLI (``@google/gemini-cli``, ``--acp``; ``GOOGLE_GEMINI_BASE_URL`` points it at the fake Gemini API,
  it then authenticates as ``gateway`` with ``GEMINI_API_KEY``; ``GEMINI_CLI_NO_RELAUNCH`` keeps it one
  process) and Codex through ``@zed-industries/codex-acp`` (a ``CODEX_HOME/config.toml`` naming a custom
  model provider on the fake Responses API): :data:`PEER_LIST`, :func:`fake_api`, :func:`launch`,
  :func:`agentrt_env`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import attrs

from agentrt import LaunchSpec

from .fake_apis import serve_fake_gemini, serve_fake_responses, write_codex_home

__all__ = [
    "BOUND",
    "CLAUDE_AGENT_ACP",
    "CLAUDE_CODE",
    "CODEX_ACP",
    "CODEX_PEER",
    "GEMINI",
    "GEMINI_PEER",
    "PEER_LIST",
    "Peer",
    "TS_ACP_EXAMPLE",
    "age_gemini_chat",
    "agentrt_env",
    "executable_and_args",
    "fake_api",
    "launch",
    "launch_env",
    "missing",
    "peer_path",
    "peers_dir",
    "require",
]

#: The files of the pinned peers, relative to ``node_modules``.
CLAUDE_CODE = "@anthropic-ai/claude-code-linux-x64/claude"
CLAUDE_AGENT_ACP = "@zed-industries/claude-agent-acp/dist/index.js"
TS_ACP_EXAMPLE = "@agentclientprotocol/sdk/dist/examples/agent.js"
GEMINI = "@google/gemini-cli/bundle/gemini.js"
CODEX_ACP = "@zed-industries/codex-acp-linux-x64/bin/codex-acp"
BOUND = 120  # a hang guard only: the real CLIs start slowly on a busy machine


def peers_dir() -> Path:
    """The ``node_modules`` of the pinned peers.

    ``AGENTRT_PEERS`` if set, else ``.peers/node_modules`` in the working directory or the nearest of its
    parents that has one (a checkout's root, when pytest runs anywhere inside it); else that path under
    the working directory, which does not exist (every peer is then missing).
    """
    named = os.environ.get("AGENTRT_PEERS")
    if named:
        return Path(named)
    here = Path.cwd()
    for directory in (here, *here.parents):
        candidate = directory / ".peers" / "node_modules"
        if candidate.is_dir():
            return candidate
    return here / ".peers" / "node_modules"


def peer_path(relative: str) -> Path:
    """The absolute path of a peer's file (``CLAUDE_CODE``, ...), whether or not it is installed."""
    return peers_dir() / relative


def missing(reason: str) -> NoReturn:
    """Skip the test because a peer is not installed, or fail it when ``CI`` is set (CI installs them)."""
    import pytest  # only tests call this; the module itself imports without pytest

    if os.environ.get("CI"):
        pytest.fail(f"{reason}: required in CI")
    pytest.skip(reason)


@attrs.frozen
class Peer:
    """One real ACP peer: its name and the model it is asked for."""

    name: str
    model: str


GEMINI_PEER = Peer("gemini", "gemini-2.5-flash")
CODEX_PEER = Peer("codex-acp", "gpt-5.4")
PEER_LIST = (GEMINI_PEER, CODEX_PEER)


def require(peer: Peer) -> None:
    """Skip (fail under CI) when the peer is not installed."""
    if peer is GEMINI_PEER and (shutil.which("node") is None or not peer_path(GEMINI).is_file()):
        missing("Gemini CLI is not installed (node, and `npm ci` in .peers/)")
    if peer is CODEX_PEER and not peer_path(CODEX_ACP).is_file():
        missing("codex-acp is not installed (`npm ci` in .peers/ on linux-x64)")


@contextmanager
def fake_api(peer: Peer, **kwargs: Any) -> Iterator[Any]:
    """The peer's fake model API (``reply``, ``pieces``, ``tool_command``, ``hold``)."""
    serve = serve_fake_gemini if peer is GEMINI_PEER else serve_fake_responses
    with serve(**kwargs) as api:
        yield api


def launch_env(peer: Peer, home: Path, url: str) -> dict[str, str]:
    """The peer's environment entries: the fake API's address, a test key, a private home."""
    home.mkdir(parents=True, exist_ok=True)
    if peer is GEMINI_PEER:
        return {
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_API_KEY": "test-key-not-a-secret",
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }
    codex_home = write_codex_home(home / ".codex", url, model=peer.model)
    return {"HOME": str(home), "CODEX_HOME": str(codex_home), "FAKE_OPENAI_API_KEY": "test-key-not-a-secret"}


def executable_and_args(peer: Peer) -> tuple[str, tuple[str, ...]]:
    """Absolute executable and its arguments (Gemini CLI is node running its bundle)."""
    if peer is GEMINI_PEER:
        node = shutil.which("node")
        assert node is not None
        return os.path.realpath(node), (str(peer_path(GEMINI)), "--acp")
    return str(peer_path(CODEX_ACP)), ()


def agentrt_env(peer: Peer, tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    """The environment of an ``agentrt`` command hosting ``peer`` over ACP against the fake API at ``url``.

    agentrt's own database lives under ``tmp_path``, the peer's home under ``tmp_path/home``; ``extra``
    adds variables (a terminal's ``LANG`` and ``TERM``).  Skips (fails in CI) when the peer is missing.
    """
    require(peer)
    executable, args = executable_and_args(peer)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AGENTRT_CONFIG": str(tmp_path / "none.toml"),
        "AWP_AGENT_CLI_EXECUTABLE": executable,
        "AWP_AGENT_CLI_ARGS_JSON": json.dumps(list(args)),
        "AWP_AGENT_CLI_ENV_JSON": json.dumps(launch_env(peer, tmp_path / "home", url)),
        "AWP_AGENT_CLI_PROTOCOL": "acp",
        "AWP_AGENT_DEFAULT_MODEL": peer.model,
        "AGENTRT_FIRST_OUTPUT_TIMEOUT": str(BOUND),  # a busy machine: Gemini CLI starts slowly
        **extra,
    }


def launch(peer: Peer, home: Path, url: str) -> LaunchSpec:
    """The launch spec of ``peer`` against the fake API at ``url``."""
    require(peer)
    executable, args = executable_and_args(peer)
    return LaunchSpec(
        executable=executable,
        prefix_args=args,
        env_entries=launch_env(peer, home, url),
        protocol="acp",
        model=peer.model,
    )


def age_gemini_chat(home: Path, session: str) -> None:
    """Rename the session's chat file to an earlier minute.

    Gemini CLI 0.61.0 names a chat file ``session-<minute>-<id[:8]>.jsonl``, and ``session/load`` starts a
    fresh recording of the same id before it reads the history: within the minute the session was
    created, that is the same file, whose history it resets (the load then fails "No previous sessions
    found for this project.").  A session loaded a minute later or more is unaffected.
    """
    (chat,) = (home / ".gemini" / "tmp").glob(f"*/chats/session-*-{session[:8]}.jsonl")
    chat.rename(chat.with_name(f"session-2000-01-01T00-00-{session[:8]}.jsonl"))
