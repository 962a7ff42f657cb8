"""What a supervisor is given: its tunables, the resolver of a bot's profile, its placement."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import attrs

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError

from ._launch import LlmProfile, SandboxConfig

__all__ = ["SupervisorConfig", "Placement", "Resolver"]

Resolver = Callable[[BotRecord], tuple[LlmProfile | None, SandboxConfig]]
"""Turns a bot's record into its LLM profile and sandbox (may raise :class:`AgentrtError`)."""


@attrs.frozen(kw_only=True)
class SupervisorConfig:
    """Tunables of one supervisor (durations in seconds)."""

    instances_dir: Path
    backoff: tuple[float, ...] = (5.0, 15.0, 30.0)
    max_restarts: int = 4
    reconcile_interval: float = 2.0
    term_grace: float = 3.0
    exit_grace: float = 2.0
    orphan_term_wait: float = 3.0
    sync_skills: bool = True
    skills_bundle: Path | None = None
    binary: Path | None = None
    parent_env: Mapping[str, str] | None = None
    lock: bool = True

    def __attrs_post_init__(self) -> None:
        if not self.backoff or any(not math.isfinite(b) or b < 0 for b in self.backoff):
            raise AgentrtError("invalid_supervisor_config", "backoff must be non-negative durations")
        if self.max_restarts < 1:
            raise AgentrtError("invalid_supervisor_config", "max_restarts must be at least 1")
        if not (self.reconcile_interval > 0 and math.isfinite(self.reconcile_interval)):
            raise AgentrtError("invalid_supervisor_config", "reconcile_interval must be positive")


class Placement(Protocol):
    """Which bots this supervisor may run (several supervisors sharing one store)."""

    def may_run(self, bot_id: str) -> bool:
        """Whether this node may run the bot now."""
        ...
