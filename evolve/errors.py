"""The error every layer raises for bad user input (:class:`InputError`), and the
warning for input that is valid but suspicious (:class:`InputWarning`).

The command line (:mod:`evolve.cli.errors`) prints an error as one line on
stderr (``error: ...``) and exits with code 2, without a traceback; it prints
each distinct warning once as one line ``warning: ...`` and carries on.
"""
from __future__ import annotations

import os
import signal
import threading


class InputError(Exception):
    """Bad user input (dataset, champion file, parameter value, output path).

    The message is a single line that names the file or the column and the first
    offending row or value. A bad parameter value is raised with ``param``, the
    parameter's name in the code (``InputError("must be at least 1 (value 0)",
    param="max_new_tokens")``), and a message that does not repeat it: the layers
    below the command line never spell out a command-line flag. ``str()`` gives
    ``max_new_tokens: must be ...``; the command line (:mod:`evolve.cli.errors`)
    sets :attr:`flag` to the option that carries the parameter, and then it reads
    ``option '--max-new-tokens': must be ...``.

    Attributes:
        message: the text without the parameter's name.
        param: name of the offending parameter, or None.
        flag: the command-line option of ``param`` (set by the command line), or None.
    """

    def __init__(self, message: str, *, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.flag: str | None = None

    def __str__(self) -> str:
        if self.flag is not None:
            return f"option '{self.flag}': {self.message}"
        if self.param is not None:
            return f"{self.param}: {self.message}"
        return self.message


class InputWarning(UserWarning):
    """Input that is valid but probably not what the user meant (a tiny split, positions
    going backwards, a champions directory that does not exist). Issued with
    :func:`warnings.warn`; the message is a single line naming the file or directory."""


def printable(text: str) -> str:
    """``text`` for a one-line message: control and other unprintable characters escaped (a newline as ``\\n``)."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 prompt``, ``3 prompts``: ``n`` and ``noun`` agreeing in number (``plural``: the plural when it is not
    ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def json_type(value: object) -> str:
    """``an integer``, ``a string``, ``null``...: the JSON type of a decoded value, with its article, for a message
    about a file's value."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def os_error_text(exc: OSError) -> str:
    """A file-system error as one line: ``PATH: reason`` (e.g. ``out/x: Permission denied``).

    Args: any :class:`OSError` (its ``filename`` and ``strerror`` are used when set).
    """
    reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    if exc.filename is None:
        return reason
    return f"{os.fsdecode(exc.filename)}: {reason}"



#: Seconds after which a Ctrl-C swallowed by a C callback is delivered again (:func:`redeliver_swallowed_interrupts`).
REDELIVER_SECONDS = 0.05

_INTERRUPTED = threading.Event()


def note_interrupt() -> None:
    """Record that this process was interrupted (Ctrl-C or SIGTERM); see :func:`redeliver_swallowed_interrupts`."""
    _INTERRUPTED.set()


def _sigint(signum, frame):
    note_interrupt()
    signal.default_int_handler(signum, frame)


def redeliver_swallowed_interrupts(delay: float = REDELIVER_SECONDS) -> None:
    """Make a Ctrl-C that a C callback swallowed arrive again, without a traceback (idempotent).

    A KeyboardInterrupt raised while Python code runs inside a callback from C (numba writing its
    cache through llvmlite, for one) cannot propagate: Python prints ``Exception ignored in ...`` with a
    traceback and carries on, and the Ctrl-C is lost. With this ``sys.unraisablehook`` installed such an
    interrupt prints nothing and the main thread is interrupted again ``delay`` seconds later (by then
    out of the callback; if not, the same happens again). Once the process has been interrupted
    (SIGINT through Python's default handler, which this wraps, or :func:`note_interrupt`), other
    unraisable exceptions print nothing either: they come from objects the interrupt left half built
    (llvmlite's ``PassBuilder.__del__`` raising ``AttributeError``, for one) while the command aborts.
    Before an interrupt they go to the hook installed before.
    """
    import sys

    if getattr(sys.unraisablehook, "_redelivers_interrupts", False):
        return
    previous = sys.unraisablehook
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _sigint)

    def hook(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            import _thread

            note_interrupt()
            timer = threading.Timer(delay, _thread.interrupt_main)
            timer.daemon = True
            timer.start()
        elif not _INTERRUPTED.is_set():
            previous(unraisable)

    hook._redelivers_interrupts = True
    sys.unraisablehook = hook
