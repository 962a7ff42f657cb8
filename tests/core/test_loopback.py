"""One loopback rule (:func:`agentrt.net.is_loopback_host`), and every caller agreeing with it.

The table is the rule: ``loose`` is what a socket really reaches (any
loopback address), ``strict`` the launch contract's remote-URL rule (exactly
localhost, 127.0.0.1 and [::1], as the original host).  Each caller is then
checked against the column it must follow, on every row (the control plane's
bind address: the loose column, names excluded).  The web UI's
``Host`` check, which needs a running server, is in ``plugins/agentrt-web/tests/test_loopback_rule.py``.
"""

from __future__ import annotations

import pytest
import trio

from agentrt.errors import AgentrtError
from agentrt.net import STRICT_LOCAL_HOSTS, is_loopback_host

# (host as written in a URL, loose, strict)
TABLE: list[tuple[str, bool, bool]] = [
    ("localhost", True, True),
    ("LOCALHOST", True, True),
    ("127.0.0.1", True, True),
    ("[::1]", True, True),
    ("[0:0:0:0:0:0:0:1]", True, True),
    ("127.0.0.2", True, False),
    ("127.255.255.254", True, False),
    ("[::ffff:127.0.0.1]", True, False),
    ("0.0.0.0", False, False),
    ("[::]", False, False),
    ("localhost.evil", False, False),
    ("evil.localhost.example", False, False),
    ("10.0.0.1", False, False),
    ("[::2]", False, False),
    ("[fe80::1]", False, False),
    ("example.com", False, False),
    ("127.1", False, False),  # not an address Python parses: never loopback (the safe side)
]
IDS = [row[0] for row in TABLE]


@pytest.mark.parametrize(("host", "loose", "strict"), TABLE, ids=IDS)
def test_the_rule_in_both_modes_with_and_without_brackets(host: str, loose: bool, strict: bool) -> None:
    bare = host[1:-1] if host.startswith("[") else host
    assert is_loopback_host(host) is loose
    assert is_loopback_host(bare) is loose
    assert is_loopback_host(host, strict=True) is strict
    assert is_loopback_host(bare, strict=True) is strict
    # numeric=True: the same answers for addresses, never for a name.
    named = bare.lower() == "localhost"
    assert is_loopback_host(host, numeric=True) is (loose and not named)
    assert is_loopback_host(bare, strict=True, numeric=True) is (strict and not named)


def test_strict_hosts_and_the_empty_host() -> None:
    assert all(is_loopback_host(h, strict=True) for h in STRICT_LOCAL_HOSTS)
    assert not is_loopback_host("") and not is_loopback_host("", strict=True)
    assert not is_loopback_host("[]") and not is_loopback_host("[::1", strict=True)


@pytest.mark.parametrize(("host", "loose", "strict"), TABLE, ids=IDS)
def test_launch_remote_url_rule_is_the_strict_mode(host: str, loose: bool, strict: bool) -> None:
    from agentrt._launch import contains_remote_url

    assert contains_remote_url(f"--api=http://{host}:8080/v1") is (not strict)
    assert contains_remote_url(f"HTTPS://{host}/x") is (not strict)


@pytest.mark.parametrize(("host", "loose", "strict"), TABLE, ids=IDS)
def test_control_plane_url_rule_is_the_loose_mode(host: str, loose: bool, strict: bool) -> None:
    from agentrt_managed_task.api import validate_control_plane_url

    if loose:
        assert validate_control_plane_url(f"http://{host}:8100", remote_opt_in=False).startswith("http://")
    else:
        with pytest.raises(AgentrtError) as info:
            validate_control_plane_url(f"http://{host}:8100", remote_opt_in=True)
        assert info.value.code == "remote_control_plane_requires_https"


@pytest.mark.parametrize(("host", "loose", "strict"), TABLE, ids=IDS)
def test_provider_base_url_rule_is_the_loose_mode(host: str, loose: bool, strict: bool) -> None:
    from agentrt_openai.config import validate_base_url

    url = f"http://{host}:11434/v1"
    if loose:
        assert validate_base_url(url) == url
    else:
        with pytest.raises(AgentrtError) as info:
            validate_base_url(url, remote_opt_in=True)
        assert info.value.code == "remote_api_requires_https"


@pytest.mark.parametrize(("host", "loose", "strict"), TABLE, ids=IDS)
def test_control_plane_bind_rule_is_the_loose_mode_for_addresses(host: str, loose: bool, strict: bool) -> None:
    import ipaddress

    from agentrt_managed_task.api import check_bind_host

    bare = host[1:-1] if host.startswith("[") else host
    if loose and bare.lower() != "localhost":
        # Accepted, and normalised to the address a socket binds (every spelling of ::1 is ::1).
        assert check_bind_host(host) == check_bind_host(bare) == str(ipaddress.ip_address(bare))
    else:
        for spelling in (host, bare):
            with pytest.raises(AgentrtError) as info:
                check_bind_host(spelling)
            assert info.value.code == "control_plane_bind_not_loopback"


REMOTE = [row[0] for row in TABLE if not row[1]]


@pytest.mark.parametrize("host", REMOTE, ids=REMOTE)
def test_web_bind_rule_is_the_loose_mode(host: str) -> None:
    """A non-loopback bind address without a token is refused before anything binds."""
    from agentrt_web.api import WebOptions, serve_web

    bare = host[1:-1] if host.startswith("[") else host

    async def main() -> None:
        with trio.fail_after(30):
            await serve_web(WebOptions(host=bare, port=0), env={"PATH": "/usr/bin:/bin"})

    with pytest.raises(AgentrtError) as info:
        trio.run(main)
    assert info.value.code == "web_token_required"
