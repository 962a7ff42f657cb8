"""Bot stores this plugin brings: in memory (tests, benchmarks) and a JSON file.

The supervisor prefers the store a plugin provides (``agentrt_bot_store``,
the SQLite plugin's); when none does, ``agentrt bots`` uses
:class:`JsonFileBotStore`.  Both also implement ``append_timeline``, which
:class:`TimelineSink` uses to persist the applied lifecycle events.

The JSON store keeps records in one file rewritten atomically under an
``fcntl`` lock (so the CLI and a running ``supervise`` can share it) and each
bot's timeline as an append-only JSON Lines file beside it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.events import EventBatch, Lifecycle, StateChanged, to_json

from ._launch import check_bot_id

__all__ = ["MemoryBotStore", "JsonFileBotStore", "TimelineSink", "record_from_dict", "record_to_dict"]


def record_to_dict(record: BotRecord) -> dict[str, Any]:
    """The JSON form of a record."""
    return attrs.asdict(record)


def record_from_dict(data: Mapping[str, Any]) -> BotRecord:
    """A record from its JSON form (unknown keys ignored)."""
    names = {a.name for a in attrs.fields(BotRecord)}
    return BotRecord(**{k: v for k, v in data.items() if k in names})


class MemoryBotStore:
    """A :class:`~agentrt.bots.BotStore` held in memory."""

    def __init__(self) -> None:
        self._bots: dict[str, BotRecord] = {}
        self._timeline: dict[str, list[dict[str, Any]]] = {}

    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""
        return self._bots.get(bot_id)

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record."""
        self._bots[record.bot_id] = attrs.evolve(record, updated_at=time.time())

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""
        return [self._bots[k] for k in sorted(self._bots)]

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot and its timeline."""
        self._bots.pop(bot_id, None)
        self._timeline.pop(bot_id, None)

    async def timeline(self, bot_id: str, *, offset: int = 0, limit: int = 100) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        return list(self._timeline.get(bot_id, [])[offset : offset + limit])

    async def append_timeline(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        """Append one applied lifecycle event ``{type, message, payload}`` to the bot's timeline."""
        self._timeline.setdefault(bot_id, []).append(dict(entry))


class JsonFileBotStore:
    """A :class:`~agentrt.bots.BotStore` in ``<dir>/bots.json`` plus ``<dir>/timeline/<id>.jsonl``."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._path = self.directory / "bots.json"
        self._lock_path = self.directory / "bots.json.lock"
        self._tl_dir = self.directory / "timeline"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self._lock_path, "a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _read(self) -> dict[str, Any]:
        try:
            with open(self._path, encoding="utf-8") as fh:
                data = json.load(fh)
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            from agentrt.errors import AgentrtError

            raise AgentrtError("bot_store_corrupt", f"{self._path} is not valid JSON: {exc}") from exc
        bots = data.get("bots") if isinstance(data, dict) else None
        return bots if isinstance(bots, dict) else {}

    def _write(self, bots: Mapping[str, Any]) -> None:
        tmp = self._path.with_name(f"bots.json.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"schemaVersion": 1, "bots": bots}, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._path)

    def _get(self, bot_id: str) -> BotRecord | None:
        with self._locked():
            data = self._read().get(bot_id)
        return record_from_dict(data) if isinstance(data, Mapping) else None

    def _save(self, record: BotRecord) -> None:
        with self._locked():
            bots = self._read()
            bots[record.bot_id] = record_to_dict(attrs.evolve(record, updated_at=time.time()))
            self._write(bots)

    def _update(self, bot_id: str, change: Callable[[BotRecord], BotRecord]) -> tuple[BotRecord, BotRecord] | None:
        with self._locked():
            bots = self._read()
            data = bots.get(bot_id)
            if not isinstance(data, Mapping):
                return None
            old = record_from_dict(data)
            new = change(old)
            if new is not old:
                new = attrs.evolve(new, updated_at=time.time())
                bots[bot_id] = record_to_dict(new)
                self._write(bots)
            return old, new

    def _list(self) -> list[BotRecord]:
        with self._locked():
            bots = self._read()
        return [record_from_dict(bots[k]) for k in sorted(bots) if isinstance(bots[k], Mapping)]

    def _delete(self, bot_id: str) -> None:
        with self._locked():
            bots = self._read()
            if bots.pop(bot_id, None) is not None:
                self._write(bots)
            (self._tl_dir / f"{check_bot_id(bot_id)}.jsonl").unlink(missing_ok=True)

    def _timeline(self, bot_id: str, offset: int, limit: int) -> list[dict[str, Any]]:
        path = self._tl_dir / f"{check_bot_id(bot_id)}.jsonl"
        out: list[dict[str, Any]] = []
        try:
            with open(path, encoding="utf-8") as fh:
                for i, line in enumerate(fh):
                    if i < offset:
                        continue
                    if len(out) >= limit:
                        break
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue  # a torn last line after a crash: skip it
        except FileNotFoundError:
            return []
        return out

    def _append(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        self._tl_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._tl_dir / f"{check_bot_id(bot_id)}.jsonl"
        payload = json.dumps({**entry, "at": time.time()}, sort_keys=True, default=str) + "\n"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(payload)

    async def get_bot(self, bot_id: str) -> BotRecord | None:
        """The bot's record, or ``None``."""
        return await trio.to_thread.run_sync(self._get, bot_id)

    async def save_bot(self, record: BotRecord) -> None:
        """Create or replace the bot's record."""
        await trio.to_thread.run_sync(self._save, record)

    async def list_bots(self) -> Sequence[BotRecord]:
        """Every bot, ordered by id."""
        return await trio.to_thread.run_sync(self._list)

    async def update_bot(
        self, bot_id: str, change: Callable[[BotRecord], BotRecord]
    ) -> tuple[BotRecord, BotRecord] | None:
        """Atomic read-modify-write under the file lock: ``(old, new)``, or ``None`` if unknown.

        ``change`` runs in a worker thread while the lock is held: it must be quick and pure.
        """
        return await trio.to_thread.run_sync(self._update, bot_id, change)

    async def delete_bot(self, bot_id: str) -> None:
        """Forget a bot and its timeline."""
        await trio.to_thread.run_sync(self._delete, bot_id)

    async def timeline(self, bot_id: str, *, offset: int = 0, limit: int = 100) -> Sequence[Mapping[str, Any]]:
        """The bot's applied lifecycle events, oldest first, paged."""
        return await trio.to_thread.run_sync(self._timeline, bot_id, offset, limit)

    async def append_timeline(self, bot_id: str, entry: Mapping[str, Any]) -> None:
        """Append one applied lifecycle event ``{type, message, payload}`` to the bot's timeline."""
        await trio.to_thread.run_sync(self._append, bot_id, entry)


def timeline_entry(event: Lifecycle) -> dict[str, Any]:
    """The timeline form of an applied lifecycle event (as the reference stores it)."""
    return {
        "type": event.kind,
        "message": event.message,
        "payload": {
            "agentId": event.agent_id,
            "data": dict(event.data),
            "pid": event.pid,
            "timestamp": event.timestamp,
        },
    }


class TimelineSink:
    """A sink that appends applied lifecycle events (and state changes) to a store's timeline."""

    name = "bot-timeline"
    policy = "block"
    buffer_size = 256

    def __init__(self, store: Any, *, include_state_changes: bool = False) -> None:
        self._store = store
        self._states = include_state_changes

    async def handle(self, batch: EventBatch) -> None:
        """Append the batch's lifecycle events to the bot's timeline."""
        entries: list[dict[str, Any]] = []
        for ev in batch.events:
            if isinstance(ev, Lifecycle):
                entries.append(timeline_entry(ev))
            elif self._states and isinstance(ev, StateChanged):
                entries.append(to_json(ev))
        for entry in entries:
            await self._store.append_timeline(batch.source, entry)

    async def aclose(self) -> None:
        """Nothing to release."""
