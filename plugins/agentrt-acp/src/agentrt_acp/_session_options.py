"""What the bridge offers an ACP client to choose per session: the model and the mode.

The host (``agentrt bridge``) fills :class:`SessionOptions` with what the
hosted CLI can take; an empty one offers nothing.  The model is offered both
as the stable protocol's session config option (``configOptions``, category
``model``, set with ``session/set_config_option``) and as the older ``models``
field (``session/set_model``); modes as ``modes`` (``session/set_mode``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Mode", "SessionOptions"]

#: A mode: ``(id, name, description)``.
Mode = tuple[str, str, str]


class SessionOptions:
    """The models and modes offered, and the ones in use."""

    def __init__(self) -> None:
        self.models: tuple[str, ...] = ()
        self.current_model: str | None = None
        self.modes: tuple[Mode, ...] = ()
        self.current_mode: str | None = None

    def has_model(self, model: Any) -> bool:
        return bool(self.models) and model in self.models

    def has_mode(self, mode: Any) -> bool:
        return any(m[0] == mode for m in self.modes)

    def config_options(self) -> list[dict[str, Any]]:
        """``configOptions``: the model as a select option (empty when no model is offered)."""
        if not self.models or self.current_model is None:
            return []
        return [
            {
                "id": "model", "name": "Model", "category": "model", "type": "select",
                "currentValue": self.current_model, "options": [{"value": m, "name": m} for m in self.models],
            }
        ]  # fmt: skip

    def fields(self) -> dict[str, Any]:
        """The fields a ``session/new`` or ``session/load`` result carries."""
        out: dict[str, Any] = {}
        options = self.config_options()
        if options:
            out["configOptions"] = options
            available = [{"modelId": m, "name": m} for m in self.models]
            out["models"] = {"availableModels": available, "currentModelId": self.current_model}
        if self.modes and self.current_mode is not None:
            available_modes = [{"id": i, "name": n, "description": d} for i, n, d in self.modes]
            out["modes"] = {"availableModes": available_modes, "currentModeId": self.current_mode}
        return out
