"""One exception out of a nursery that runs only background tasks.

A context manager that owns a nursery for its background tasks and yields to
the caller gets the caller's exception back wrapped in an exception group
(trio's strict groups).  The caller raised one exception and should get that
one back, with its own cause and context, not a group to unpack.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collapse_single_group"]


@contextmanager
def collapse_single_group() -> Iterator[None]:
    """Re-raise a lone exception out of a group unchanged; leave real groups alone."""
    try:
        yield
    except BaseExceptionGroup as group:
        exc: BaseException = group
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        if exc is group or isinstance(exc, BaseExceptionGroup):
            raise
        cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
        try:
            raise exc
        finally:
            exc.__cause__, exc.__context__, exc.__suppress_context__ = cause, context, suppress
