"""The typed delta structs of the awp-jsonl wire, public for the dialects that share them.

The stream-json dialect wraps the same Anthropic content-block deltas in its
``stream_event`` lines, so it reuses these structs and :func:`typed_loader`
instead of defining its own.  Import them from here (``_typed`` is private).
"""

from __future__ import annotations

from ._typed import BlockDelta as BlockDelta
from ._typed import JsonDelta as JsonDelta
from ._typed import TextDeltaBody as TextDeltaBody
from ._typed import ThinkingDeltaBody as ThinkingDeltaBody
from ._typed import typed_loader as typed_loader

__all__ = ["BlockDelta", "JsonDelta", "TextDeltaBody", "ThinkingDeltaBody", "typed_loader"]
