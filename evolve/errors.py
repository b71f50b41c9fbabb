"""The error every layer raises for bad user input (:class:`InputError`), and the
warning for input that is valid but suspicious (:class:`InputWarning`).

The command line (:mod:`evolve.cli.errors`) prints an error as one line on
stderr (``error: ...``) and exits with code 2, without a traceback; it prints
each distinct warning once as one line ``warning: ...`` and carries on.
"""
from __future__ import annotations

import os


class InputError(Exception):
    """Bad user input (dataset, champion file, option value, output path).

    The message is a single line that names the file, the column or option and
    the first offending row or value.
    """


class InputWarning(UserWarning):
    """Input that is valid but probably not what the user meant (a tiny split, positions
    going backwards, a champions directory that does not exist). Issued with
    :func:`warnings.warn`; the message is a single line naming the file or directory."""


def os_error_text(exc: OSError) -> str:
    """A file-system error as one line: ``PATH: reason`` (e.g. ``out/x: Permission denied``).

    Args: any :class:`OSError` (its ``filename`` and ``strerror`` are used when set).
    """
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    if exc.filename is None:
        return reason
    return f"{os.fsdecode(exc.filename)}: {reason}"
