"""§B's base-URL, token and timeout rules, with their stable codes; the endpoint derivation."""

from __future__ import annotations

import pytest

from agentrt.errors import AgentrtError
from agentrt_openai import OpenAIConfig, from_env
from agentrt_openai.config import DEFAULT_BASE_URL, endpoint_url


def code_of(env: dict[str, str]) -> str:
    with pytest.raises(AgentrtError) as info:
        from_env(env)
    return info.value.code


def test_defaults() -> None:
    config = from_env({})
    assert config.base_url == DEFAULT_BASE_URL
    assert config.endpoint == "http://127.0.0.1:11434/v1/chat/completions"
    assert config.token is None
    assert config.timeout_s == 120.0
    assert config.user_agent.startswith("agentrt/")


@pytest.mark.parametrize(
    ("base", "endpoint"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/chat/completions"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1/chat/completions"),
        ("http://localhost:8080/v1///", "http://localhost:8080/v1/chat/completions"),
        ("http://[::1]:8080/v1/chat/completions", "http://[::1]:8080/v1/chat/completions"),
        ("http://127.0.0.1:8080/v1/chat/completions/", "http://127.0.0.1:8080/v1/chat/completions"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/chat/completions"),
    ],
)
def test_endpoint(base: str, endpoint: str) -> None:
    assert endpoint_url(base) == endpoint
    assert from_env({"AGENTRT_API_BASE_URL": base}).endpoint == endpoint


@pytest.mark.parametrize(
    ("base", "code"),
    [
        ("not a url", "invalid_api_base_url"),
        ("http://", "invalid_api_base_url"),
        ("http://127.0.0.1:99999/v1", "invalid_api_base_url"),
        ("http://user:pw@127.0.0.1/v1", "api_base_url_must_not_contain_credentials_query_or_fragment"),
        ("http://127.0.0.1/v1?key=1", "api_base_url_must_not_contain_credentials_query_or_fragment"),
        ("http://127.0.0.1/v1#frag", "api_base_url_must_not_contain_credentials_query_or_fragment"),
        ("ftp://127.0.0.1/v1", "invalid_local_api_protocol"),
        ("ws://localhost/v1", "invalid_local_api_protocol"),
        ("http://api.example.com/v1", "remote_api_requires_https"),
        ("ftp://api.example.com/v1", "remote_api_requires_https"),
        ("https://api.example.com/v1", "remote_api_requires_explicit_opt_in"),
        ("https://10.0.0.1/v1", "remote_api_requires_explicit_opt_in"),
    ],
)
def test_base_url_rules(base: str, code: str) -> None:
    assert code_of({"AGENTRT_API_BASE_URL": base}) == code


def test_credentials_are_not_echoed() -> None:
    with pytest.raises(AgentrtError) as info:
        from_env({"AGENTRT_API_BASE_URL": "http://user:hunter2@127.0.0.1/v1"})
    assert "hunter2" not in str(info.value)


def test_remote_opt_in() -> None:
    config = from_env({"AGENTRT_API_BASE_URL": "https://api.example.com/v1", "AGENTRT_REMOTE_API_OPT_IN": "1"})
    assert config.endpoint == "https://api.example.com/v1/chat/completions"
    # Only exactly "1" opts in.
    env = {"AGENTRT_API_BASE_URL": "https://api.example.com/v1", "AGENTRT_REMOTE_API_OPT_IN": "true"}
    assert code_of(env) == "remote_api_requires_explicit_opt_in"
    # https on loopback is fine without opt-in.
    assert from_env({"AGENTRT_API_BASE_URL": "https://127.0.0.1:8443/v1"}).base_url.startswith("https://")


@pytest.mark.parametrize(
    "token",
    [" lead", "trail ", "in side", "tab\tx", "nul\0x", "del\x7fx", "x" * 4097, "é" * 2049],
)
def test_bad_tokens(token: str) -> None:
    with pytest.raises(AgentrtError) as info:
        from_env({"AGENTRT_API_TOKEN": token})
    assert info.value.code == "invalid_api_token"
    assert token not in str(info.value)


def test_good_tokens() -> None:
    assert from_env({"AGENTRT_API_TOKEN": "sk-abc.DEF_123"}).token == "sk-abc.DEF_123"
    assert from_env({"AGENTRT_API_TOKEN": "x" * 4096}).token == "x" * 4096
    assert from_env({"AGENTRT_API_TOKEN": ""}).token is None


def test_token_not_in_repr() -> None:
    config = OpenAIConfig(base_url=DEFAULT_BASE_URL, token="sk-very-secret")
    assert "sk-very-secret" not in repr(config)


@pytest.mark.parametrize("raw", ["999", "600001", "12a", "-5000", "1e4", "0001000000", "5 000", "５０００"])
def test_bad_timeouts(raw: str) -> None:
    assert code_of({"AGENTRT_TIMEOUT_MS": raw}) == "invalid_agentrt_timeout_ms"


def test_good_timeouts() -> None:
    assert from_env({"AGENTRT_TIMEOUT_MS": "1000"}).timeout_s == 1.0
    assert from_env({"AGENTRT_TIMEOUT_MS": "600000"}).timeout_s == 600.0
    # Trimmed as the reference agent trims it (JavaScript's trim()).
    assert from_env({"AGENTRT_TIMEOUT_MS": " 5000\n"}).timeout_s == 5.0
    assert from_env({"AGENTRT_TIMEOUT_MS": "\u00a0\ufeff"}).timeout_s == 120.0


def test_rule_order_base_url_before_token() -> None:
    env = {"AGENTRT_API_BASE_URL": "http://api.example.com", "AGENTRT_API_TOKEN": " bad"}
    assert code_of(env) == "remote_api_requires_https"


@pytest.mark.parametrize("field", [{"timeout_s": 0}, {"max_retries": -1}, {"retry_wait_max_s": -1.0}])
def test_config_bounds(field: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        OpenAIConfig(base_url=DEFAULT_BASE_URL, **field)  # type: ignore[arg-type]


def test_max_retries_zero_means_one_attempt() -> None:
    assert OpenAIConfig(base_url=DEFAULT_BASE_URL, max_retries=0).max_retries == 0
