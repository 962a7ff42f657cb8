from pathlib import Path

import pytest

from agentrt.errors import AgentrtError
from agentrt_sqlite._location import database_path


def test_url_wins(tmp_path: Path) -> None:
    env = {"AGENTRT_DATABASE_URL": f"sqlite://{tmp_path}/x.db", "XDG_DATA_HOME": "/elsewhere"}
    assert database_path(env) == tmp_path / "x.db"


def test_xdg_data_home(tmp_path: Path) -> None:
    assert database_path({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "agentrt" / "agentrt.db"


def test_home_fallback_and_relative_xdg_ignored(tmp_path: Path) -> None:
    want = tmp_path / ".local" / "share" / "agentrt" / "agentrt.db"
    assert database_path({"HOME": str(tmp_path)}) == want
    assert database_path({"HOME": str(tmp_path), "XDG_DATA_HOME": "relative/dir"}) == want


@pytest.mark.parametrize("url", ["postgresql://user:hunter2@db/agentrt", "mysql://h/db", "redis://x"])
def test_other_schemes_are_unsupported_and_never_echo_the_secret(url: str) -> None:
    with pytest.raises(AgentrtError) as info:
        database_path({"AGENTRT_DATABASE_URL": url})
    assert info.value.code == "unsupported_database_url"
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("url", ["sqlite://relative.db", "sqlite:relative", "sqlite:////?x", "/just/a/path"])
def test_malformed_sqlite_urls(url: str) -> None:
    with pytest.raises(AgentrtError) as info:
        database_path({"AGENTRT_DATABASE_URL": url})
    assert info.value.code == "invalid_database_url"
