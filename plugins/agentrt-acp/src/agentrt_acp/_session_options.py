"""What the bridge offers an ACP client to choose per session: the model and the mode.

The host (``agentrt bridge``) fills :class:`SessionOptions` with what the
hosted CLI can take; an empty one offers nothing.  The model is offered both
as the stable protocol's session config option (``configOptions``, category
``model``, set with ``session/set_config_option``) and as the older ``models``
field (``session/set_model``); modes as ``modes`` (``session/set_mode``).

A bridge hosting an ACP agent offers what that agent offers instead
(:meth:`SessionOptions.use_hosted`): its ``models`` and its ``configOptions``
of category ``model`` and ``thought_level`` as the agent sent them, and of its
``modes`` only those that keep agentrt's approval in charge
(:data:`SAFE_MODES`: Gemini CLI's ``yolo`` and ``autoEdit``, claude-agent-acp's
``acceptEdits`` and ``dontAsk`` would let the agent act without asking).
The client's switches then go to the agent, which answers them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._setup import option_values, switched

__all__ = ["Mode", "SAFE_MODES", "SessionOptions"]

#: A mode: ``(id, name, description)``.
Mode = tuple[str, str, str]

#: Hosted agents' modes offered to the client: those in which every tool still asks agentrt's policy.
SAFE_MODES = ("default", "plan")
#: Hosted agents' config option categories offered to the client (none of them changes what a tool may do).
_SAFE_CATEGORIES = ("model", "thought_level")


def _safe(offer: Mapping[str, Any]) -> dict[str, Any]:
    """What of a hosted agent's offer the client sees (see the module docstring)."""
    out: dict[str, Any] = {}
    models = offer.get("models")
    if isinstance(models, dict) and isinstance(models.get("availableModels"), list):
        out["models"] = models
    options = [
        o for o in offer.get("configOptions") or () if isinstance(o, dict) and o.get("category") in _SAFE_CATEGORIES
    ]
    if options:
        out["configOptions"] = options
    modes = offer.get("modes")
    if isinstance(modes, dict) and modes.get("currentModeId") in SAFE_MODES:
        available = [m for m in modes.get("availableModes") or () if isinstance(m, dict) and m.get("id") in SAFE_MODES]
        out["modes"] = {**modes, "availableModes": available}
    return out


class SessionOptions:
    """The models and modes offered, and the ones in use."""

    def __init__(self) -> None:
        self.models: tuple[str, ...] = ()
        self.current_model: str | None = None
        self.modes: tuple[Mode, ...] = ()
        self.current_mode: str | None = None
        #: A hosted agent's offer, as the client sees it (``None``: the host's own models and modes above).
        self.hosted: dict[str, Any] | None = None

    def use_hosted(self, offer: Mapping[str, Any]) -> None:
        """Offer what a hosted ACP agent offers (its answer to ``session/new`` or ``session/load``)."""
        self.hosted = _safe(offer)

    def switched(self, method: str, params: Mapping[str, Any], result: Any) -> None:
        """The hosted agent accepted ``method`` with ``params``: the current model, mode or options moved."""
        if self.hosted is not None:
            self.hosted = _safe(switched(self.hosted, method, params, result))

    def offers(self, method: str) -> bool:
        """True when ``method`` (``session/set_mode``, ``session/set_model``, ``session/set_config_option``)
        has anything to switch."""
        key = {"session/set_mode": "modes", "session/set_model": "models"}.get(method, "configOptions")
        if self.hosted is not None:
            return key in self.hosted
        return bool(self.modes) if key == "modes" else bool(self.models)

    def has_model(self, model: Any) -> bool:
        if self.hosted is not None:
            available = self.hosted.get("models", {}).get("availableModels") or ()
            return any(isinstance(m, dict) and m.get("modelId") == model for m in available)
        return bool(self.models) and model in self.models

    def has_mode(self, mode: Any) -> bool:
        if self.hosted is not None:
            available = self.hosted.get("modes", {}).get("availableModes") or ()
            return any(m.get("id") == mode for m in available)
        return any(m[0] == mode for m in self.modes)

    def has_option(self, config_id: Any, value: Any) -> bool:
        """True when ``value`` is one the config option ``config_id`` offers."""
        if self.hosted is None:
            return config_id == "model" and self.has_model(value)
        for option in self.hosted.get("configOptions") or ():
            if option.get("id") == config_id:
                return value in option_values(option)
        return False

    def config_options(self) -> list[dict[str, Any]]:
        """``configOptions``: the model as a select option (empty when no model is offered)."""
        if self.hosted is not None:
            return list(self.hosted.get("configOptions") or ())
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
        if self.hosted is not None:
            return dict(self.hosted)
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
