"""Naming the parameter in errors about a value checked by a core layer.

The core layers (data, eval, search, sim) name values and columns in their
errors (``gamma (the draft length) must be ...``); the commands of the report
layer know which of their parameters a value came from, and say so with
:class:`evolve.errors.InputError`'s ``param`` (the command line then names the option).
"""
from __future__ import annotations

from typing import Callable, TypeVar

from evolve.errors import InputError

T = TypeVar("T")


def naming_param(param: str, check: Callable[..., T], *args) -> T:
    """``check(*args)``; an InputError it raises is raised again as one line naming the parameter ``param``.

    Args:
        param: the parameter's name, e.g. ``gamma`` (the command line shows its option, ``--gamma``).
        check: a validating function of a core layer.

    Returns: what ``check`` returns. Raises: InputError with ``param``: the error unchanged when it
    names ``param`` already, else its whole text as the message.
    """
    try:
        return check(*args)
    except InputError as exc:
        if exc.param == param:
            raise
        raise InputError(str(exc), param=param) from None


__all__ = ["naming_param"]
