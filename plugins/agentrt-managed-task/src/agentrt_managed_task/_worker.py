"""The trusted worker (§C): claims tasks, runs allow-listed commands, renews leases, delivers results.

Results survive a control-plane outage: each one is written to ``<work_dir>/outbox`` before it is
sent, retried with bounded backoff, and replayed (at start and periodically) until the control
plane has taken it or refused it for good.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import stamina
import trio

from agentrt import AgentrtError

from ._config import tls_verify
from ._task_command import failure, run_task
from ._worker_settings import DEFAULT_TRUSTED_PATH, KEY_VAR, OPT_IN_VAR, WorkerSettings, resolve_allowlist
from ._worker_settings import MAX_OUTPUT_CAP as MAX_OUTPUT_CAP

__all__ = ["WorkerSettings", "Worker", "resolve_allowlist", "OPT_IN_VAR", "DEFAULT_TRUSTED_PATH"]

log = logging.getLogger("agentrt.worker")

_TASK_ID = re.compile(r"^[0-9a-f-]{1,64}$")


class _Refused(Exception):
    """The control plane answered with a final 4xx (the request must not be retried)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Retryable(Exception):
    """A transport failure or a 5xx: worth trying again later."""


class Worker:
    """Polls the control plane and runs up to ``slots`` tasks at a time."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self._client: httpx.AsyncClient | None = None
        self._free = trio.Semaphore(settings.slots)
        self._lease_seconds = 60.0
        self._outbox = Path(settings.work_dir) / "outbox"
        self._runs = Path(settings.work_dir) / "tasks"
        self._replay_lock = trio.Lock()
        self.completed = 0  # results delivered (accepted or refused for good), for tests and stats

    # -- HTTP ------------------------------------------------------------------
    async def _call(self, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        assert self._client is not None
        try:
            with trio.fail_after(self.settings.request_timeout):
                response = await self._client.request(method, path, json=body, params=params)
        except (httpx.TransportError, trio.TooSlowError) as exc:
            raise _Retryable(type(exc).__name__) from exc
        if response.status_code >= 500:
            raise _Retryable(str(response.status_code))
        if not 200 <= response.status_code < 300:
            raise _Refused(response.status_code)
        try:
            return response.json()
        except ValueError as exc:
            raise _Retryable("invalid JSON") from exc

    async def _call_retrying(self, method: str, path: str, body: Any = None) -> Any:
        s = self.settings
        async for attempt in stamina.retry_context(
            on=_Retryable,
            attempts=s.retry_attempts,
            timeout=None,
            wait_initial=s.retry_initial,
            wait_max=s.retry_max,
            wait_jitter=s.retry_initial,
        ):
            with attempt:
                return await self._call(method, path, body)
        raise AssertionError("unreachable")  # stamina re-raises the last failure

    # -- lifecycle -------------------------------------------------------------
    async def run(
        self,
        *,
        shutdown: trio.Event | None = None,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Work until ``shutdown`` is set (or cancelled); running tasks are killed on the way out."""
        s = self.settings
        await trio.Path(self._outbox).mkdir(parents=True, exist_ok=True, mode=0o700)
        await trio.Path(self._runs).mkdir(parents=True, exist_ok=True, mode=0o700)
        async with httpx.AsyncClient(
            base_url=s.base_url,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(s.request_timeout),
            headers={"authorization": f"Bearer {s.api_key}", "user-agent": "agentrt-worker/0.1"},
            verify=tls_verify(s.ca_file),
        ) as client:
            self._client = client
            try:
                async with trio.open_nursery() as nursery:
                    if shutdown is not None:

                        async def stop_on_shutdown() -> None:
                            await shutdown.wait()
                            nursery.cancel_scope.cancel()

                        nursery.start_soon(stop_on_shutdown)
                    await self._replay()
                    await self._register()
                    nursery.start_soon(self._heartbeat_loop)
                    nursery.start_soon(self._replay_loop)
                    task_status.started()
                    await self._claim_loop(nursery)
            finally:
                self._client = None

    async def _register(self) -> None:
        while True:
            try:
                answer = await self._call_retrying(
                    "POST",
                    "/v1/agent/register",
                    {"agent_id": self.settings.agent_id, "name": self.settings.agent_id},
                )
            except _Retryable:
                await trio.sleep(self.settings.retry_max)
                continue
            except _Refused as exc:
                why = f" (check {KEY_VAR})" if exc.status in (401, 403) else ""
                raise AgentrtError(
                    "worker_registration_refused", f"the control plane answered HTTP {exc.status}{why}"
                ) from exc
            lease = answer.get("lease_seconds") if isinstance(answer, dict) else None
            if isinstance(lease, int | float) and lease > 0:
                self._lease_seconds = float(lease)
            return

    async def _heartbeat_loop(self) -> None:
        while True:
            await trio.sleep(15.0)
            try:
                await self._call("POST", "/v1/agent/heartbeat", {"agent_id": self.settings.agent_id})
            except _Refused:
                await self._register()
            except _Retryable:
                pass  # the next claim or heartbeat tries again

    async def _claim_loop(self, nursery: trio.Nursery) -> None:
        s = self.settings
        while True:
            await self._free.acquire()
            wanted = 1
            while self._free.value > 0:  # take every free slot in one claim
                await self._free.acquire()
                wanted += 1
            try:
                answer = await self._call(
                    "GET", "/v1/agent/tasks/pending", params={"slots": wanted, "agent_id": s.agent_id}
                )
                tasks = answer.get("tasks", []) if isinstance(answer, dict) else []
            except _Refused as exc:
                tasks = []
                if exc.status in (401, 403):
                    raise AgentrtError(
                        f"control_plane_http_{exc.status}",
                        f"the control plane refused the worker's key (check {KEY_VAR})",
                    ) from exc
                if exc.status == 409:
                    await self._register()
            except _Retryable:
                tasks = []
            tasks = [row for row in tasks if isinstance(row, dict)] if isinstance(tasks, list) else []
            for row in tasks[:wanted]:
                nursery.start_soon(self._execute, row)
            for _ in range(wanted - len(tasks[:wanted])):
                self._free.release()
            if not tasks:
                await trio.sleep(s.poll_interval)

    # -- one task --------------------------------------------------------------
    async def _execute(self, row: Mapping[str, Any]) -> None:
        try:
            task_id, attempt = row.get("id"), row.get("attempt_id")
            if not isinstance(task_id, str) or not isinstance(attempt, str) or not _TASK_ID.match(task_id):
                log.error("claimed task without a usable id/attempt: ignored")
                return
            lease_lost = False
            result: dict[str, Any] | None = None
            async with trio.open_nursery() as nursery:

                async def renew() -> None:
                    nonlocal lease_lost
                    while True:
                        await trio.sleep(self._lease_seconds / 3)
                        try:
                            await self._call("POST", f"/v1/agent/tasks/{task_id}/heartbeat", {"attempt_id": attempt})
                        except _Refused:
                            # Another attempt owns the task now: stop ours rather than run it twice.
                            lease_lost = True
                            nursery.cancel_scope.cancel()
                            return
                        except _Retryable:
                            pass

                nursery.start_soon(renew)
                try:
                    result = await run_task(self.settings, self._runs, row)
                except Exception as exc:  # a worker bug must not take the other slots down
                    log.exception("task %s: worker exception", task_id)
                    result = failure(f"worker exception: {type(exc).__name__}")
                nursery.cancel_scope.cancel()
            if lease_lost or result is None:
                log.warning("task %s: lease lost, result dropped", task_id)
                return
            result["attempt_id"] = attempt
            try:
                await self._deliver(task_id, attempt, result)
            except OSError as exc:  # the outbox could not be written (disk full...): the lease retries it
                log.error("task %s: result could not be queued: %s", task_id, type(exc).__name__)
        finally:
            self._free.release()

    # -- results -----------------------------------------------------------------
    async def _deliver(self, task_id: str, attempt: str, result: dict[str, Any]) -> None:
        path = self._outbox / f"{task_id}--{attempt}.json"
        # Shielded and bounded: a finished result is not dropped because the worker is stopping.
        with trio.CancelScope(shield=True), trio.move_on_after(self.settings.request_timeout + 5):
            try:
                await self._call("POST", f"/v1/agent/tasks/{task_id}/result", result)
            except _Retryable:
                # The control plane is unreachable: persist the result first (a worker restart
                # replays it).  A worker crash before this point is covered by the lease: the
                # task is retried elsewhere.
                await _write_atomic(path, json.dumps({"task_id": task_id, "body": result}, separators=(",", ":")))
            except _Refused as exc:
                log.warning("task %s: result refused (%s)", task_id, exc.status)
                self.completed += 1
                return
            else:
                self.completed += 1
                return
        if not await trio.Path(path).exists():
            return  # cut short before it was queued: the lease expiry retries the task
        try:
            await self._call_retrying("POST", f"/v1/agent/tasks/{task_id}/result", result)
        except _Retryable:
            return  # stays in the outbox; the replay loop sends it later
        except _Refused as exc:
            log.warning("task %s: result refused (%s)", task_id, exc.status)
        await trio.Path(path).unlink(missing_ok=True)
        self.completed += 1

    async def _replay_loop(self) -> None:
        while True:
            await trio.sleep(self.settings.replay_interval)
            await self._replay()

    async def _replay(self) -> None:
        """Send every queued result once; keep those the control plane could not take yet."""
        async with self._replay_lock:
            try:
                names = sorted(await trio.to_thread.run_sync(os.listdir, self._outbox))
            except OSError as exc:
                log.error("outbox unreadable: %s", type(exc).__name__)
                return
            for name in names:
                if not name.endswith(".json"):
                    continue
                path = self._outbox / name
                try:
                    record = json.loads(await trio.Path(path).read_text())
                    task_id, body = str(record["task_id"]), record["body"]
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                try:
                    await self._call("POST", f"/v1/agent/tasks/{task_id}/result", body)
                except _Retryable:
                    return  # still down: try again on the next round
                except _Refused as exc:
                    log.warning("task %s: queued result refused (%s)", task_id, exc.status)
                await trio.Path(path).unlink(missing_ok=True)
                self.completed += 1


async def _write_atomic(path: Path, text: str) -> None:
    def write() -> None:
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())  # the point of the outbox is surviving a crash
        os.replace(temp, path)

    await trio.to_thread.run_sync(write)
