"""One storage test-suite, run against SQLite and against a real redis-server."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from agentrt_managed_task._store import LEASE_EXPIRED_MESSAGE, AgentOffline, StoreConflict, StoreNotFound

LEASE = 60.0


async def test_submit_is_idempotent_per_key(store: Any) -> None:
    first, created = await store.submit("command", {"argv": ["echo", "1"]}, "key-1")
    again, created_again = await store.submit("command", {"argv": ["echo", "DIFFERENT"]}, "key-1")
    other, _ = await store.submit("command", {"argv": ["echo", "1"]}, "key-2")
    unkeyed_a, _ = await store.submit("command", {"argv": ["echo"]}, None)
    unkeyed_b, _ = await store.submit("command", {"argv": ["echo"]}, None)
    assert created and not created_again
    assert again == first and again.payload == {"argv": ["echo", "1"]}  # stored row unchanged
    assert len({first.id, other.id, unkeyed_a.id, unkeyed_b.id}) == 4
    assert first.status == "pending" and first.retry_count == 0 and first.tenant == "local"


async def test_payload_round_trips_exactly(store: Any) -> None:
    payload = {"argv": ["echo", "é\u2028😀"], "empty": [], "obj": {}, "n": 1.5}
    row, _ = await store.submit("command", payload, None)
    assert (await store.get(row.id)).payload == payload
    assert await store.get("00000000-0000-4000-8000-000000000000") is None


async def test_list_newest_first_and_by_status(store: Any) -> None:
    ids = [(await store.submit("command", {"i": i}, None))[0].id for i in range(3)]
    await store.register_agent("w", "w")
    claimed = await store.claim("w", 1, LEASE, 3, 90)
    assert [r.id for r in await store.list_tasks(None, 10)] == ids[::-1]
    assert [r.id for r in await store.list_tasks("pending", 10)] == ids[:0:-1]
    assert [r.id for r in await store.list_tasks("running", 10)] == [claimed[0].id]
    assert len(await store.list_tasks(None, 2)) == 2


async def test_claim_oldest_first_with_leases(store: Any) -> None:
    ids = [(await store.submit("command", {"i": i}, None))[0].id for i in range(5)]
    await store.register_agent("w1", "w1")
    before = time.time()
    first = await store.claim("w1", 2, LEASE, 3, 90)
    second = await store.claim("w1", 64, LEASE, 3, 90)
    assert [r.id for r in first] == ids[:2] and [r.id for r in second] == ids[2:]
    for row in first + second:
        assert row.status == "running" and row.agent_id == "w1"
        assert row.attempt_id and len(row.attempt_id) == 36
        assert before + LEASE - 1 <= row.lease_expires_at <= time.time() + LEASE + 1
    assert len({r.attempt_id for r in first + second}) == 5
    assert await store.claim("w1", 4, LEASE, 3, 90) == []


async def test_unknown_or_stale_agent_cannot_claim(store: Any) -> None:
    await store.submit("command", {}, None)
    with pytest.raises(AgentOffline):
        await store.claim("ghost", 1, LEASE, 3, 90)
    await store.register_agent("w", "w")
    with pytest.raises(AgentOffline):
        await store.claim("w", 1, LEASE, 3, -1)  # last seen is older than a negative window
    assert await store.heartbeat_agent("w") and not await store.heartbeat_agent("ghost")
    assert len(await store.claim("w", 1, LEASE, 3, 90)) == 1


async def test_no_double_claim_under_concurrency(store: Any) -> None:
    total = 60
    for i in range(total):
        await store.submit("command", {"i": i}, None)
    for n in range(6):
        await store.register_agent(f"w{n}", "w")
    got: list[list[str]] = [[] for _ in range(6)]

    async def claimer(n: int) -> None:  # concurrent claims (Redis: over several connections): each atomic
        while True:
            rows = await store.claim(f"w{n}", 3, LEASE, 3, 90)
            if not rows:
                return
            got[n].extend(r.id for r in rows)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(claimer, n)
    claimed = [i for ids in got for i in ids]
    assert len(claimed) == total and len(set(claimed)) == total


async def test_second_store_on_the_same_data_sees_claims(
    store: Any, backend: str, make_store: Any, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    # Two control planes over one database (one SQLite file / one Redis prefix) never hand out a task twice.
    if backend == "sqlite":
        from agentrt_managed_task._server import open_store

        path = str(tmp_path / "shared.db")
        a, b = await open_store(database=path), await open_store(database=path)
    else:
        from agentrt_managed_task._server import open_store

        prefix = f"shared:{time.time_ns()}:"
        redis_url = request.getfixturevalue("redis_url")
        a, b = (
            await open_store(redis_url=redis_url, prefix=prefix),
            await open_store(redis_url=redis_url, prefix=prefix),
        )
    try:
        row, _ = await a.submit("command", {}, "k")
        assert (await b.submit("command", {}, "k"))[0].id == row.id
        await a.register_agent("w", "w")
        assert [r.id for r in await b.claim("w", 5, LEASE, 3, 90)] == [row.id]
        assert await a.claim("w", 5, LEASE, 3, 90) == []
    finally:
        await a.aclose()
        await b.aclose()


async def test_lease_expiry_requeues_then_fails_after_the_retry_limit(store: Any) -> None:
    row, _ = await store.submit("command", {}, None)
    await store.register_agent("w", "w")
    attempts = []
    for expected_retries in range(3):
        claimed = await store.claim("w", 1, -1.0, 2, 90)  # a lease that is already over
        assert [r.id for r in claimed] == [row.id]
        assert claimed[0].retry_count == expected_retries
        attempts.append(claimed[0].attempt_id)
    # The next reap finds the third attempt's lease expired with retry_count == max_retries (2).
    assert await store.reap(2) == 1
    final = await store.get(row.id)
    assert final.status == "failed" and final.error == LEASE_EXPIRED_MESSAGE and final.retry_count == 2
    assert len(set(attempts)) == 3
    with pytest.raises(StoreConflict):  # the dead attempt's late result is fenced off
        await store.complete(row.id, attempts[-1], "success", {"output": {}}, None)
    assert await store.claim("w", 1, LEASE, 2, 90) == []


async def test_zero_retries_fails_on_first_expiry(store: Any) -> None:
    row, _ = await store.submit("command", {}, None)
    await store.register_agent("w", "w")
    await store.claim("w", 1, -1.0, 0, 90)
    assert await store.reap(0) == 1
    assert (await store.get(row.id)).status == "failed"


async def test_renewal_keeps_the_lease(store: Any) -> None:
    row, _ = await store.submit("command", {}, None)
    await store.register_agent("w", "w")
    [claimed] = await store.claim("w", 1, 0.5, 3, 90)
    renewed = await store.renew(row.id, claimed.attempt_id, LEASE)
    assert renewed.lease_expires_at > time.time() + LEASE - 5
    assert await store.reap(3) == 0
    with pytest.raises(StoreConflict):
        await store.renew(row.id, "00000000-0000-4000-8000-000000000000", LEASE)
    with pytest.raises(StoreNotFound):
        await store.renew("00000000-0000-4000-8000-000000000000", claimed.attempt_id, LEASE)


async def test_results_fenced_duplicate_and_conflict(store: Any) -> None:
    row, _ = await store.submit("command", {}, None)
    await store.register_agent("w", "w")
    [claimed] = await store.claim("w", 1, LEASE, 3, 90)
    result = {"output": {"stdout": "hi", "exit_code": 0}, "logs": "hi", "duration_s": 0.5}
    with pytest.raises(StoreConflict) as stale:
        await store.complete(row.id, "00000000-0000-4000-8000-000000000000", "success", result, None)
    assert stale.value.reason == "stale_attempt"
    done, duplicate = await store.complete(row.id, claimed.attempt_id, "success", result, None)
    assert not duplicate and done.status == "success" and done.result == result and done.lease_expires_at is None
    again, duplicate = await store.complete(row.id, claimed.attempt_id, "success", dict(result), None)
    assert duplicate and again.result == result
    with pytest.raises(StoreConflict) as different:
        await store.complete(row.id, claimed.attempt_id, "success", {**result, "logs": "other"}, None)
    assert different.value.reason == "result_conflict"
    with pytest.raises(StoreNotFound):
        await store.complete("00000000-0000-4000-8000-000000000000", claimed.attempt_id, "success", result, None)


async def test_failed_result_keeps_the_error(store: Any) -> None:
    row, _ = await store.submit("command", {}, None)
    await store.register_agent("w", "w")
    [claimed] = await store.claim("w", 1, LEASE, 3, 90)
    done, _ = await store.complete(row.id, claimed.attempt_id, "failed", {"output": {"exit_code": 2}}, "tail")
    assert done.status == "failed" and done.error == "tail"
    assert [r.id for r in await store.list_tasks("failed", 5)] == [row.id]
    assert await store.list_tasks("running", 5) == []


async def test_redis_publishes_status_changes(make_store: Any, redis_url: str) -> None:
    import json

    import coredis

    store = await make_store("redis")
    row, _ = await store.submit("command", {}, None)
    # A subscriber of its own (a second client, as another process would be), trio-native too.
    async with coredis.Redis.from_url(redis_url) as client, client.pubsub(channels=[f"task:local:{row.id}"]) as pubsub:
        first = await pubsub.get_message(timeout=5)
        assert first["type"] == "subscribe"
        await store.register_agent("w", "w")
        [claimed] = await store.claim("w", 1, LEASE, 3, 90)
        await store.complete(row.id, claimed.attempt_id, "success", {"output": {}}, None)
        seen = []
        for _ in range(2):
            message = await pubsub.get_message(timeout=5)
            seen.append(json.loads(message["data"]))
    assert seen == [
        {"type": "task.status", "payload": {"task_id": row.id, "status": "running"}},
        {"type": "task.status", "payload": {"task_id": row.id, "status": "success"}},
    ]


async def test_purge_forgets_finished_tasks_past_retention_only(store: Any) -> None:
    keyed, _ = await store.submit("command", {"n": 1}, "key-1")
    plain, _ = await store.submit("command", {"n": 2}, None)
    running, _ = await store.submit("command", {"n": 3}, None)
    pending, _ = await store.submit("command", {"n": 4}, None)
    await store.register_agent("w", "w")
    claimed = {r.id: r for r in await store.claim("w", 3, LEASE, 3, 90)}
    await store.complete(keyed.id, claimed[keyed.id].attempt_id, "success", {"output": {}}, None)
    await store.complete(plain.id, claimed[plain.id].attempt_id, "failed", {"output": {}}, "tail")
    assert await store.purge(3600) == 0  # finished just now: kept
    assert await store.purge(-1.0) == 2  # a retention in the past: every finished task goes
    assert await store.get(keyed.id) is None and await store.get(plain.id) is None
    assert (await store.get(running.id)).status == "running" and (await store.get(pending.id)).status == "pending"
    assert sorted(r.id for r in await store.list_tasks(None, 10)) == sorted([running.id, pending.id])
    assert await store.list_tasks("success", 10) == [] and await store.list_tasks("failed", 10) == []
    # The key went with its task: the same key now makes a new task.
    again, created = await store.submit("command", {"n": 1}, "key-1")
    assert created and again.id != keyed.id


async def test_purge_is_bounded_per_call(store: Any) -> None:
    await store.register_agent("w", "w")
    for _ in range(5):
        await store.submit("command", {}, None)
    for task in await store.claim("w", 5, LEASE, 3, 90):
        await store.complete(task.id, task.attempt_id, "success", {"output": {}}, None)
    assert [await store.purge(-1.0, 2) for _ in range(4)] == [2, 2, 1, 0]
    assert await store.list_tasks(None, 10) == []
