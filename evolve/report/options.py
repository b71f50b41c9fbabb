"""Naming the command-line option in errors about a value checked by a core layer.

The core layers (data, eval, search, sim) name values and columns in their
errors (``gamma (the draft length) must be ...``); the commands of the report
layer know which option a value came from, and say so.
"""
from __future__ import annotations

from typing import Callable, TypeVar

from evolve.errors import InputError

T = TypeVar("T")


def naming_option(option: str, check: Callable[..., T], *args) -> T:
    """``check(*args)``; an InputError it raises is raised again as one line naming ``option``.

    Args:
        option: the option's flag, e.g. ``--gamma``.
        check: a validating function of a core layer.

    Returns: what ``check`` returns. Raises: InputError ``option '<option>': <message>``
    (the message unchanged when it names the option already).
    """
    try:
        return check(*args)
    except InputError as exc:
        message = str(exc)
        if f"'{option}'" in message:
            raise
        raise InputError(f"option '{option}': {message}") from None


__all__ = ["naming_option"]
