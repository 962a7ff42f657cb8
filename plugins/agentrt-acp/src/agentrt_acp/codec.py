"""The ACP dialect: both codecs and the factory (see docs/acp.md)."""

from __future__ import annotations

from agentrt.dialect import Dialect

from ._agent import AcpAgentCodec
from ._host import PROTOCOL_VERSION, STOP_REASON_CODES, AcpHostCodec, rpc_error_code
from ._options import AcpOptions

__all__ = [
    "AcpDialect",
    "AcpHostCodec",
    "AcpAgentCodec",
    "AcpOptions",
    "PROTOCOL_VERSION",
    "STOP_REASON_CODES",
    "rpc_error_code",
]


class AcpDialect(Dialect):
    """The Agent Client Protocol (JSON-RPC 2.0, one message per line, over stdio).

    The session is opened in band: agentrt puts no ``--model``/``--resume`` in
    argv; the host codec's handshake carries them.
    """

    name = "acp"
    session_in_band = True

    def __init__(self, options: AcpOptions | None = None) -> None:
        self.options = options or AcpOptions()

    def host_codec(self) -> AcpHostCodec:
        """A fresh host codec with this dialect's options."""
        return AcpHostCodec(self.options)

    def agent_codec(self) -> AcpAgentCodec:
        """A fresh agent codec."""
        return AcpAgentCodec()
