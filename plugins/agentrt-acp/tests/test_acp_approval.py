"""ACP ``session/request_permission`` goes through the same approval rules as stream-json's ``can_use_tool``.

The TypeScript SDK's example agent (a real ACP peer from ``.peers/``) asks
permission for an ``edit`` tool call titled "Modifying critical configuration file".
"""

from __future__ import annotations

from agentrt import open_conversation
from agentrt.approval import ApprovalDecision, ApprovalPolicy, ApprovalPrompt, Ruleset
from agentrt_acp.codec import AcpDialect

from .test_acp_process import _parent_env, _text, _ts_launch, _turn


async def _converse(policy: ApprovalPolicy) -> str:
    async with open_conversation(
        _ts_launch(), dialect=AcpDialect(), permission_policy=policy, parent_env=_parent_env()
    ) as conv:
        events, _ = await _turn(conv, "hello")
    return _text(events)


async def test_a_rule_naming_the_acp_kind_allows_and_is_recorded() -> None:
    records: list[ApprovalDecision] = []

    async def record(decision: ApprovalDecision) -> None:
        records.append(decision)

    policy = ApprovalPolicy(Ruleset.build(default_mode="deny", cli_allow=["edit"]), recorder=record)
    assert "successfully updated the configuration" in await _converse(policy)
    [decision] = records
    assert (decision.tool, decision.decision, decision.by) == (
        "Modifying critical configuration file", "allow", "rule:--allow-tool edit")


async def test_ask_reaches_the_asker_and_its_denial_rejects() -> None:
    prompts: list[ApprovalPrompt] = []

    async def asker(prompt: ApprovalPrompt) -> str:
        prompts.append(prompt)
        return "deny"

    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), asker=asker)  # type: ignore[arg-type]
    assert "I'll skip the configuration update" in await _converse(policy)
    assert [p.tool_name for p in prompts] == ["Modifying critical configuration file"]
