"""The exceptions agentrt raises on purpose, by family, and the registry of their stable codes.

Every failure a user can act on carries a machine-readable ``code`` (a stable
snake_case string, part of the public contract) and a ``detail`` meant for
people.  Details never contain secrets: callers pass names, never values.

Each registered code belongs to one family, a subclass of :class:`AgentrtError`:
``AgentrtError("cli_executable_not_found", ...)`` builds a :class:`LaunchError`,
so ``except LaunchError`` catches it and ``except AgentrtError`` still catches
everything.  An unregistered code builds a plain :class:`AgentrtError`.

:data:`CODES` maps every stable code (raised errors, turn failure codes and
diagnostic codes) to its :class:`CodeInfo`; docs/errors.md lists them all.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self, cast

__all__ = [
    "AgentrtError",
    "LaunchError",
    "ProtocolError",
    "TurnError",
    "ConfigError",
    "PluginError",
    "StoreError",
    "ProviderError",
    "ToolError",
    "FAMILIES",
    "CodeInfo",
    "CODES",
    "code_info",
    "family_of",
    "RUNTIME_FAILURE_CODES",
]


class AgentrtError(Exception):
    """An error with a stable machine-readable code.

    ``code`` is matched by programs (``cli_executable_not_found``,
    ``runtime_output_oversize``...); ``detail`` is for people and may change.
    Built with a registered code, it is an instance of that code's family.
    """

    #: What a user can do about an error of this family, when the code's entry says nothing.
    action: ClassVar[str] = "read the detail"

    code: str
    detail: str

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        target: type[AgentrtError] = cls
        if cls is AgentrtError:
            code = kwargs.get("code", args[0] if args else None)
            if isinstance(code, str):
                target = family_of(code)
        # A family is a subclass of AgentrtError, so this is still an instance of `cls`.
        return cast(Self, super().__new__(target, *args, **kwargs))

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail

    def __reduce__(self) -> tuple[type[AgentrtError], tuple[str, str]]:
        # Keep the two-argument constructor when pickled across processes.
        return (type(self), (self.code, self.detail))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.detail!r})"


class LaunchError(AgentrtError):
    """The agent could not be started: its launch settings, executable, preset or process."""

    action = "fix the agent's launch settings (`agentrt check` shows them)"


class ProtocolError(AgentrtError):
    """What the agent wrote, or was sent, does not fit its protocol."""

    action = "report it to the agent's maintainers, with the raw line from `agentrt logs`"


class TurnError(AgentrtError):
    """A turn could not be sent, or ended without the agent's result."""

    action = "send the turn again"


class ConfigError(AgentrtError):
    """A setting, option or argument is invalid or missing."""

    action = "fix the setting or option the detail names"


class PluginError(AgentrtError):
    """Plugins could not be loaded or do not fit together."""

    action = "fix, disable (AGENTRT_DISABLE_PLUGINS) or uninstall the plugin named"


class StoreError(AgentrtError):
    """A store or sink failed or refused: the SQLite database, Redis, threads, session files, sinks."""

    action = "check the store's path, permissions or server"


class ProviderError(AgentrtError):
    """A model provider (an HTTP API or a local model) failed or answered badly."""

    action = "check the provider's URL, token and model; retry"


class ToolError(AgentrtError):
    """A tool or the managed-task control plane failed or refused a call."""

    action = "read the detail; check the control plane and worker settings"


#: The families, in the order docs/errors.md lists them.
FAMILIES: tuple[type[AgentrtError], ...] = (
    LaunchError,
    ProtocolError,
    TurnError,
    ConfigError,
    PluginError,
    StoreError,
    ProviderError,
    ToolError,
)


class CodeInfo(NamedTuple):
    """One stable code: its family, what it means, and what to do about it (empty: the family's advice)."""

    code: str
    family: type[AgentrtError]
    meaning: str
    action: str

    @property
    def pattern(self) -> bool:
        """True for a code with a ``<hole>``, standing for a family of codes."""
        return "<" in self.code


@cache
def _registry() -> tuple[Mapping[str, CodeInfo], tuple[tuple[str, str, CodeInfo], ...]]:
    # Built on first use, so `import agentrt` does not pay for parsing the tables.
    from ._error_codes import TABLES

    by_name = {family.__name__: family for family in FAMILIES}
    found: dict[str, CodeInfo] = {}
    for family_name, table in TABLES:
        for line in table.strip().splitlines():
            code, meaning, *rest = (part.strip() for part in line.split(" | "))
            if code in found:
                raise RuntimeError(f"code {code!r} is registered twice")
            found[code] = CodeInfo(code, by_name[family_name], meaning, rest[0] if rest else "")
    # Codes with a hole, as (prefix, suffix, info): provider_http_<status> matches provider_http_503.
    patterns = tuple(
        (info.code.partition("<")[0], info.code.rpartition(">")[2], info) for info in found.values() if info.pattern
    )
    return MappingProxyType(found), patterns


if TYPE_CHECKING:
    #: Every stable code, with its family and one-line meaning (docs/errors.md lists the same).
    CODES: Mapping[str, CodeInfo]


def __getattr__(name: str) -> Any:
    if name == "CODES":
        return _registry()[0]
    raise AttributeError(f"module 'agentrt.errors' has no attribute {name!r}")


#: Codes of ``turn_failed`` events caused by the runtime or the process, not reported by the
#: agent (``agentrt run`` exits 3 for these, 1 for the agent's own failures).
RUNTIME_FAILURE_CODES: frozenset[str] = frozenset(
    {
        "exit_before_result",
        "runtime_output_oversize",
        "spawn_failed",
        "stdin_unavailable",
        "session_exited",
        # The executable was swapped between validation and a (re)spawn.
        "cli_executable_not_found",
        "cli_executable_is_symlink",
        "cli_executable_not_regular_file",
        "cli_executable_not_executable",
        # No result within the caller's bound (agentrt run --timeout).
        "turn_timeout",
        # The agent's output does not fit the configured dialect (first-output bound).
        "protocol_mismatch",
    }
)


def code_info(code: str) -> CodeInfo | None:
    """The registry's entry for ``code`` (matching ``provider_http_503`` to ``provider_http_<status>``)."""
    codes, patterns = _registry()
    info = codes.get(code)
    if info is not None:
        return info
    for prefix, suffix, pattern in patterns:
        if code.startswith(prefix) and code.endswith(suffix) and len(code) > len(prefix) + len(suffix):
            return pattern
    return None


def family_of(code: str) -> type[AgentrtError]:
    """The exception class an error with ``code`` is built as (:class:`AgentrtError` if unregistered)."""
    info = code_info(code)
    return AgentrtError if info is None else info.family
