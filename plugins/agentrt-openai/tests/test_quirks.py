"""Server quirks seen in the wild, each served over loopback HTTP by the replay server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.errors import AgentrtError
from agentrt.events import Usage
from agentrt.provider import FinishChunk, ReasoningChunk, TextChunk, ToolCall, ToolCallsChunk, UsageChunk
from agentrt.testing import ReplayResponse


def delta(d: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}], **extra}


def tc(index: int | None = None, id: str | None = None, name: str | None = None, args: str | None = None) -> Any:
    call: dict[str, Any] = {"type": "function", "function": {}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
    if name is not None:
        call["function"]["name"] = name
    if args is not None:
        call["function"]["arguments"] = args
    return call


async def chunks_of(run: Any, body: bytes | list[bytes], **kw: Any) -> list[Any]:
    chunks, server = await run([ReplayResponse.sse(body)], **kw)
    assert len(server.requests) == 1
    return chunks


async def error_of(run: Any, body: bytes | list[bytes]) -> AgentrtError:
    with pytest.raises(AgentrtError) as info:
        await run([ReplayResponse.sse(body)])
    return info.value


def text(chunks: list[Any]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextChunk))


def calls(chunks: list[Any]) -> tuple[ToolCall, ...]:
    found = [c.calls for c in chunks if isinstance(c, ToolCallsChunk)]
    assert len(found) == 1, "tool calls are sent exactly once"
    return found[0]


async def test_keepalive_comments_between_and_within_events(run: Any) -> None:
    body = (
        b": keep-alive\n\n"
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
        b": keep-alive\n\n"
        b'data: {"choices":[{"delta":\n: inside an event\ndata: {"content":"b"}}]}\n\n'
        b"id: 5\n\n"
        b": ping after an id\n\n"
        b": ping\n\n"
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    # Cut into 3-byte pieces too: a comment must never become an (empty, unparseable) event.
    for chunking in ([body], [body[i : i + 3] for i in range(0, len(body), 3)]):
        chunks = await chunks_of(run, chunking)
        assert text(chunks) == "ab"
        assert chunks[-1] == FinishChunk(reason="stop")


@pytest.mark.parametrize(
    "usage_event",
    [
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"choices": [{"index": 0, "delta": {}}], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"choices": [], "usage": {"input_tokens": 3, "output_tokens": 4}},
    ],
    ids=["empty-choices", "nonempty-choices", "no-choices", "input-output-names"],
)
async def test_usage_from_any_chunk_shape(run: Any, kit: Any, usage_event: dict[str, Any]) -> None:
    body = kit.sse(delta({"content": "x"}), delta({}, "stop"), usage_event)
    chunks = await chunks_of(run, body)
    assert [c for c in chunks if isinstance(c, UsageChunk)] == [
        UsageChunk(usage=Usage(input_tokens=3, output_tokens=4))
    ]


async def test_usage_last_wins_and_absent_means_no_chunk(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 1}),
        delta({}, "stop", usage={"prompt_tokens": 9, "completion_tokens": 2}),
    )
    chunks = await chunks_of(run, body)
    assert [c.usage for c in chunks if isinstance(c, UsageChunk)] == [Usage(input_tokens=9, output_tokens=2)]
    chunks = await chunks_of(run, kit.sse(delta({"content": "x"}), delta({}, "stop")))
    assert not any(isinstance(c, UsageChunk) for c in chunks)


async def test_ids_and_names_repeated_in_every_chunk_are_kept_once(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"tool_calls": [tc(0, "call_1", "get_weather", '{"ci')]}),
        delta({"tool_calls": [tc(0, "call_1", "get_weather", 'ty": "Oslo"}')]}),
        delta({}, "tool_calls"),
    )
    assert calls(await chunks_of(run, body)) == (
        ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),
    )


async def test_name_in_pieces_is_joined(run: Any, kit: Any) -> None:
    # The reference end-to-end test splits the name as "awp_run_" + "managed_task".
    body = kit.sse(
        delta({"tool_calls": [tc(0, "c1", "awp_run_", "")]}),
        delta({"tool_calls": [tc(0, None, "managed_task", '{"argv":["echo"]}')]}),
        delta({"tool_calls": [tc(0, None, "task")]}),  # a suffix repeat is not appended again
        delta({}, "tool_calls"),
    )
    assert calls(await chunks_of(run, body)) == (
        ToolCall(id="c1", name="awp_run_managed_task", arguments='{"argv":["echo"]}'),
    )


async def test_last_nonempty_id_wins(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"tool_calls": [tc(0, "first", "f")]}),
        delta({"tool_calls": [tc(0, "", None, "{}")]}),
        delta({"tool_calls": [tc(0, "second")]}),
        delta({}, "tool_calls"),
    )
    assert calls(await chunks_of(run, body)) == (ToolCall(id="second", name="f", arguments="{}"),)


async def test_missing_ids_are_made_up_and_empty_args_are_an_empty_object(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"tool_calls": [tc(0, None, "a", ""), tc(1, None, "b", '{"x":1}')]}),
        delta({}, "tool_calls"),
    )
    assert calls(await chunks_of(run, body)) == (
        ToolCall(id="call-0", name="a", arguments="{}"),
        ToolCall(id="call-1", name="b", arguments='{"x":1}'),
    )


async def test_missing_index_uses_position(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"tool_calls": [tc(None, "x1", "one", '{"a":'), tc(None, "x2", "two", "[1")]}),
        delta({"tool_calls": [tc(None, None, None, "1}"), tc(None, None, None, "]")]}),
        delta({}, "tool_calls"),
    )
    assert calls(await chunks_of(run, body)) == (
        ToolCall(id="x1", name="one", arguments='{"a":1}'),
        ToolCall(id="x2", name="two", arguments="[1]"),
    )


async def test_whole_arguments_in_one_chunk(run: Any, kit: Any) -> None:
    body = kit.sse(delta({"tool_calls": [tc(0, "w", "whole", '{"city": "Rome", "n": 2}')]}, "tool_calls"))
    assert calls(await chunks_of(run, body)) == (ToolCall(id="w", name="whole", arguments='{"city": "Rome", "n": 2}'),)


async def test_legacy_function_call_shape(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"function_call": {"name": "lookup", "arguments": '{"q":'}}),
        delta({"function_call": {"arguments": '"x"}'}}),
        delta({}, "function_call"),
    )
    chunks = await chunks_of(run, body)
    assert calls(chunks) == (ToolCall(id="call-0", name="lookup", arguments='{"q":"x"}'),)
    assert chunks[-1] == FinishChunk(reason="function_call")


@pytest.mark.parametrize(
    ("fragments", "code"),
    [
        ([tc(0, "bad id!", "f", "{}")], "provider_tool_call_id_invalid"),
        ([tc(0, "i" * 257, "f", "{}")], "provider_tool_call_id_invalid"),
        ([tc(0, "c", "9starts-with-digit", "{}")], "provider_tool_name_invalid"),
        ([tc(0, "c", None, "{}")], "provider_tool_name_invalid"),
        ([tc(0, "c", "n" * 129, "{}")], "provider_tool_name_invalid"),
        ([tc(0, "c", "f", '{"x": ')], "provider_tool_arguments_invalid_json"),
        ([tc(0, "c", "f", '"' + "a" * (64 * 1024) + '"')], "provider_tool_arguments_oversize"),
        ([tc(0, "same", "f", "{}"), tc(1, "same", "g", "{}")], "provider_tool_call_id_duplicate"),
    ],
)
async def test_tool_call_validation(run: Any, kit: Any, fragments: list[Any], code: str) -> None:
    body = kit.sse(delta({"tool_calls": fragments}), delta({}, "tool_calls"))
    assert (await error_of(run, body)).code == code


async def test_arguments_at_the_64k_limit_pass(run: Any, kit: Any) -> None:
    args = '"' + "a" * (64 * 1024 - 2) + '"'
    body = kit.sse(delta({"tool_calls": [tc(0, "c", "f", args)]}, "tool_calls"))
    assert calls(await chunks_of(run, body))[0].arguments == args


async def test_error_object_in_a_200_stream(run: Any, kit: Any) -> None:
    secret_message = "upstream said: key sk-leaked-123 is over quota"
    body = kit.sse(
        delta({"content": "par"}),
        {"error": {"message": secret_message, "type": "server_error", "code": "overloaded"}},
        done=False,
    )
    with pytest.raises(AgentrtError) as info:
        await run([ReplayResponse.sse(body)])
    assert info.value.code == "provider_returned_error"
    assert "overloaded" in info.value.detail  # a safe code is kept
    assert "sk-leaked" not in str(info.value) and "quota" not in str(info.value)


async def test_error_event_type(run: Any) -> None:
    body = b'event: error\ndata: {"message": "boom"}\n\n'
    assert (await error_of(run, body)).code == "provider_returned_error"


async def test_malformed_event_is_an_error(run: Any, kit: Any) -> None:
    body = kit.sse(delta({"content": "a"}), b'{"choices": [', done=False)
    assert (await error_of(run, body)).code == "provider_stream_malformed"


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_fields(run: Any, kit: Any, field: str) -> None:
    body = kit.sse(delta({field: "think "}), delta({field: "more"}), delta({"content": "answer"}), delta({}, "stop"))
    chunks = await chunks_of(run, body)
    assert [c for c in chunks if isinstance(c, ReasoningChunk)] == [
        ReasoningChunk(text="think "),
        ReasoningChunk(text="more"),
    ]
    assert text(chunks) == "answer"


async def test_content_as_array_of_parts(run: Any, kit: Any) -> None:
    body = kit.sse(
        delta({"content": [{"type": "text", "text": "he"}, {"type": "image"}, {"type": "text", "text": "llo"}]}),
        delta({}, "stop"),
    )
    assert text(await chunks_of(run, body)) == "hello"


@pytest.mark.parametrize("reason", ["stop", "length", "tool_calls", "content_filter", "function_call"])
async def test_finish_reasons_without_done(run: Any, kit: Any, reason: str) -> None:
    # A finish_reason and then end of body (no [DONE]) is a proper end.
    chunks = await chunks_of(run, kit.sse(delta({"content": "t"}), delta({}, reason), done=False))
    assert chunks[-1] == FinishChunk(reason=reason)


async def test_done_without_finish_reason(run: Any, kit: Any) -> None:
    chunks = await chunks_of(run, kit.sse(delta({"content": "t"}, None)))
    assert chunks == [TextChunk(text="t"), FinishChunk(reason=None)]


async def test_nothing_after_done_is_read(run: Any, kit: Any) -> None:
    body = kit.sse(delta({"content": "t"})) + b"data: not json at all\n\n"
    chunks = await chunks_of(run, body)
    assert chunks == [TextChunk(text="t"), FinishChunk(reason=None)]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n',
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choices":[{"delta":{},"finish_r',
        b": only a keep-alive\n\n",
    ],
    ids=["empty", "no-finish", "cut-mid-event", "comment-only"],
)
async def test_truncated_streams(run: Any, body: bytes) -> None:
    assert (await error_of(run, body)).code == "provider_stream_truncated"


async def test_text_cap_is_enforced() -> None:
    from agentrt_openai._chat import MAX_TEXT_BYTES, ChatStream

    chat = ChatStream()
    piece = "é" * (1024 * 1024)  # 2 MiB of UTF-8 per event
    with pytest.raises(AgentrtError) as info:
        for _ in range(MAX_TEXT_BYTES // len(piece.encode()) + 1):
            chat.feed(json.dumps({"choices": [{"delta": {"content": piece}}]}))
    assert info.value.code == "provider_text_oversize"


_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
_args = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=4).map(json.dumps)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_tool_call_merge_is_independent_of_fragmentation(data: st.DataObject) -> None:
    """However a server cuts ids, names and arguments, the merged calls are the same.

    (Except a name cut into pieces that look like repeats, which the rule cannot tell apart.)
    """
    from agentrt_openai._chat import ChatStream

    wanted = data.draw(st.lists(st.tuples(_names, _args), min_size=1, max_size=3))
    per_call: list[list[dict[str, Any]]] = []
    for index, (name, args) in enumerate(wanted):
        events: list[dict[str, Any]] = []
        per_call.append(events)
        style = data.draw(st.sampled_from(["repeat", "split", "once"]))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(args)), max_size=4)))
        pieces = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)])]
        split_at = data.draw(st.integers(1, len(name)))
        head, rest = name[:split_at], name[split_at:]
        if style == "split" and rest and (rest.startswith(head) or head.endswith(rest)):
            # §B's rule cannot tell "A" + "A" from "A" repeated: such a split is ambiguous by design.
            style = "once"
        for n, piece in enumerate(pieces):
            if style == "repeat":
                fragment = tc(index, f"id{index}", name, piece)
            elif style == "split":
                part = name[:split_at] if n == 0 else (name[split_at:] if n == 1 else None)
                fragment = tc(index, f"id{index}" if n == 0 else None, part or None, piece)
            else:
                fragment = tc(index, f"id{index}" if n == 0 else None, name if n == 0 else None, piece)
            events.append(delta({"tool_calls": [fragment]}))
        if style == "split" and len(pieces) == 1 and split_at < len(name):
            events.append(delta({"tool_calls": [tc(index, None, name[split_at:])]}))
    # Interleave the calls as parallel tool calls arrive, keeping each call's own order.
    chat = ChatStream()
    first_seen = []
    while any(per_call):
        pick = data.draw(st.sampled_from([i for i, q in enumerate(per_call) if q]))
        if pick not in first_seen:
            first_seen.append(pick)
        chat.feed(json.dumps(per_call[pick].pop(0)))
    chat.feed(json.dumps(delta({}, "tool_calls")))
    (chunk, finish) = chat.finish()
    assert chunk == ToolCallsChunk(
        calls=tuple(ToolCall(id=f"id{i}", name=wanted[i][0], arguments=wanted[i][1]) for i in first_seen)
    )
    assert finish == FinishChunk(reason="tool_calls")
