"""The example-sink agentrt plugin: hook implementations only (the sink is imported on first use)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentrt import hookimpl

if TYPE_CHECKING:
    from agentrt.sinks import Sink, SinkRegister


def make_sink(options: Mapping[str, Any]) -> Sink:
    """The registered factory: writes to ``options["path"]``, else to EXAMPLE_JSONL_FILE of ``options["env"]``."""
    from ._sink import JsonlFileSink, path_from_options

    return JsonlFileSink(path_from_options(options))


@hookimpl
def agentrt_register_sinks(register: SinkRegister) -> None:
    """Register the ``jsonl-file`` sink (role ``other``: used when asked for, ``agentrt run --sink jsonl-file``)."""
    register("jsonl-file", make_sink)
