"""SSE decoding speed: agentrt's decoder vs openai-python's own, on the same bytes, in one run.

The stream is built from the real captures in plugins/agentrt-openai/tests/captures/openai-sse (every
event but ``[DONE]``, repeated to about 4 MiB, ``[DONE]`` once at the end).
Each decoder gets the same chunks and must produce the same ``data`` strings;
the figure is the ratio of their best CPU times (``time.process_time``, so
that other processes on a shared machine weigh less) over a few interleaved
repetitions:

* ``16k``: 16 KiB reads (a fast server, reads as httpx delivers them);
* ``event``: one read per event (a server pacing its tokens);
* ``crlf``: 16 KiB reads of the same stream with ``\\r\\n`` line ends.

* ``e2e``: the whole client over loopback HTTP (replay server, 16 KiB chunks,
  a text-only stream): agentrt's provider vs openai-python's ``AsyncOpenAI``
  streaming, wall time, best of three.

Target: agentrt's decoder at least 2x faster than openai-python's ``SSEDecoder``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "plugins" / "agentrt-openai" / "tests" / "captures" / "openai-sse"
TARGET_BYTES = 4 * 1024 * 1024
REPEAT = 7


def build_stream() -> tuple[bytes, list[bytes]]:
    """The benchmark stream and its events (each with its blank-line terminator)."""
    events: list[bytes] = []
    for path in sorted(FIXTURES.iterdir()):
        if path.suffix not in (".sse", ".txt") or path.name.endswith(".cmd.txt"):
            continue  # the recorder and each capture's command
        raw = path.read_bytes()
        if path.suffix == ".txt":  # headers + body
            raw = raw.partition(b"\r\n\r\n")[2]
        for block in raw.split(b"\n\n"):
            if block.strip() and block.strip() != b"data: [DONE]":
                events.append(block + b"\n\n")
    size = sum(map(len, events))
    stream_events = events * (TARGET_BYTES // size + 1)
    stream_events.append(b"data: [DONE]\n\n")
    return b"".join(stream_events), stream_events


def _ours(chunks: list[bytes]) -> list[str]:
    from agentrt_openai import SSEDecoder

    decoder = SSEDecoder()
    out: list[str] = []
    for chunk in chunks:
        out.extend(event.data for event in decoder.feed(chunk))
    out.extend(event.data for event in decoder.finish())
    return out


def _openai(chunks: list[bytes]) -> list[str]:
    from openai._streaming import SSEDecoder

    return [event.data for event in SSEDecoder().iter_bytes(iter(chunks))]


def _race(chunks: list[bytes]) -> tuple[float, float, list[str], list[str]]:
    """Best CPU time of each decoder, runs interleaved so that load from elsewhere hits both alike."""
    ours_best = theirs_best = float("inf")
    ours: list[str] = []
    theirs: list[str] = []
    for _ in range(REPEAT):
        start = time.process_time()
        ours = _ours(chunks)
        ours_best = min(ours_best, time.process_time() - start)
        start = time.process_time()
        theirs = _openai(chunks)
        theirs_best = min(theirs_best, time.process_time() - start)
    return ours_best, theirs_best, ours, theirs


def build_text_stream() -> bytes:
    """A text-only chat stream (the captures' text deltas, repeated), with a finish, usage and [DONE]."""
    deltas: list[bytes] = []
    for name in ("litellm-mock-text-stream.sse", "fakellm-text-stream.sse"):
        for block in (FIXTURES / name).read_bytes().split(b"\n\n"):
            if b'"content"' in block and b'"finish_reason": "length"' not in block:
                deltas.append(block + b"\n\n")
    size = sum(map(len, deltas))
    body = b"".join(deltas * (TARGET_BYTES // size + 1))
    tail = (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":14}}\n\n'
        b"data: [DONE]\n\n"
    )
    return body + tail


def _end_to_end() -> dict[str, Any]:
    """The whole client over loopback HTTP: agentrt's provider vs openai-python's AsyncOpenAI stream."""
    from contextlib import aclosing

    import httpx
    import trio
    from openai import AsyncOpenAI

    from agentrt.provider import ProviderRequest, TextChunk
    from agentrt.testing import ReplayResponse, serve_replay
    from agentrt_openai import OpenAIConfig, OpenAIProvider

    body = build_text_stream()
    response = ReplayResponse.sse(body).split(16384)
    messages = [{"role": "user", "content": "bench"}]

    async def ours(url: str) -> tuple[float, str]:
        start = time.perf_counter()
        async with OpenAIProvider(OpenAIConfig(base_url=url + "/v1", timeout_s=120)) as provider:
            request = ProviderRequest(model="m", messages=messages)
            async with aclosing(provider.stream(request)) as chunks:
                text = "".join([c.text async for c in chunks if isinstance(c, TextChunk)])
        return time.perf_counter() - start, text

    async def theirs(url: str) -> tuple[float, str]:
        start = time.perf_counter()
        async with httpx.AsyncClient(timeout=120) as http:
            client = AsyncOpenAI(base_url=url + "/v1", api_key="bench", http_client=http, max_retries=0)
            stream = await client.chat.completions.create(
                model="m",
                messages=messages,
                stream=True,  # type: ignore[arg-type]
            )
            parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return time.perf_counter() - start, "".join(parts)

    async def race() -> tuple[float, float, int]:
        best_ours = best_theirs = float("inf")
        length = 0
        async with serve_replay(lambda _request: response) as server:
            for _ in range(3):
                t_ours, text_ours = await ours(server.url)
                t_theirs, text_theirs = await theirs(server.url)
                if text_ours != text_theirs:
                    raise AssertionError("the clients disagree about the text")
                length = len(text_ours)
                best_ours, best_theirs = min(best_ours, t_ours), min(best_theirs, t_theirs)
        return best_ours, best_theirs, length

    ours_s, theirs_s, length = trio.run(race)
    events = body.count(b"\n\n")
    return {
        "agentrt_s": round(ours_s, 4),
        "openai_s": round(theirs_s, 4),
        "ratio": round(theirs_s / ours_s, 2),
        "agentrt_events_per_s": round(events / ours_s),
        "openai_events_per_s": round(events / theirs_s),
        "text_chars": length,
    }


def main() -> dict[str, Any]:
    """Run the comparison; print a table; return the figures."""
    stream, events = build_stream()
    crlf = stream.replace(b"\n", b"\r\n")
    cases = {
        "16k": [stream[i : i + 16384] for i in range(0, len(stream), 16384)],
        "event": events,
        "crlf": [crlf[i : i + 16384] for i in range(0, len(crlf), 16384)],
    }
    figures: dict[str, Any] = {"stream_bytes": len(stream), "events": len(events)}
    print(f"stream: {len(stream) / 2**20:.1f} MiB, {len(events)} events, best CPU time of {REPEAT}")
    print(f"{'case':<8}{'agentrt ms':>12}{'openai ms':>12}{'ratio':>8}{'agentrt ev/s':>15}{'openai ev/s':>14}")
    for name, chunks in cases.items():
        ours_s, theirs_s, ours, theirs = _race(chunks)
        if ours != theirs:
            raise AssertionError(f"{name}: the decoders disagree ({len(ours)} vs {len(theirs)} events)")
        ratio = theirs_s / ours_s
        figures[name] = {
            "agentrt_s": round(ours_s, 5),
            "openai_s": round(theirs_s, 5),
            "ratio": round(ratio, 2),
            "agentrt_events_per_s": round(len(ours) / ours_s),
            "openai_events_per_s": round(len(theirs) / theirs_s),
        }
        print(
            f"{name:<8}{ours_s * 1000:>12.1f}{theirs_s * 1000:>12.1f}{ratio:>7.1f}x"
            f"{len(ours) / ours_s:>15,.0f}{len(theirs) / theirs_s:>14,.0f}"
        )
    figures["target_ratio"] = 2.0
    figures["meets_target"] = all(figures[name]["ratio"] >= 2.0 for name in cases)
    e2e = _end_to_end()
    figures["end_to_end"] = e2e
    print(
        f"{'e2e':<8}{e2e['agentrt_s'] * 1000:>12.1f}{e2e['openai_s'] * 1000:>12.1f}{e2e['ratio']:>7.1f}x"
        f"{e2e['agentrt_events_per_s']:>15,}{e2e['openai_events_per_s']:>14,}"
        "   (wall time: loopback HTTP, whole client)"
    )
    return figures


if __name__ == "__main__":
    main()
