"""Conversation ids (``agentrt._ids.new_id``): UUID-shaped, distinct, and a fork's own."""

from __future__ import annotations

import os
import uuid

import pytest

from agentrt import _ids
from agentrt._ids import new_id


def prefix(an_id: str) -> str:
    return an_id[:24]  # everything but the counter group


def test_ids_are_version_4_uuids_and_distinct() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for an_id in ids[:3] + ids[-3:]:
        parsed = uuid.UUID(an_id)
        assert str(parsed) == an_id and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_fork_draws_a_prefix_of_its_own() -> None:
    before = new_id()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first id, then leave at once
        try:
            os.write(write_fd, new_id().encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        child_id = os.read(read_fd, 100).decode()
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    uuid.UUID(child_id)
    assert prefix(child_id) != prefix(before)
    # The parent goes on with its own prefix and counter.
    after = new_id()
    assert prefix(after) == prefix(before) and after != before and child_id != after


def test_a_spent_counter_draws_a_new_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ids, "_COUNTER_LIMIT", 2)
    monkeypatch.setattr(_ids, "_state", None)
    first, second, third = new_id(), new_id(), new_id()
    assert prefix(first) == prefix(second) != prefix(third)
    assert third.endswith("-" + "0" * 12) and len({first, second, third}) == 3
