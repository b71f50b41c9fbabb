"""How the command-line tools report errors.

Every command reports bad input (:class:`data.errors.InputError`) as one line
on stderr (``error: ...``) naming the file, column or option and the first
offending row or value, and exits with code 2, without a traceback. Click's own
usage errors (unknown option, invalid value) are reported the same way.
"""
from __future__ import annotations

import sys

import click

from data.errors import InputError


class _OneLineErrors:
    """Mixin for click commands: user errors become ``error: ...`` and exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except InputError as exc:
            _fail(str(exc))
        except click.ClickException as exc:
            _fail(exc.format_message())
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str) -> None:
    first_line = " ".join(message.split("\n")).strip()
    click.echo(f"error: {first_line}", err=True)
    sys.exit(2)


class CliCommand(_OneLineErrors, click.Command):
    """A click command reporting user errors as one line with exit code 2."""


class CliGroup(_OneLineErrors, click.Group):
    """A click group reporting user errors as one line with exit code 2."""

    command_class = CliCommand
