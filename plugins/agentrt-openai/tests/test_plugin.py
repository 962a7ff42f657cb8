"""The plugin's registration and its thin import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentrt import Plugins
from agentrt.errors import AgentrtError


def test_registered_through_the_entry_point() -> None:
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "openai"})
    factory = plugins.providers()["openai"]
    provider = factory({"AGENTRT_API_BASE_URL": "http://127.0.0.1:9/v1/", "AGENTRT_TIMEOUT_MS": "5000"})
    config = provider.config  # type: ignore[attr-defined]
    assert config.endpoint == "http://127.0.0.1:9/v1/chat/completions"
    assert config.timeout_s == 5.0


def test_factory_applies_the_rules() -> None:
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "openai"})
    with pytest.raises(AgentrtError) as info:
        plugins.providers()["openai"]({"AGENTRT_API_BASE_URL": "http://example.com/v1"})
    assert info.value.code == "remote_api_requires_https"


def test_import_is_thin() -> None:
    code = "import sys, agentrt_openai; print(sorted(m for m in ('httpx', 'stamina', 'orjson') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]"
