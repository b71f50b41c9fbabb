"""A command's result: its ``--format``/``--output`` options, and printing the text to stdout or a line on stderr
saying what was written where."""
from __future__ import annotations

import os
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
