"""The error every layer raises for bad user input (:class:`InputError`).

The command line (:mod:`evolve.cli.errors`) prints it as one line on stderr
(``error: ...``) and exits with code 2, without a traceback.
"""
from __future__ import annotations


class InputError(Exception):
    """Bad user input (dataset, champion file, option value).

    The message is a single line that names the file, the column or option and
    the first offending row or value.
    """
