"""The low-level layer: the parts a host loop is built from.

This module is for plugin and embedding authors who build their own host
loop instead of using :func:`agentrt.open_conversation`: a supervisor of
long-running bots, a model server the runtime starts, a bench that drives the
framing directly.  Most programs never need it; they use :mod:`agentrt`.

Every name here is public and stable (the private modules it re-exports from
are not: import from here).  The pieces:

* processes: :func:`open_process` spawns one child (no shell, its own process
  group, exactly the given environment) and always stops and reaps it;
  :class:`ProcessSpec` describes it, :class:`AgentProcess` is the running
  child, :class:`Pipes` its stdin and stdout as the engine uses them,
  :class:`ExitStatus` how it ended; :data:`READ_SIZE` the stdout read size;
* framing: :class:`JsonlReader` splits stdout bytes into parsed JSON lines,
  with :class:`Malformed` markers for lines that are not JSON and
  :class:`OutputOversize` (``runtime_output_oversize``) past
  :data:`MAX_LINE_BYTES` (or, with ``on_oversize="skip"``, an
  :class:`OversizeLine` marker in the long line's place); :func:`parse_line` and :func:`encode_line` are the
  one-line forms, :func:`parse_fragment` parses one value cut out of a line the same way;
* the host engine: :class:`HostedProcess` runs one agent process at a time
  for a host (spawn and respawn with ``--resume``, the read loop and its
  parking while idle, the first-output watch, raw taps, the bounded stop) for
  one :class:`ProcessOwner` (the host's policy, whose methods it calls) and
  hands each process's end over as a :class:`ProcessEnd` (an owner hook that
  raised ends its process with :data:`HOOK_FAILED`); a
  :class:`ProtocolProbe` per process tells a wrong dialect early; a sink that is a
  :class:`TapSource` gives a :class:`RawTap` per process (:class:`TapInfo`
  says which); :func:`pump_events` is the read loop it and every host use
  (stdout → framing → codec → event lists, with malformed/oversize handling
  and exit watching: reading ends :data:`EXIT_OUTPUT_GRACE` after the exit),
  returning a :class:`PumpResult`; a line that is not JSON becomes a
  :data:`MALFORMED_LINE` diagnostic; :class:`Fanout` delivers batches to sinks
  (one task and bounded buffer each, failures through a callback, detached
  after :data:`MAX_SINK_FAILURES` in a row); :class:`TurnRules` is the turn
  state machine (synchronous, no I/O), :class:`TurnProgress` one turn in it;
  :data:`CANCEL_GRACE` is how long an interrupted agent has to end its turn
  itself before its process is stopped; :data:`CLOSE_TIMEOUT` bounds leaving
  :func:`agentrt.open_conversation`, whatever the agent and the sinks do;
* owned commands: :func:`open_owned_process` spawns a command for a plugin that
  runs children itself (the managed-task worker): no shell, its own process
  group, exactly the given environment, and on Linux death with its owner
  (``PR_SET_PDEATHSIG``, :data:`DEATH_SIGNAL_SUPPORTED`), even when the owner is
  SIGKILLed; :class:`OwnedProcess` is what it returns; the spawn servers
  that start the children of a busy program end with the trio run that
  started them, unless :func:`keep_spawn_servers` keeps them across runs
  (:func:`stop_spawn_servers` stops them at once);
* trio helpers: :func:`collapse_single_group` unwraps a lone exception out of a
  nursery's exception group.

The plugin registry (:class:`agentrt.Plugins`, :func:`agentrt.get_plugins`)
and the launch description (:class:`agentrt.LaunchSpec`) live in the top-level
API, because ordinary embedders use them too.
"""

from __future__ import annotations

from ._engine import HOOK_FAILED as HOOK_FAILED
from ._engine import HostedProcess as HostedProcess
from ._engine import ProcessEnd as ProcessEnd
from ._engine import ProcessOwner as ProcessOwner
from ._exception_groups import collapse_single_group as collapse_single_group
from ._fanout import CLOSE_TIMEOUT as CLOSE_TIMEOUT
from ._fanout import MAX_SINK_FAILURES as MAX_SINK_FAILURES
from ._fanout import Fanout as Fanout
from ._framing import MAX_LINE_BYTES as MAX_LINE_BYTES
from ._framing import JsonlReader as JsonlReader
from ._framing import Malformed as Malformed
from ._framing import OutputOversize as OutputOversize
from ._framing import OversizeLine as OversizeLine
from ._framing import encode_line as encode_line
from ._framing import parse_fragment as parse_fragment
from ._framing import parse_line as parse_line
from ._line_parse import MALFORMED_LINE as MALFORMED_LINE
from ._live import pump_events as pump_events
from ._os.spawn import DEATH_SIGNAL_SUPPORTED as DEATH_SIGNAL_SUPPORTED
from ._os.spawn import OwnedProcess as OwnedProcess
from ._os.spawn import open_owned_process as open_owned_process
from ._os.spawn_client import keep_warm as keep_spawn_servers
from ._os.spawn_client import stop_servers as stop_spawn_servers
from ._process import READ_SIZE as READ_SIZE
from ._process import AgentProcess as AgentProcess
from ._process import ExitStatus as ExitStatus
from ._process import ProcessSpec as ProcessSpec
from ._process import open_process as open_process
from ._protocol_mismatch import ProtocolProbe as ProtocolProbe
from ._tap import RawTap as RawTap
from ._tap import TapInfo as TapInfo
from ._tap import TapSource as TapSource
from ._turn_end import CANCEL_GRACE as CANCEL_GRACE
from ._turns import TurnProgress as TurnProgress
from ._turns import TurnRules as TurnRules
from ._wire import EXIT_OUTPUT_GRACE as EXIT_OUTPUT_GRACE
from ._wire import Pipes as Pipes
from ._wire import PumpResult as PumpResult

__all__ = [
    "AgentProcess",
    "CANCEL_GRACE",
    "CLOSE_TIMEOUT",
    "DEATH_SIGNAL_SUPPORTED",
    "OwnedProcess",
    "open_owned_process",
    "keep_spawn_servers",
    "stop_spawn_servers",
    "ExitStatus",
    "EXIT_OUTPUT_GRACE",
    "Fanout",
    "HOOK_FAILED",
    "HostedProcess",
    "MALFORMED_LINE",
    "MAX_SINK_FAILURES",
    "Pipes",
    "PumpResult",
    "RawTap",
    "TapInfo",
    "TapSource",
    "TurnProgress",
    "TurnRules",
    "pump_events",
    "JsonlReader",
    "MAX_LINE_BYTES",
    "Malformed",
    "OutputOversize",
    "OversizeLine",
    "ProcessEnd",
    "ProcessOwner",
    "ProcessSpec",
    "ProtocolProbe",
    "READ_SIZE",
    "collapse_single_group",
    "encode_line",
    "open_process",
    "parse_line",
    "parse_fragment",
]
