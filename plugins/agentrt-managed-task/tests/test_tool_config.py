"""When the tool is offered, and the §B configuration errors."""

from __future__ import annotations

import pytest

from agentrt import AgentrtError, Plugins

GOOD_KEY = "k" * 16
ON = {
    "AWP_AGENT_MANAGED_TASKS_OPT_IN": "1",
    "AWP_CONTROL_PLANE_URL": "http://127.0.0.1:8100",
    "AWP_CONTROL_PLANE_API_KEY": GOOD_KEY,
}


def factory():  # the factory as the agent finds it: through the plugin's entry point
    plugins = Plugins(autoload=True, env={"AGENTRT_LOAD_PLUGINS": "managed-task"})
    return plugins.tools()["awp_run_managed_task"]


def code_of(env: dict[str, str]) -> str:
    with pytest.raises(AgentrtError) as info:
        factory()(env)
    return info.value.code


def test_offered_only_with_all_three() -> None:
    tool = factory()(ON)
    assert tool is not None and tool.name == "awp_run_managed_task"
    assert factory()({}) is None
    assert factory()({"AWP_AGENT_MANAGED_TASKS_OPT_IN": "0"}) is None


def test_schema_and_description_are_exactly_the_contract() -> None:
    tool = factory()(ON)
    assert tool.parameters == {
        "type": "object",
        "additionalProperties": False,
        "required": ["argv"],
        "properties": {
            "argv": {"type": "array", "minItems": 1, "maxItems": 32, "items": {"type": "string", "maxLength": 8192}},
            "timeout_seconds": {"type": "number", "minimum": 1, "maximum": 300, "default": 60},
        },
    }
    assert tool.description == (
        "Run one operator-allow-listed command on the configured trusted AWP worker and wait for its result. "
        "This is not sandboxed; use only for explicitly requested trusted execution."
    )


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"AWP_AGENT_MANAGED_TASKS_OPT_IN": "1"}, "managed_tasks_configuration_incomplete"),
        ({**ON, "AWP_CONTROL_PLANE_API_KEY": ""}, "managed_tasks_configuration_incomplete"),
        ({**ON, "AWP_CONTROL_PLANE_URL": ""}, "managed_tasks_configuration_incomplete"),
        ({**ON, "AWP_AGENT_MANAGED_TASKS_OPT_IN": ""}, "managed_tasks_require_explicit_opt_in"),
        ({**ON, "AWP_AGENT_MANAGED_TASKS_OPT_IN": "true"}, "managed_tasks_require_explicit_opt_in"),
        ({"AWP_CONTROL_PLANE_API_KEY": GOOD_KEY}, "managed_tasks_require_explicit_opt_in"),
    ],
)
def test_partial_configuration_is_a_startup_error(env: dict[str, str], code: str) -> None:
    assert code_of(env) == code


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("not a url", "invalid_control_plane_url"),
        ("http://127.0.0.1:8100/v1", "invalid_control_plane_url"),
        ("http://127.0.0.1:8100/?a=1", "invalid_control_plane_url"),
        ("http://127.0.0.1:8100/#x", "invalid_control_plane_url"),
        ("http://user:pw@127.0.0.1:8100", "invalid_control_plane_url"),
        ("http://127.0.0.1:99999", "invalid_control_plane_url"),
        ("ftp://127.0.0.1", "invalid_control_plane_protocol"),
        ("ws://[::1]:8100", "invalid_control_plane_protocol"),
        ("http://example.com", "remote_control_plane_requires_https"),
        ("https://example.com", "remote_control_plane_requires_explicit_opt_in"),
    ],
)
def test_url_rules(url: str, code: str) -> None:
    assert code_of({**ON, "AWP_CONTROL_PLANE_URL": url}) == code


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8100", "https://localhost:1/", "http://[::1]:8100", "http://127.9.9.9"]
)
def test_loopback_urls_accepted(url: str) -> None:
    assert factory()({**ON, "AWP_CONTROL_PLANE_URL": url}) is not None


def test_remote_https_with_opt_in() -> None:
    env = {**ON, "AWP_CONTROL_PLANE_URL": "https://cp.example.com", "AGENTRT_REMOTE_API_OPT_IN": "1"}
    assert factory()(env) is not None


@pytest.mark.parametrize("key", ["k" * 15, "k" * 4097, "k" * 10 + " " + "k" * 10, "k" * 16 + "\x7f", "é" * 7])
def test_key_rules_and_the_key_is_never_echoed(key: str) -> None:
    with pytest.raises(AgentrtError) as info:
        factory()({**ON, "AWP_CONTROL_PLANE_API_KEY": key})
    assert info.value.code == "invalid_control_plane_token"
    assert key not in str(info.value)


def test_key_is_trimmed_and_multibyte_counts_bytes() -> None:
    assert factory()({**ON, "AWP_CONTROL_PLANE_API_KEY": "  " + GOOD_KEY + "\n"}) is not None
    assert factory()({**ON, "AWP_CONTROL_PLANE_API_KEY": "é" * 8}) is not None  # 16 bytes


def test_ca_file_is_checked_at_startup(tmp_path) -> None:
    assert code_of({**ON, "AGENTRT_CONTROL_PLANE_CA_FILE": "relative.pem"}) == "invalid_control_plane_ca_file"
    missing = str(tmp_path / "missing.pem")
    assert code_of({**ON, "AGENTRT_CONTROL_PLANE_CA_FILE": missing}) == "invalid_control_plane_ca_file"
    import trustme

    ca_file = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(ca_file))
    tool = factory()({**ON, "AGENTRT_CONTROL_PLANE_CA_FILE": str(ca_file)})
    assert tool is not None


def test_poll_interval_setting() -> None:
    assert code_of({**ON, "AGENTRT_MANAGED_TASK_POLL_MS": "5"}) == "invalid_managed_task_poll_interval"
    assert code_of({**ON, "AGENTRT_MANAGED_TASK_POLL_MS": "1e3"}) == "invalid_managed_task_poll_interval"
    assert factory()({**ON, "AGENTRT_MANAGED_TASK_POLL_MS": "50"}) is not None
