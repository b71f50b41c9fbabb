"""Ctrl-C during a run: the first SIGINT finishes the current generation, a second one aborts.

Inside :func:`graceful_interrupt` (``python -m evolve run`` uses it), Ctrl-C
(SIGINT) only sets a flag; the search polls it after each generation (an
island search after each epoch), stops, and the run directory is written as
usual (``interrupted: true`` in ``run.json`` and in the champion's
provenance, a comment in ``config.toml`` saying how many generations were
completed: :func:`interrupted_comment`); the run's checkpoint is kept, so
``python -m evolve resume`` can finish it (:mod:`evolve.search.rundir`).
``python -m evolve run`` then exits with code 130. A second Ctrl-C raises
KeyboardInterrupt at once, and no run directory is written.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def graceful_interrupt() -> Iterator[Callable[[], bool]]:
    """Within the block the first SIGINT only sets a flag (yielded as a poll function).

    A second SIGINT raises KeyboardInterrupt as usual. Outside the main thread
    (where signal handlers cannot be set) the poll always returns False. The
    previous SIGINT handler is restored on exit.
    """
    state = {"stop": False}
    if threading.current_thread() is not threading.main_thread():
        yield lambda: state["stop"]
        return

    def handler(signum, frame):
        if state["stop"]:
            raise KeyboardInterrupt
        state["stop"] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield lambda: state["stop"]
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted_comment(result) -> str:
    """A ``config.toml`` comment line saying how many generations an interrupted run completed
    (empty for a run that was not interrupted).

    Args: a :class:`evolve.search.algorithms.SearchResult` (``interrupted``,
    ``generations`` completed after the initial population, ``config.generations`` asked for).
    """
    if not result.interrupted:
        return ""
    return (f"# interrupted: {result.generations} of the {result.config.generations} generations were completed "
            f"(generations_completed in run.json)\n")


__all__ = ["graceful_interrupt", "interrupted_comment"]
