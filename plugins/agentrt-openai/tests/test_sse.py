"""The SSE decoder: line ends, fields, comments, BOM, and chunking independence (hypothesis)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt_openai._sse import SSEDecoder, SSEEvent


def feed_all(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.finish())
    return out


def reference(stream: bytes) -> list[SSEEvent]:
    """A line-by-line transcription of the WHATWG algorithm, written for clarity, not speed."""
    text = stream.decode("utf-8", "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the text after the last line end is not a complete line
    out: list[SSEEvent] = []
    data: list[str] = []
    event: str | None = None
    last_id: str | None = None
    retry: int | None = None
    for line in lines:
        if line == "":
            if data:
                out.append(SSEEvent("\n".join(data), event, last_id, retry))
            data, event = [], None
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            value = value[1:] if value.startswith(" ") else value
        else:
            name, value = line, ""
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    return out


def test_single_data_event() -> None:
    assert feed_all([b"data: hello\n\n"]) == [SSEEvent("hello")]


def test_multiline_data_joined_with_newline() -> None:
    assert feed_all([b"data: a\ndata: b\ndata:c\n\n"]) == [SSEEvent("a\nb\nc")]


def test_crlf_and_cr_line_ends() -> None:
    assert feed_all([b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]) == [
        SSEEvent("a"),
        SSEEvent("b"),
        SSEEvent("c"),
    ]


def test_cr_at_chunk_end_then_lf_is_one_line_end() -> None:
    # "\r" | "\n\r\n": the first CRLF spans two chunks and must count once.
    assert feed_all([b"data: a\r", b"\n\r\n"]) == [SSEEvent("a")]
    assert feed_all([b"data: a\r", b"\n", b"data: b\r\n\r\n"]) == [SSEEvent("a\nb")]


def test_keepalive_comment_never_dispatches_even_after_id() -> None:
    # The httpx-sse #35 / openai-python #2722 bug: id then comment gave an empty event.
    stream = b"id: 7\n\n: keep-alive\n\n: ping\n\ndata: x\n\n"
    assert feed_all([stream]) == [SSEEvent("x", None, "7", None)]


def test_comment_inside_an_event_is_ignored() -> None:
    assert feed_all([b"data: a\n: note\ndata: b\n\n"]) == [SSEEvent("a\nb")]


def test_event_id_retry_fields() -> None:
    events = feed_all([b"event: delta\nid: 1\nretry: 1500\ndata: x\n\ndata: y\n\n"])
    assert events == [SSEEvent("x", "delta", "1", 1500), SSEEvent("y", None, "1", 1500)]


def test_bad_retry_and_nul_id_are_ignored() -> None:
    assert feed_all([b"retry: 1x\nid: a\0b\ndata: x\n\n"]) == [SSEEvent("x")]


def test_field_without_colon() -> None:
    # "data" alone is a data line with an empty value: it dispatches an empty event.
    assert feed_all([b"data\n\n"]) == [SSEEvent("")]
    assert feed_all([b"event\ndata: q\n\n"]) == [SSEEvent("q", "", None, None)]


def test_only_one_leading_space_is_stripped() -> None:
    assert feed_all([b"data:  two\n\n"]) == [SSEEvent(" two")]


def test_unknown_field_ignored_and_no_data_no_dispatch() -> None:
    assert feed_all([b"foo: bar\n\nevent: x\n\n"]) == []


def test_bom_at_stream_start_only() -> None:
    bom = b"\xef\xbb\xbf"
    assert feed_all([bom + b"data: a\n\n"]) == [SSEEvent("a")]
    assert feed_all([bom[:1], bom[1:2], bom[2:] + b"data: a\n\n"]) == [SSEEvent("a")]
    # A second BOM is content: it makes the field name "\ufeffdata", which is ignored.
    assert feed_all([bom + bom + b"data: a\n\n"]) == []


def test_unterminated_event_is_discarded_and_reported_pending() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: partial") == [SSEEvent("a")]
    assert decoder.finish() == []
    assert decoder.pending == len(b"data: partial")


def test_utf8_split_across_chunks() -> None:
    data = "data: héllo ✓\n\n".encode()
    assert feed_all([data[i : i + 1] for i in range(len(data))]) == [SSEEvent("héllo ✓")]


def test_many_blank_lines() -> None:
    assert feed_all([b"\n\n\n\ndata: a\n\n\n\n\ndata: b\n\n\n"]) == [SSEEvent("a"), SSEEvent("b")]


_line = st.one_of(
    st.sampled_from(
        [
            'data: {"x": 1}',
            "data:",
            "data",
            "data:  spaced",
            ": keep-alive",
            ":",
            "id: 42",
            "id",
            "event: message",
            "event: error",
            "retry: 3000",
            "retry: x",
            "foo: bar",
            "",
            "",
            "data: [DONE]",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]), max_size=12),
)
_ends = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_line, _ends), max_size=30))
    text = "".join(line + end for line, end in lines)
    prefix = "\ufeff" if draw(st.booleans()) else ""
    return (prefix + text).encode()


@st.composite
def cuts(draw: st.DrawFn, data: bytes) -> list[bytes]:
    points = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    out, last = [], 0
    for p in points:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_chunking_gives_the_reference_events(data: st.DataObject) -> None:
    stream = data.draw(streams())
    chunks = data.draw(cuts(stream))
    expected = reference(stream)
    assert feed_all(chunks) == expected
    assert feed_all([stream]) == expected
    assert feed_all([stream[i : i + 1] for i in range(len(stream))]) == expected
    # Cut right after every blank line: the whole-event fast path.
    assert feed_all(re.split(b"(?<=\n\n)", stream)) == expected


def test_whole_event_chunks_keep_id_and_retry() -> None:
    chunks = [b"data: a\n\n", b"id: 9\nretry: 10\n\n", b"data: b\n\n", b"data: c\ndata: d\n\n", b": x\n\n"]
    assert feed_all(chunks) == [SSEEvent("a"), SSEEvent("b", None, "9", 10), SSEEvent("c\nd", None, "9", 10)]
