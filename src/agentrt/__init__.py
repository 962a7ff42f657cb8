"""agentrt: a trio runtime that drives agent CLIs and builds them from plugins.

The public API is what this module re-exports (and :mod:`agentrt.testing`);
every underscore module is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import AgentrtError as AgentrtError
from .hookspecs import hookimpl as hookimpl

__all__ = [
    "AgentrtError",
    "hookimpl",
    "Plugins",
    "get_plugins",
    "LaunchSpec",
    "ProcessSpec",
    "Conversation",
    "open_conversation",
    "TurnStream",
    "tune_gc",
    "tune_malloc",
]

# The heavier names are imported on first use, so `import agentrt` (and with it
# every plugin's `__init__`) costs almost nothing at CLI start-up.
_LAZY = {
    "Plugins": "agentrt._plugins",
    "get_plugins": "agentrt._plugins",
    "LaunchSpec": "agentrt._launch",
    "ProcessSpec": "agentrt._process",
    "Conversation": "agentrt._conversation",
    "open_conversation": "agentrt._conversation",
    "TurnStream": "agentrt._conversation",
    "tune_gc": "agentrt._os.gc_tuning",
    "tune_malloc": "agentrt._os.malloc_tuning",
}

if TYPE_CHECKING:
    from ._conversation import Conversation as Conversation
    from ._conversation import TurnStream as TurnStream
    from ._conversation import open_conversation as open_conversation
    from ._launch import LaunchSpec as LaunchSpec
    from ._os.gc_tuning import tune_gc as tune_gc
    from ._os.malloc_tuning import tune_malloc as tune_malloc
    from ._plugins import Plugins as Plugins
    from ._plugins import get_plugins as get_plugins
    from ._process import ProcessSpec as ProcessSpec


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
