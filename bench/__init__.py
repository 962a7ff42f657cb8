"""agentrt benchmarks: ``python -m bench [name ...]`` (or ``nox -s bench``)."""
