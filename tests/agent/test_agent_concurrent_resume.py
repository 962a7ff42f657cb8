"""Two ``agentrt agent --resume S`` processes at once against one loopback model server: both turns are kept."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import trio
from reference_agent_helpers import agent_env, run_agent, text_round, user_line

from agentrt.agent import SessionState, prepare_state_dir, save_session
from agentrt.testing import ReplayRequest, ReplayResponse, serve_replay


async def test_two_concurrent_resumes_of_one_session_keep_both_turns(tmp: Path) -> None:
    env = agent_env(tmp)
    state = prepare_state_dir(env["AGENTRT_STATE_DIR"])
    earlier = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "EARLIER"}]
    save_session(state, SessionState(session_id="shared", messages=earlier))

    # The model answers neither request until both have arrived: by then each
    # process has loaded the same history and neither has saved its turn, the
    # interleaving that used to lose one of them.
    arrived: list[ReplayRequest] = []
    both = trio.Event()

    async def model(request: ReplayRequest) -> ReplayResponse:
        arrived.append(request)
        if len(arrived) == 2:
            both.set()
        with trio.fail_after(30):
            await both.wait()
        prompt = orjson.loads(request.body)["messages"][-1]["content"]
        return ReplayResponse.sse(text_round(f"reply to {prompt}"))

    async with serve_replay(model) as server:
        env = agent_env(tmp, server.url)
        results: dict[str, list[dict[str, object]]] = {}

        async def one(prompt: str) -> None:
            async with run_agent(env, "--resume", "shared") as child:
                await child.send(user_line(prompt))
                results[prompt] = await child.until_result(limit=30)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(one, "from A")
            nursery.start_soon(one, "from B")

    for prompt in ("from A", "from B"):
        final = results[prompt][-1]
        assert final["subtype"] == "success" and final["result"] == f"reply to {prompt}", final
        # Each model request carried the history as loaded at start, and its own prompt.
        sent = [orjson.loads(r.body)["messages"] for r in arrived]
        assert any(m[:2] == earlier and m[-1]["content"] == prompt for m in sent)
    stored = json.loads((Path(state) / "shared.json").read_text())["messages"]
    assert stored[:2] == earlier and len(stored) == 6
    turns = [stored[2:4], stored[4:6]]
    assert sorted(t[0]["content"] for t in turns) == ["from A", "from B"]
    for user, assistant in turns:
        assert assistant == {"role": "assistant", "content": f"reply to {user['content']}"}
