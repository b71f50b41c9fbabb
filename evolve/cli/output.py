"""Printing a command's result: the text to stdout, or a line on stderr saying what was written where."""
from __future__ import annotations

import os
from pathlib import Path

import click


def echo_outputs(text: str, output: str | os.PathLike | None, written: str, png_path: Path | None) -> None:
    """Print ``text`` to stdout when there is no ``output`` file, else say on stderr what was ``written`` there."""
    if output is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"wrote {output} ({written})", err=True)
    if png_path is not None:
        click.echo(f"wrote {png_path}", err=True)
