"""The benchmark corpus: deterministic Claude Code stream-json output, as the CLI writes it (stdlib only).

``corpus_lines(n_lines, seed, big_lines)`` returns ``[(kind, line), ...]``, the same list for the same
arguments on every machine and Python version (``random.Random`` with an integer seed).  The lines
follow one session through turns the way Claude Code 2.1 prints them with ``--include-partial-messages``
(see ``plugins/agentrt-stream-json/tests/captures/claude-code/``): each line a compact JSON object in
raw UTF-8 (JSON.stringify's spelling: no spaces, non-ASCII unescaped, ``"`` ``\\`` and control characters
escaped), ``\\n``-ended.

Kinds, by share of lines (drawn independently per line, so the shares hold for any length):

==================  ======  ====================================================================
kind                share   what
==================  ======  ====================================================================
text_delta          70 %    ``stream_event`` carrying a ``text_delta`` of 4-40 bytes (~260 bytes
                            a line: the envelope's uuid and session id dominate)
other_stream         9 %    the rest of the stream: ``message_start``, ``content_block_start`` /
                            ``_stop``, ``message_delta``, ``message_stop``, ``input_json_delta``
assistant           12 %    a whole ``assistant`` message of 2-20 KiB: text, sometimes thinking,
                            often an Edit/Read/Bash/Grep/Write ``tool_use``
user_tool_result     6 %    a ``user`` line with a ``tool_result`` of 1-10 KiB
system               2 %    ``system`` lines: ``init``, ``status``, ``task_progress``
result               0.5 %  a turn's ``result``
rate_limit           0.5 %  ``rate_limit_event``
big_1mb             (fixed) every 2,500th line (with ``big_lines``): a ~1 MB ``tool_result``
==================  ======  ====================================================================

Run it to print the mix: ``python bench/corpus.py [n_lines]``.
"""

from __future__ import annotations

import json
import random
import sys
import uuid
from typing import Any

BIG_LINE_EVERY = 2500
BIG_LINE_BYTES = 1_000_000
MODEL = "claude-sonnet-4-5-20250929"

# Vocabulary of the generated text: prose and code as an agent writes them, with the characters a
# decoder must get right: multi-byte UTF-8 (2, 3 and 4 bytes), quotes, backslashes, tabs, newlines.
_TEXT = """
    I'll start by reading the module that frames the pipe and then check how the codec turns each
    line into events . The test fails because the reader keeps a partial line across reads ; let me
    fix the offset and run it again . def async await return yield class import from with as None
    True False self cls kwargs -> : , ( ) [ ] { } = == != <= >= += 0 1 2 42 3.5 1e-3 0xff
    src/agentrt/_framing.py:88 tests/core/test_framing.py::test_split README.md
    résumé façade naïve Größe Ωmega → ← ≤ ≥ ✓ ✗ … — 漢字 かな 한국어 🙂 🚀
    "double" 'single' `tick` C:\\path\\file \\n \\t <tag> &amp; %s {0} $HOME #comment //note /* */
"""
_VOCABULARY = (*_TEXT.split(), "\n", "\n\n", "\t", '"', "\\")
# The same words without the non-ASCII ones: text as most code and shell output is (``ascii_only=True``).
_ASCII_VOCABULARY = tuple(word for word in _VOCABULARY if word.isascii())

_TOOLS = ("Read", "Edit", "Bash", "Grep", "Write")
_WEIGHTS = (
    ("text_delta", 70.0),
    ("other_stream", 9.0),
    ("assistant", 12.0),
    ("user_tool_result", 6.0),
    ("system", 2.0),
    ("result", 0.5),
    ("rate_limit", 0.5),
)
KINDS = tuple(kind for kind, _ in _WEIGHTS)


def _line(obj: dict[str, Any]) -> bytes:
    """One line as JSON.stringify spells it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class _Session:
    """One session's state: the random source, its ids and the message being streamed."""

    def __init__(self, seed: int, vocabulary: tuple[str, ...] = _VOCABULARY) -> None:
        self.rng = random.Random(seed)
        self.vocabulary = vocabulary
        self.session_id = self.new_uuid()
        self.message_id = self.new_id("msg_")

    def new_uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def new_id(self, prefix: str) -> str:
        # Anthropic ids: a prefix and 24 base-62-looking characters
        return (
            prefix
            + "01"
            + "".join(self.rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", k=22))
        )

    def words(self, nbytes: int) -> str:
        """Text of at least ``nbytes`` UTF-8 bytes."""
        picks: list[str] = []
        size = 0
        choice = self.rng.choice
        while size < nbytes:
            word = choice(self.vocabulary)
            picks.append(word)
            size += len(word.encode()) + 1
        return " ".join(picks)

    def usage(self) -> dict[str, Any]:
        r = self.rng.randint
        return {
            "input_tokens": r(1, 6000),
            "cache_creation_input_tokens": r(0, 30000),
            "cache_read_input_tokens": r(0, 250000),
            "output_tokens": r(1, 5000),
            "service_tier": "standard",
        }

    def envelope(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "type": kind,
            **fields,
            "parent_tool_use_id": None,
            "session_id": self.session_id,
            "uuid": self.new_uuid(),
        }

    def stream(self, event: dict[str, Any]) -> dict[str, Any]:
        # Without the api_message_id of newer CLIs: the line sizes the bench figures were taken on.
        return self.envelope("stream_event", event=event)

    # -- one method per kind -------------------------------------------------------------------

    def text_delta(self) -> dict[str, Any]:
        delta = {"type": "text_delta", "text": self.words(self.rng.randint(4, 40))}
        return self.stream({"type": "content_block_delta", "index": self.rng.randint(0, 2), "delta": delta})

    def other_stream(self) -> dict[str, Any]:
        r = self.rng
        index = r.randint(0, 2)
        which = r.randrange(6)
        if which == 0:
            self.message_id = self.new_id("msg_")
            message: dict[str, Any] = {
                "id": self.message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": self.usage(),
            }
            event: dict[str, Any] = {"type": "message_start", "message": message}
        elif which == 1:
            event = {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        elif which == 2:
            event = {"type": "content_block_stop", "index": index}
        elif which == 3:
            stop = r.choice(("end_turn", "tool_use"))
            event = {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": r.randint(1, 5000)},
            }
        elif which == 4:
            event = {"type": "message_stop"}
        else:
            piece = json.dumps({"file_path": self.words(12)}, ensure_ascii=False)[: r.randint(8, 30)]
            event = {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
        return self.stream(event)

    def assistant(self) -> dict[str, Any]:
        r = self.rng
        size = r.randint(2_000, 20_000)
        blocks: list[dict[str, Any]] = []
        if r.random() < 0.3:
            blocks.append({"type": "thinking", "thinking": self.words(size // 3), "signature": self.new_id("Eq") * 5})
        blocks.append({"type": "text", "text": self.words(size // 2)})
        if r.random() < 0.6:
            tool = r.choice(_TOOLS)
            path = f"src/agentrt/{r.choice(('_framing', '_process', 'events', 'dialect', '_pump'))}.py"
            if tool == "Edit":
                args: dict[str, Any] = {
                    "file_path": path,
                    "old_string": self.words(size // 6),
                    "new_string": self.words(size // 6),
                }
            elif tool == "Bash":
                args = {"command": self.words(size // 4), "description": self.words(30)}
            elif tool == "Write":
                args = {"file_path": path, "content": self.words(size // 3)}
            else:
                args = {"file_path": path, "pattern": self.words(20), "limit": r.randint(1, 2000)}
            blocks.append({"type": "tool_use", "id": self.new_id("toolu_"), "name": tool, "input": args})
        message = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": blocks,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage(),
            "context_management": None,
        }
        return self.envelope("assistant", message=message)

    def user_tool_result(self, nbytes: int = 0) -> dict[str, Any]:
        content = self.words(nbytes or self.rng.randint(1_000, 10_000))
        block = {"tool_use_id": self.new_id("toolu_"), "type": "tool_result", "content": content, "is_error": False}
        obj = self.envelope("user", message={"role": "user", "content": [block]})
        obj["timestamp"] = f"2026-01-{self.rng.randint(1, 28):02d}T{self.rng.randint(0, 23):02d}:00:00.000Z"
        return obj

    def system(self) -> dict[str, Any]:
        which = self.rng.randrange(3)
        if which == 0:
            return {
                "type": "system",
                "subtype": "init",
                "cwd": "/home/dev/project",
                "session_id": self.session_id,
                "tools": ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "WebFetch"],
                "mcp_servers": [],
                "model": MODEL,
                "permissionMode": "default",
                "apiKeySource": "ANTHROPIC_API_KEY",
                "claude_code_version": "2.1.332",
                "uuid": self.new_uuid(),
            }
        if which == 1:
            return {
                "type": "system",
                "subtype": "status",
                "status": "requesting",
                "session_id": self.session_id,
                "uuid": self.new_uuid(),
            }
        return {
            "type": "system",
            "subtype": "task_progress",
            "task_id": self.new_uuid(),
            "description": self.words(50),
            "usage": {"total_tokens": self.rng.randint(1, 90000), "tool_uses": self.rng.randint(0, 40)},
            "session_id": self.session_id,
            "uuid": self.new_uuid(),
        }

    def result(self) -> dict[str, Any]:
        r = self.rng
        return {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": r.randint(200, 120_000),
            "duration_api_ms": r.randint(150, 100_000),
            "num_turns": r.randint(1, 40),
            "result": self.words(300),
            "stop_reason": "end_turn",
            "session_id": self.session_id,
            "total_cost_usd": round(r.random(), 6),
            "usage": self.usage(),
            "permission_denials": [],
            "terminal_reason": "completed",
            "uuid": self.new_uuid(),
        }

    def rate_limit(self) -> dict[str, Any]:
        info = {"status": "allowed", "resetsAt": 1767225600, "rateLimitType": "five_hour", "utilization": 0.37}
        return {
            "type": "rate_limit_event",
            "rate_limit_info": info,
            "uuid": self.new_uuid(),
            "session_id": self.session_id,
        }


def corpus_lines(
    n_lines: int = 20_000, seed: int = 1234, big_lines: bool = True, ascii_only: bool = False
) -> list[tuple[str, bytes]]:
    """``[(kind, line), ...]``: ``n_lines`` lines, each ``\\n``-ended, the same for the same arguments.

    With ``ascii_only``, the text is drawn from the ASCII words only (the same kinds, shares and sizes).
    """
    session = _Session(seed, _ASCII_VOCABULARY if ascii_only else _VOCABULARY)
    weights = [weight for _, weight in _WEIGHTS]
    out: list[tuple[str, bytes]] = []
    for number in range(1, n_lines + 1):
        if big_lines and number % BIG_LINE_EVERY == 0:
            out.append(("big_1mb", _line(session.user_tool_result(BIG_LINE_BYTES - 400))))
            continue
        (kind,) = session.rng.choices(KINDS, weights)
        out.append((kind, _line(getattr(session, kind)())))
    return out


def corpus_blob(n_lines: int = 20_000, seed: int = 1234, big_lines: bool = True) -> bytes:
    """The lines of :func:`corpus_lines` joined."""
    return b"".join(line for _, line in corpus_lines(n_lines, seed, big_lines))


def describe(lines: list[tuple[str, bytes]]) -> dict[str, Any]:
    """Count, share and sizes per kind, for reports."""
    sizes: dict[str, list[int]] = {}
    for kind, line in lines:
        sizes.setdefault(kind, []).append(len(line))
    total = sum(len(line) for _, line in lines)
    kinds = {
        kind: {
            "count": len(v),
            "share": round(len(v) / len(lines), 4),
            "mean_bytes": round(sum(v) / len(v)),
            "min": min(v),
            "max": max(v),
        }
        for kind, v in sorted(sizes.items())
    }
    return {"lines": len(lines), "bytes": total, "mean_line_bytes": round(total / len(lines)), "kinds": kinds}


if __name__ == "__main__":
    print(json.dumps(describe(corpus_lines(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)), indent=1))
