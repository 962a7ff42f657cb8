"""Shared fixtures of the FastAgent tests: fixture binaries, a recording sink, supervisors; scratch home directories."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from agentrt.bots import BotRecord
from agentrt.events import Event, EventBatch, Lifecycle, ProcessExited, StateChanged
from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure
from agentrt_fastagent._launch import LlmProfile, SandboxConfig
from agentrt_fastagent._store import MemoryBotStore, TimelineSink
from agentrt_fastagent._supervisor import SupervisorConfig, open_supervisor

FIXTURE = Path(__file__).parent / "fixtures" / "fake_fastagent.py"
# FastAgent stdout written by the project from the CLI contract (fixtures/fastagent/README.md).
CAPTURES = Path(__file__).resolve().parent / "fixtures" / "fastagent"
WAIT = 10.0  # every wait in these tests is bounded by this


def make_binary(directory: Path, scenario: str = "happy", **settings: Any) -> Path:
    """Write an executable fixture CLI (python -S -E) with its settings file beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "fastagent"
    binary.write_text(f"#!{sys.executable} -SE\n" + FIXTURE.read_text())
    binary.chmod(0o755)
    (directory / "fastagent-fixture.json").write_text(
        json.dumps({"scenario": scenario, "step_delay_ms": 5, **settings})
    )
    return binary


class Recorder:
    """A sink that keeps every event and lets a test wait for a condition."""

    name = "recorder"
    policy = "block"
    buffer_size = 1000

    def __init__(self) -> None:
        self.batches: list[EventBatch] = []
        self._changed = trio.Event()
        self.closed = False

    async def handle(self, batch: EventBatch) -> None:
        self.batches.append(batch)
        self._changed.set()
        self._changed = trio.Event()

    async def aclose(self) -> None:
        self.closed = True

    def events(self, bot: str | None = None) -> list[Event]:
        return [e for b in self.batches if bot is None or b.source == bot for e in b.events]

    def states(self, bot: str) -> list[str]:
        return [e.state for e in self.events(bot) if isinstance(e, StateChanged)]

    def exits(self, bot: str) -> int:
        return sum(isinstance(e, ProcessExited) for e in self.events(bot))

    def kinds(self, bot: str) -> list[str]:
        return [e.kind for e in self.events(bot) if isinstance(e, Lifecycle)]

    async def wait_for(self, cond: Callable[[], bool], timeout: float = WAIT) -> None:
        with trio.fail_after(timeout):
            while not cond():
                await self._changed.wait()

    async def wait_state(self, bot: str, state: str, count: int = 1) -> None:
        await self.wait_for(lambda: self.states(bot).count(state) >= count)


PROFILE = LlmProfile(name="test", provider="openai", model="gpt-test", api_key="sk-test-secret-value")


def resolver(profile: LlmProfile | None = PROFILE, sandbox: SandboxConfig | None = None):
    def resolve(rec: BotRecord) -> tuple[LlmProfile | None, SandboxConfig]:
        return profile, sandbox or SandboxConfig()

    return resolve


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def store() -> MemoryBotStore:
    return MemoryBotStore()


@pytest.fixture
def sup_factory(tmp_path: Path, store: MemoryBotStore, recorder: Recorder):
    """Open a supervisor with millisecond backoffs over the fixture binary."""

    @asynccontextmanager
    async def factory(binary: Path | None, **kw: Any) -> AsyncIterator[Any]:
        resolve = kw.pop("resolve", resolver())
        env = kw.pop("parent_env", {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        cfg = SupervisorConfig(
            instances_dir=tmp_path / "instances",
            backoff=kw.pop("backoff", (0.01, 0.02, 0.03)),
            reconcile_interval=kw.pop("reconcile_interval", 0.05),
            term_grace=kw.pop("term_grace", 2.0),
            binary=binary,
            parent_env=env,
            **kw,
        )
        async with open_supervisor(store, config=cfg, resolve=resolve, sinks=[recorder, TimelineSink(store)]) as sup:
            yield sup

    return factory
