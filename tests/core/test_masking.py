"""One secret masking for every display (``agentrt.masking``): each shape it must hide, and what it keeps."""

from __future__ import annotations

import pytest

from agentrt import masking
from agentrt.approval import mask_secrets
from agentrt.config import mask_env
from agentrt.masking import MASK, looks_secret, mask_args, mask_text

KEYS = [
    "sk-ant-api03-ABCDEFGHIJKLMNOP",
    "sk-proj-abcdefghijklmnop",
    "pk-live-abcdefgh12345",
    "rk_live_abcdefgh12345",
    "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    "gho_abcdefghijklmnop",
    "github_pat_11ABCDEFG0123456789_abcdefghijkl",
    "glpat-abcdefghijklmnopqrst",
    "xoxb-1234567890-abcdefghij",
    "xoxp-1234567890-abcdefghij",
    "AKIAIOSFODNN7EXAMPLE",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012",
    "hf_abcdefghijklmnopqrstuvwxyz",
    "npm_abcdefghijklmnopqrstuvwxyz",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
]


@pytest.mark.parametrize("key", KEYS)
def test_key_shapes_are_masked_anywhere(key: str) -> None:
    for text in (key, f"failed with {key}.", f"'{key}'", f"KEY:{key}"):
        shown = mask_text(text)
        assert key not in shown and MASK in shown, text
    assert looks_secret(key)
    assert mask_env({"NEUTRAL": key}) == {"NEUTRAL": MASK}


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl", "Authorization: Bearer ****"),
        ("bearer 0123456789abcdef==", "0123456789abcdef", "bearer ****"),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy", "Basic ****"),
        ("git clone https://user:hunter2@example.com/r.git", "hunter2", "https://****@example.com/r.git"),
        ("redis://:s3cretpass@127.0.0.1:6379/0", "s3cretpass", "redis://****@127.0.0.1:6379/0"),
        ("https://x-access-token:tok123456@github.com", "tok123456", "https://****@github.com"),
        ("api_key=abc123 next", "abc123", "api_key=**** next"),
        ('{"password": "pa55word"}', "pa55word", '{"password": "****"}'),
        ("X-Auth-Token: 0f0f0f0f", "0f0f0f0f", "X-Auth-Token: ****"),
        ("Authorization: rawvalue42", "rawvalue42", "Authorization: ****"),
        ("OPENAI_API_KEY='quoted value'", "quoted value", "OPENAI_API_KEY='****'"),
        ("run --api-key=abc123 now", "abc123", "--api-key=****"),
    ],
)
def test_credentials_in_text_are_masked(text: str, secret: str, kept: str) -> None:
    shown = mask_text(text)
    assert secret not in shown
    assert kept in shown


def test_what_is_not_a_secret_stays() -> None:
    for text in (
        "KeyError: 'model'",
        "git status --short",
        "https://example.com/v1/models",
        "--max-tokens 4096 --author me",
        "Authorization: Bearer ****",
        "see the token limit",
    ):
        assert mask_text(text) == text
    assert mask_args(["--max-tokens", "4096", "--model", "m1", "-v"]) == ["--max-tokens", "4096", "--model", "m1", "-v"]


def test_secret_options_in_an_argument_list() -> None:
    args = [
        "--api-key", "plainvalue1",
        "--auth-token=plainvalue2",
        "--client-secret", "plainvalue3",
        "--db-password=plainvalue4",
        "--key", "--verbose",  # an option where the value would be: not a value
        "--header", "Authorization: Bearer plainvalue5",
        "--url", "https://u:plainvalue6@h/x",
        "--model", "m1",
        "sk-abcdefghijklmnop",
    ]  # fmt: skip
    shown = mask_args(args)
    assert shown == [
        "--api-key", MASK,
        "--auth-token=****",
        "--client-secret", MASK,
        "--db-password=****",
        "--key", "--verbose",
        "--header", "Authorization: Bearer ****",
        "--url", "https://****@h/x",
        "--model", "m1",
        MASK,
    ]  # fmt: skip
    assert not any(f"plainvalue{n}" in " ".join(shown) for n in range(1, 7))


def test_env_by_name_or_by_value() -> None:
    env = {
        "API_TOKEN": "tok-12345678",
        "DB_PASSWORD": "x",
        "SESSION_ID": "abc",
        "HEADER": "Bearer abcdefghijkl",
        "UPSTREAM": "https://user:hunter2@example.com/v1",
        "PLAIN": "visible",
    }
    assert mask_env(env) == {
        "API_TOKEN": MASK,
        "DB_PASSWORD": MASK,
        "SESSION_ID": MASK,
        "HEADER": "Bearer ****",
        "UPSTREAM": "https://****@example.com/v1",
        "PLAIN": "visible",
    }
    # An agent that echoes its own secret of no known shape: masked by value, given the env.
    assert mask_text("using x9y8z7w6 now", {"MY_SECRET": "x9y8z7w6"}) == "using **** now"


def test_one_function_behind_every_public_name() -> None:
    from agentrt import _exit_reason

    assert mask_secrets is masking.mask_secrets and mask_env is masking.mask_env
    assert _exit_reason.mask_text is masking.mask_text
    text = "--token=abcdefgh https://u:p4ssword@h Bearer abcdefghij sk-abcdefghijklmnop"
    assert mask_secrets(text) == mask_text(text) == "--token=**** https://****@h Bearer **** ****"
