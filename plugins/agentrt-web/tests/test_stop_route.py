"""The Stop route (``POST /api/threads/NAME/cancel``): stops coalesce, and a stop keeps to its own turn.

A real ``agentrt web`` in-process, a real stream-json fixture agent that honours the interrupt control
request (so one stop ends the turn and the process stays), real HTTP over loopback.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import trio

from agentrt_stream_json import fixture_agent
from agentrt_web._server import WebOptions, serve_web

from .test_hostile_load import csrf_of

FIXTURE = Path(fixture_agent.__file__)
BURST = 40


def _env(tmp: Path) -> dict[str, str]:
    exe = tmp / "bin" / "fake-claude"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n")
    exe.chmod(stat.S_IRWXU)
    (tmp / "config.toml").write_text(
        f'[agents.stall]\nexecutable = "{exe}"\nprotocol = "stream-json"\nmodel = "claude-test"\n'
        'env = { STREAM_JSON_FIXTURE_MODE = "stall" }\n')
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "LANG": "C.UTF-8",
        "AGENTRT_CONFIG": str(tmp / "config.toml"), "AGENTRT_DATABASE_URL": f"sqlite://{tmp / 'agentrt.db'}",
        "AGENTRT_BOTS_CONFIG": str(tmp / "no-bots.toml"),
    }


async def _terminals(hub: Any, topic: str, out: list[dict[str, Any]], more: Any, task_status: Any) -> None:
    """Collect the thread's terminal messages (``done`` / ``failed``) as the pages get them."""
    sub = hub.subscribe(topic)
    task_status.started()
    async for frame in sub.receive:
        for line in frame.split(b"\n"):
            if line.startswith(b"data: "):
                for m in json.loads(line[6:])["m"]:
                    if m["k"] in ("done", "failed"):
                        out.append(m)
                        more.send_nowait(None)


async def test_a_burst_of_stops_ends_its_turn_once_and_never_a_later_one(tmp_path: Path) -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        opts = WebOptions(host="127.0.0.1", port=0, supervise_bots=False, agent="stall")
        urls: list[str] = []
        state = await nursery.start(lambda task_status: serve_web(
            opts, env=_env(tmp_path), stop=stop, on_ready=urls.extend, task_status=task_status))
        async with httpx.AsyncClient(base_url=urls[0], timeout=60) as c:
            csrf = {"x-csrf-token": csrf_of((await c.get("/", headers={"accept": "text/html"})).text)}
            name = (await c.post("/api/threads", headers=csrf)).json()["name"]
            ends: list[dict[str, Any]] = []
            more, arrived = trio.open_memory_channel[None](100)
            await nursery.start(_terminals, state.hub, f"thread:{name}", ends, more)
            api = f"/api/threads/{name}"

            with trio.fail_after(60):  # hang guard
                r = await c.post(f"{api}/messages", headers=csrf, json={"text": "first"})
                assert r.status_code == 202
                first = r.json()["turn"]
                live = state.chats.live(name)
                pid = live.conv.process.pid

                answers: dict[str, list[bool]] = {"early": [], "late": []}
                first_back = trio.Event()

                async def stop_first(when: str) -> None:
                    resp = await c.post(f"{api}/cancel", headers=csrf, json={"turn": first})
                    assert resp.status_code == 200
                    answers[when].append(resp.json()["cancelled"])
                    first_back.set()

                second = ""
                async with trio.open_nursery() as burst:
                    for _ in range(BURST):
                        burst.start_soon(stop_first, "early")
                    # The next prompt goes as soon as one stop is answered, while the rest may still run.
                    await first_back.wait()
                    r = await c.post(f"{api}/messages", headers=csrf, json={"text": "second"})
                    assert r.status_code == 202, r.text
                    second = r.json()["turn"]
                    # Stops of the first turn that arrive after the second started.
                    for _ in range(BURST):
                        burst.start_soon(stop_first, "late")

                assert second and second != first
                # Every stop of the first turn got its answer: it was stopped; the late ones stopped nothing.
                assert len(answers["early"]) == BURST and True in answers["early"]
                assert answers["late"] == [False] * BURST
                # One stop reached the agent: it ended the turn itself (the interrupt) and its process
                # stayed. Duplicates would have escalated to killing the process group.
                assert live.conv.process is not None and live.conv.process.pid == pid
                # The second turn still runs: nothing meant for the first one touched it.
                assert state.chats.live(name).busy
                assert [(m["k"], m.get("code")) for m in ends] == [("failed", "turn_cancelled")]

                # A stop with the second turn's key ends it (once, however many are sent).
                async with trio.open_nursery() as again:
                    for _ in range(5):
                        again.start_soon(lambda: c.post(f"{api}/cancel", headers=csrf, json={"turn": second}))
                while len(ends) < 2:
                    await arrived.receive()  # the terminal may go out after the stop's answer
                assert [(m["k"], m.get("code")) for m in ends] == [("failed", "turn_cancelled")] * 2
                assert live.conv.process.pid == pid

                # A stop without a key (a script's) stops whatever runs: nothing now. A bad key is refused.
                assert (await c.post(f"{api}/cancel", headers=csrf)).json() == {"cancelled": False}
                bad = await c.post(f"{api}/cancel", headers=csrf, json={"turn": 7})
                assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_request"
        stop.set()
        nursery.cancel_scope.cancel()  # the collector
