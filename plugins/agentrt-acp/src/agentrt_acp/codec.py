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
        #: The host codec made last: the one of the newest agent process (a host that opens the
        #: session early or forwards requests, the bridge, reaches it through its conversation's dialect).
        self.current_host_codec: AcpHostCodec | None = None
        #: The model and mode every later session is set to once open (the bridge's client chose them).
        self.session_model: str | None = None
        self.session_mode: str | None = None

    def host_codec(self) -> AcpHostCodec:
        """A fresh host codec with this dialect's options (and :attr:`session_model`, :attr:`session_mode`)."""
        codec = AcpHostCodec(self.options, model=self.session_model, mode=self.session_mode)
        self.current_host_codec = codec
        return codec

    def agent_codec(self) -> AcpAgentCodec:
        """A fresh agent codec."""
        return AcpAgentCodec()
