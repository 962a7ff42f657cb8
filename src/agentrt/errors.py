"""The one exception type agentrt raises on purpose, and its stable codes.

Every failure a user can act on carries a machine-readable ``code`` (a stable
snake_case string, part of the public contract) and a ``detail`` meant for
people.  Details never contain secrets: callers pass names, never values.
"""

from __future__ import annotations

__all__ = ["AgentrtError"]


class AgentrtError(Exception):
    """An error with a stable machine-readable code.

    ``code`` is matched by programs (``cli_executable_not_found``,
    ``runtime_output_oversize``...); ``detail`` is for people and may change.
    """

    code: str
    detail: str

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail

    def __reduce__(self) -> tuple[type[AgentrtError], tuple[str, str]]:
        # Keep the two-argument constructor when pickled across processes.
        return (type(self), (self.code, self.detail))
