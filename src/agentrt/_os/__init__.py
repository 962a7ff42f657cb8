"""The operating-system machinery behind :mod:`agentrt.lowlevel`: processes, descriptors, memory.

Nothing here knows about dialects, turns or sinks; the engine above uses it
through a few calls.  What each module holds:

``spawn`` / ``spawn_process``
    :class:`~agentrt._os.spawn.OwnedProcess` and ``open_owned_process``: a
    child in its own process group that dies with its owner (Linux:
    ``PR_SET_PDEATHSIG`` and a pidfd), started with signals reset and the mask
    cleared, never through a shell.
``spawn_client`` / ``spawn_batch`` / ``spawn_server``
    Small single-threaded spawn servers, one set per trio run, that fork
    children for the owner so a large parent never forks itself (the client
    starts and stops them, ``spawn_batch`` sends them the requests pending at
    once as one message with one report pipe); the server runs as a script
    (``python -I -S spawn_server.py``) and imports nothing of agentrt.
``child_watch``
    One ``epoll`` watcher per trio run for every child's exit, stderr and
    parked stdout, plus its timers: no task per child.  Where ``epoll`` or
    pidfds are missing, each process falls back to tasks of its own (both
    fallbacks are forced on Linux by ``tests/core/test_fallback_paths.py``).
``fdwrite``
    Writing to a descriptor from the trio thread without a worker thread per
    write (``pwritev2(RWF_NOWAIT)``, then ``wait_writable``).
``pipe_size``
    A pipe's fill (``FIONREAD``) and size (``F_GETPIPE_SZ``/``F_SETPIPE_SZ``),
    which the host's read loop asks before parking and grows for bulk output.
``gc_tuning`` / ``malloc_tuning``
    The collector and allocator settings ``agentrt`` applies to a process
    that streams agent output (public as :func:`agentrt.tune_gc` and
    :func:`agentrt.tune_malloc`).

Measured figures are in each module's docstring and in ``docs/dialects.md``.
"""
