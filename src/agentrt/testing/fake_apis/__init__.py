"""Loopback fake model APIs, for testing real agent CLIs offline (standard library only).

Each ``serve_fake_*`` is a context manager that runs one HTTP server on ``127.0.0.1`` (a free port) for
the block and yields its state: ``url`` (point the CLI at it), ``requests`` (what the CLI sent), and the
script's knobs (the reply, a tool command to ask for, a hold gate that stops a streamed reply after its
first piece so a test can act "mid-reply").  Replies, ids and usage depend only on the request count, so
recordings made against them repeat.

* :func:`serve_fake_anthropic`: the Anthropic Messages API (Claude Code, claude-agent-acp;
  ``ANTHROPIC_BASE_URL``).
* :func:`serve_fake_gemini`: the Gemini API (Gemini CLI; ``GOOGLE_GEMINI_BASE_URL``).
* :func:`serve_fake_responses`: the OpenAI Responses API (Codex through codex-acp;
  :func:`write_codex_home` writes the ``CODEX_HOME`` that points Codex at it).

See ``docs/plugin-guide.md`` ("Testing against real agent CLIs").
"""

from __future__ import annotations

from ._anthropic import FakeAnthropic as FakeAnthropic
from ._anthropic import serve_fake_anthropic as serve_fake_anthropic
from ._gemini import serve_fake_gemini as serve_fake_gemini
from ._loopback import FakeStream as FakeStream
from ._openai_responses import serve_fake_responses as serve_fake_responses
from ._openai_responses import write_codex_home as write_codex_home

__all__ = [
    "FakeAnthropic",
    "FakeStream",
    "serve_fake_anthropic",
    "serve_fake_gemini",
    "serve_fake_responses",
    "write_codex_home",
]
