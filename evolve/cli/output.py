"""A command's result: its ``--format``/``--output`` options, and printing the text to stdout or a line on stderr
saying what was written where; progress as plain lines on stderr (:class:`ProgressLines`) where stderr is no
terminal."""
from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import click

from evolve.cli.inventory import OutputPath

#: ``--format`` help of the commands whose format follows the ``--output`` suffix (.json, .csv, .md).
FORMAT_BY_SUFFIX = "Output format [default: from the --output suffix (.json, .csv, .md), else table]."
#: ``--format`` help of the commands with a table and JSON only.
FORMAT_JSON_OR_TABLE = "Output format [default: json for an --output ending in .json, else table]."
#: ``--output`` help of the commands writing one file.
OUTPUT_FILE = "Write the result to FILE (atomically) instead of stdout."


def output_options(formats: Sequence[str], format_help: str, output_help: str = OUTPUT_FILE) -> Callable:
    """The ``--format`` (parameter ``fmt``, one of ``formats``) and ``--output`` (a file path) options of a command."""
    def decorate(command: Callable) -> Callable:
        command = click.option("--output", type=OutputPath(dir_okay=False, path_type=Path), default=None,
                               help=output_help)(command)
        return click.option("--format", "fmt", type=click.Choice(formats), default=None, help=format_help)(command)
    return decorate


def echo_outputs(text: str, output: str | os.PathLike | None, written: str, png_path: Path | None) -> None:
    """Print ``text`` to stdout when there is no ``output`` file, else say on stderr what was ``written`` there."""
    if output is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"wrote {output} ({written})", err=True)
    if png_path is not None:
        click.echo(f"wrote {png_path}", err=True)


#: Seconds between two plain progress lines (:class:`ProgressLines`).
PROGRESS_INTERVAL = 5.0


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal (a progress bar redraws there; elsewhere it would show nothing until the end)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


class ProgressLines:
    """Progress as plain lines on stderr, for a stderr that is a file or a pipe: ``LABEL DONE/TOTAL  DETAIL  N s``,
    the first step, then at most one line every ``interval`` seconds, and the last step. Each line is at most 100
    characters (``detail`` is cut)."""

    def __init__(self, label: str, interval: float = PROGRESS_INTERVAL, clock: Callable[[], float] = time.monotonic):
        self.label, self.interval, self.clock = label, interval, clock
        self.start = clock()
        self.last = -math.inf

    def __call__(self, done: int, total: int, detail: str = "") -> None:
        """Report ``done`` of ``total`` steps (``detail``: the latest figures, one short phrase)."""
        now = self.clock()
        if done < total and now - self.last < self.interval:
            return
        self.last = now
        head = f"{self.label} {done}/{total}"
        tail = f"  {now - self.start:.0f} s"
        room = 100 - len(head) - len(tail) - 2
        detail = detail if len(detail) <= room else detail[: max(room - 3, 0)] + "..."
        click.echo(f"{head}  {detail}{tail}" if detail else head + tail, err=True)
