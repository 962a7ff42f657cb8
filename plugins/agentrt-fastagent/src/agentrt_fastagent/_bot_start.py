"""Before a bot's spawn: its launch resolved and checked, or the start recorded as failed.

A failed start is not a crash: the record goes to ``failed`` with the
contract's code (``LLM_PROFILE_REQUIRED``, ``LLM_PROFILE_INVALID``,
``SANDBOX_CONFIG_INVALID``, else ``FASTAGENT_START_FAILED``) and a restart
count of 0, so only a user's restart tries again.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import trio

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError
from agentrt.events import Diagnostic
from agentrt.lowlevel import ProcessSpec

from ._launch import InstancePaths, build_process_spec, instance_paths, prepare_instance, resolve_binary
from ._ledger import BotLedger
from ._supervisor_config import Resolver, SupervisorConfig

__all__ = ["prepare_start", "mark_failed"]

_START_CODES = {
    "llm_profile_required": ("LLM_PROFILE_REQUIRED", "The bot has no LLM profile."),
    "llm_profile_invalid": ("LLM_PROFILE_INVALID", "The bot's LLM profile is incomplete."),
    "sandbox_config_invalid": ("SANDBOX_CONFIG_INVALID", "The bot's sandbox configuration is invalid."),
}


async def prepare_start(
    ledger: BotLedger, bot_id: str, *, config: SupervisorConfig, resolve: Resolver, env: Mapping[str, str]
) -> tuple[ProcessSpec, InstancePaths] | None:
    """The bot's process spec and directories (created), its model recorded; ``None`` if it cannot start.

    ``None`` when the bot is gone, or when its profile, sandbox or binary is
    refused (then the record is ``failed`` with the contract's code).
    """
    rec = await ledger.store.get_bot(bot_id)
    if rec is None:
        return None
    try:
        profile, sandbox = resolve(rec)
        paths = instance_paths(config.instances_dir, bot_id)
        # resolve_binary stats candidate paths: keep it off the trio thread.
        binary = config.binary
        if binary is None:
            binary = await trio.to_thread.run_sync(resolve_binary, env)
        spec = build_process_spec(
            bot_id=bot_id, binary=binary, profile=profile, sandbox=sandbox, paths=paths,
            parent_env=env, term_grace=config.term_grace,
        )  # fmt: skip
        await trio.to_thread.run_sync(prepare_instance, paths, binary)
    except AgentrtError as exc:
        default = ("FASTAGENT_START_FAILED", "FastAgent runtime could not be started.")
        code, message = _START_CODES.get(exc.code, default)
        await mark_failed(ledger, bot_id, code, f"{message} ({exc.detail})", diagnostic=exc.code)
        return None
    assert profile is not None  # build_process_spec refuses a missing profile (llm_profile_required)
    model = profile.model
    # The model this start runs with, as the record's snapshot (the profile may change later).
    await ledger.update(bot_id, lambda r: r if r.model == model else attrs.evolve(r, model=model))
    return spec, paths


async def mark_failed(
    ledger: BotLedger, bot_id: str, code: str, message: str, *, diagnostic: str | None = None
) -> None:
    """Record a failed start (``failed``, restart count 0, no process) and its diagnostic."""

    def failed(r: BotRecord) -> BotRecord:
        return attrs.evolve(
            r, status="failed", last_error_code=code, last_error_message=message, restart_count=0,
            backoff_until=None, pid=None, process_started_at=None,
        )  # fmt: skip

    await ledger.update(bot_id, failed)
    await ledger.emit(bot_id, [Diagnostic(code=diagnostic or code.lower(), detail=message)])
