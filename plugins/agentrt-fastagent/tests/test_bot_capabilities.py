"""Optional bot capabilities are Protocols checked with ``isinstance`` (``agentrt.bots``), never attribute probes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.bots import QrReissuer, SharedBotStore
from agentrt.errors import AgentrtError
from agentrt_fastagent._redis_store import RedisBotStore
from agentrt_fastagent.api import JsonFileBotStore, MemoryBotStore, Supervisor, SupervisorConfig, open_supervisor

from .conftest import resolver


class _FlaggedStore:
    """A memory store (by composition) that says whether it is shared between hosts."""

    def __init__(self, shared: bool) -> None:
        self.shared_between_hosts = shared
        self._inner = MemoryBotStore()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_only_the_redis_store_is_shared_between_hosts(tmp_path: Path) -> None:
    redis = RedisBotStore("redis://127.0.0.1:1")  # never connected: construction only
    assert isinstance(redis, SharedBotStore) and redis.shared_between_hosts
    assert not isinstance(MemoryBotStore(), SharedBotStore)
    assert not isinstance(JsonFileBotStore(tmp_path), SharedBotStore)


def test_the_supervisor_reissues_qr_codes_in_one_request() -> None:
    assert issubclass(Supervisor, QrReissuer)
    assert not isinstance(object(), QrReissuer)


async def test_open_supervisor_reads_the_shared_flag_not_its_presence(tmp_path: Path) -> None:
    config = SupervisorConfig(instances_dir=tmp_path / "a")
    async with open_supervisor(_FlaggedStore(False), config=config, resolve=resolver()) as sup:  # type: ignore[arg-type]
        assert await sup.store.list_bots() == []
    with pytest.raises(AgentrtError) as bad:
        config = SupervisorConfig(instances_dir=tmp_path / "b")
        async with open_supervisor(_FlaggedStore(True), config=config, resolve=resolver()):  # type: ignore[arg-type]
            pass
    assert bad.value.code == "placement_required"
