"""The tool-approval rule engine: patterns, precedence, ask, always, timeout, records."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agentrt._approval import (
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalPrompt,
    Ruleset,
    input_summary,
    mask_secrets,
    parse_rule,
    tool_label,
)
from agentrt._config import Permissions
from agentrt.permissions import PermissionRequest


def _req(tool: str = "Bash", **tool_input: Any) -> PermissionRequest:
    return PermissionRequest(tool_name=tool, input=tool_input, request_id="r1")


@pytest.mark.parametrize(
    ("pattern", "tool", "tool_input", "expected"),
    [
        ("Bash(git status:*)", "Bash", {"command": "git status"}, True),
        ("Bash(git status:*)", "Bash", {"command": "git status --short"}, True),
        ("Bash(git status:*)", "Bash", {"command": "git statusx"}, False),
        ("Bash(git status:*)", "Bash", {"command": "git push"}, False),
        ("Bash(git status:*)", "Bash", {"command": "git status; rm -rf ~"}, False),
        ("Bash(git status:*)", "Bash", {"command": "git status && curl x | sh"}, False),
        ("Bash(git status:*)", "Bash", {"command": "git status $(id)"}, False),
        ("Bash(git status:*)", "Read", {"command": "git status"}, False),
        ("Bash(ls)", "Bash", {"command": "ls"}, True),
        ("Bash(ls)", "Bash", {"command": "ls -la"}, False),
        ("Read", "Read", {"file_path": "/etc/hosts"}, True),
        ("mcp__fs__*", "mcp__fs__read", {}, True),
        ("mcp__fs__*", "mcp__web__get", {}, False),
        ("Read(/home/u/project/:*)", "Read", {"file_path": "/etc/passwd"}, False),
        ("Bash(git:*)", "Bash", {}, False),
        ("awp_run_managed_task(git status:*)", "awp_run_managed_task", {"argv": ["git", "status", "-s"]}, True),
        ("awp_run_managed_task(git status:*)", "awp_run_managed_task", {"argv": ["git", "push"]}, False),
    ],
)
def test_allow_patterns(pattern: str, tool: str, tool_input: dict[str, Any], expected: bool) -> None:
    assert parse_rule(pattern).matches(tool, tool_input, allowing=True) is expected


def test_a_deny_rule_still_matches_a_compound_command() -> None:
    # Shell control characters keep an allow rule from matching, never a deny rule.
    assert parse_rule("Bash(rm:*)").matches("Bash", {"command": "rm -rf ~; ls"}, allowing=False)


@pytest.mark.parametrize("bad", ["", "Bash(", "a b", "x" * 200])
def test_bad_patterns_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a tool pattern"):
        parse_rule(bad)


def test_precedence_cli_deny_cli_allow_config_deny_config_allow_then_mode() -> None:
    config = Permissions(mode="allow", allow=("Bash", "Read"), deny=("Bash(rm:*)", "Write"))
    rules = Ruleset.build(default_mode="deny", cli_allow=["Write"], cli_deny=["Bash(sudo:*)"], config=config)
    assert rules.decide("Bash", {"command": "sudo ls"}).by == "rule:--deny-tool Bash(sudo:*)"
    # The command line beats the config file: --allow-tool Write wins over config deny Write.
    assert rules.decide("Write", {"file_path": "/x"}).by == "rule:--allow-tool Write"
    # Deny beats allow within the config.
    assert rules.decide("Bash", {"command": "rm -rf /"}).action == "deny"
    assert rules.decide("Bash", {"command": "ls"}).by == "rule:config allow Bash"
    verdict = rules.decide("WebFetch", {"url": "https://example.org"})
    assert (verdict.action, verdict.by) == ("allow", "mode:allow (config)")


def test_mode_comes_from_cli_then_config_then_default() -> None:
    config = Permissions(mode="allow")
    assert Ruleset.build(default_mode="ask").decide("X", {}).by == "mode:ask (default)"
    assert Ruleset.build(default_mode="ask", config=config).decide("X", {}).by == "mode:allow (config)"
    assert Ruleset.build(default_mode="ask", cli_mode="deny", config=config).decide("X", {}).by == (
        "mode:deny (--permission-mode)"
    )
    with pytest.raises(ValueError, match="permission mode"):
        Ruleset.build(default_mode="ask", cli_mode="maybe")


def test_secrets_are_masked_and_summaries_bounded() -> None:
    text = "curl -H 'Authorization: Bearer abcdefghijkl' https://u:hunter2@h/ --token=s3cr3t sk-ABCDEFGHIJKLMNOP"
    masked = mask_secrets(text)
    for secret in ("abcdefghijkl", "hunter2", "s3cr3t", "sk-ABCDEFGHIJKLMNOP"):
        assert secret not in masked
    assert input_summary({"command": "x" * 5000}) == "x" * 5000
    long = input_summary({"command": "x" * 9000})
    assert len(long) <= 8192 and long.endswith(f"… ({9000 - 8160} more characters)")
    assert input_summary({"query": "weather", "api_key": "k-123456789"}) == '{"query":"weather","api_key":"****"}'
    assert tool_label("Bash", {"command": "git status"}) == "Bash(git status)"
    assert tool_label("WebSearch", {"query": "q"}) == "WebSearch"


async def _collect(policy: ApprovalPolicy, *requests: PermissionRequest) -> list[bool]:
    return [(await policy(r)).allow for r in requests]


async def test_ask_once_deny_and_always_for_the_thread() -> None:
    answers = iter(["allow", "deny", "always"])
    prompts: list[ApprovalPrompt] = []
    records: list[ApprovalDecision] = []

    async def asker(prompt: ApprovalPrompt) -> Any:
        prompts.append(prompt)
        return next(answers)

    async def recorder(decision: ApprovalDecision) -> None:
        records.append(decision)

    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), asker=asker, recorder=recorder,
                            conversation_id="c1", thread="t")
    ls = _req(command="ls")
    assert await _collect(policy, ls, ls, ls, ls, _req(command="pwd")) == [True, False, True, True, False]
    # The "always" answer covers the same tool and argument only; pwd was asked again (and the iterator ran out).
    assert [p.label for p in prompts] == ["Bash(ls)"] * 3 + ["Bash(pwd)"]
    assert [(r.decision, r.by) for r in records] == [
        ("allow", "user"), ("deny", "user"), ("allow", "user:always"), ("allow", "always"), ("deny", "ask_failed"),
    ]
    assert {(r.conversation_id, r.thread, r.tool) for r in records} == {("c1", "t", "Bash")}


async def test_unanswered_ask_times_out_to_deny_with_a_note() -> None:
    notes: list[str] = []

    async def never(prompt: ApprovalPrompt) -> Any:
        await trio.sleep_forever()

    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), asker=never, ask_timeout=0.05, notify=notes.append)
    decision = await policy(_req(command="ls"))
    assert not decision.allow and "no answer within 0.05s" in decision.message
    assert notes == ["Bash(ls) denied: no answer within 0.05s"]


async def test_ask_without_an_asker_denies_saying_why() -> None:
    notes: list[str] = []
    records: list[ApprovalDecision] = []

    async def recorder(decision: ApprovalDecision) -> None:
        records.append(decision)

    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), recorder=recorder, notify=notes.append)
    decision = await policy(_req(command="ls"))
    assert not decision.allow and "no terminal to ask on" in decision.message
    assert records[0].by == "no_terminal" and notes


async def test_a_failing_recorder_never_changes_the_decision() -> None:
    async def broken(decision: ApprovalDecision) -> None:
        raise RuntimeError("disk full")

    notes: list[str] = []
    policy = ApprovalPolicy(Ruleset.build(default_mode="allow"), recorder=broken, notify=notes.append)
    assert (await policy(_req(command="ls"))).allow
    assert notes == ["could not record the decision on Bash: RuntimeError"]
