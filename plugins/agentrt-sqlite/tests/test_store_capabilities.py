"""The database store offers every optional thread-store capability, checked structurally with ``isinstance``."""

from pathlib import Path
from typing import Any

import pytest

from agentrt.approval import build_approval_policy, close_recorder, store_recorder
from agentrt.sinks import FlushableSink
from agentrt.threads import (
    ApprovalLog,
    AsyncClosable,
    ConversationLog,
    ReplyParts,
    ThreadBrowser,
    ThreadHistory,
    ThreadRecord,
    ThreadRenamer,
)
from agentrt_sqlite.api import SqliteSink, SqliteStore

CAPABILITIES = (ThreadBrowser, ThreadHistory, ApprovalLog, ConversationLog, ThreadRenamer, AsyncClosable, ReplyParts)


class _MinimalStore:
    """Only :class:`agentrt.threads.ThreadStore`: none of the optional capabilities."""

    async def get_thread(self, name: str) -> ThreadRecord | None:
        return None

    async def save_thread(self, record: ThreadRecord) -> None:
        pass


class _Plugins:
    def __init__(self, store: Any) -> None:
        self.store = store

    def thread_store(self, env: Any) -> Any:
        return self.store


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.__name__)
async def test_sqlite_store_has_each_capability_and_a_minimal_store_none(tmp_path: Path, capability: type) -> None:
    store = SqliteStore(tmp_path / "a.db")
    try:
        assert isinstance(store, capability)
        assert not isinstance(_MinimalStore(), capability)
    finally:
        await store.aclose()


async def test_the_database_sink_is_flushable_and_a_minimal_sink_not(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "a.db")
    try:
        assert isinstance(sink, FlushableSink)
        await sink.flush()  # nothing handed over: returns at once
    finally:
        await sink.aclose()
    assert not isinstance(_MinimalStore(), FlushableSink)


def _policy(recorder: Any) -> Any:
    return build_approval_policy(default_mode="ask", permission_mode=None, allow_tools=(), deny_tools=(),
                                 config=None, recorder=recorder)


async def test_store_recorder_records_to_an_approval_log_and_close_recorder_closes_its_store(tmp_path: Path) -> None:
    assert store_recorder(_Plugins(_MinimalStore()), {}) is None
    store = SqliteStore(tmp_path / "a.db")
    recorder = store_recorder(_Plugins(store), {})
    assert recorder is not None and recorder.__self__ is store  # type: ignore[attr-defined]
    closed: list[bool] = []
    real_close = store.aclose

    async def counting_close() -> None:
        closed.append(True)
        await real_close()

    store.aclose = counting_close  # type: ignore[method-assign]
    await close_recorder(_policy(recorder))
    assert closed == [True]
    await close_recorder(_policy(None))  # no recorder: nothing to close
    assert closed == [True]
