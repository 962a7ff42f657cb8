"""agentrt plugin: ``agentrt demo``, the whole chain against an offline local model.

Hook implementations only; the server supervision and the demo live in
modules imported when the command runs.
"""

from __future__ import annotations

from typing import Any

import click

from agentrt import hookimpl

__all__ = ["agentrt_register_commands"]


@click.command()
@click.argument("prompt", required=False)
@click.option("--resume", "resume", metavar="ID", help="Continue the session ID (printed by an earlier run).")
@click.option(
    "--python",
    "python",
    metavar="PATH",
    envvar="AGENTRT_LOCAL_MODEL_PYTHON",
    help="Interpreter that has the [model] extra (default: this one).",
)
@click.option(
    "--gguf",
    "gguf",
    metavar="PATH",
    envvar="AGENTRT_LOCAL_MODEL_GGUF",
    help="Serve this GGUF file instead of the packaged Gemma 3 270M.",
)
def demo(prompt: str | None, resume: str | None, python: str | None, gguf: str | None) -> None:
    """Ask a local model through the reference agent, offline.

    Starts llama.cpp's OpenAI-compatible server on loopback (unless
    AGENTRT_API_BASE_URL is set), runs `agentrt agent` under agentrt over
    awp-jsonl against it, streams the reply and stops the server.
    """
    from ._demo import run_demo

    raise SystemExit(run_demo(prompt, resume=resume, python=python, gguf=gguf))


@hookimpl
def agentrt_register_commands(cli: Any) -> None:
    """Add ``agentrt demo``."""
    cli.add_command(demo)
