"""How the command-line tools report errors and warnings.

Every command reports bad input (:class:`evolve.errors.InputError`) as one line
on stderr (``error: ...``) naming the file, column or option and the first
offending row or value, and exits with code 2, without a traceback. Click's own
usage errors (unknown option, invalid value) and every file-system error that
reaches the command line (a directory where a file is expected, a missing,
unreadable or unwritable file, a parent that is not a directory:
:class:`OSError`) are reported the same way. Input that is valid but suspicious
(:class:`evolve.errors.InputWarning`) or was accepted after clipping round-off
(:class:`evolve.traces.schema.RoundOffWarning`) is reported as one line on stderr
(``warning: ...``, each distinct message once) and the command goes on.
Ctrl-C outside a command's own handling prints ``aborted`` and exits with 130.
"""
from __future__ import annotations

import sys
import warnings

import click

from evolve.cli.inventory import check_outputs
from evolve.errors import InputError, InputWarning, os_error_text, redeliver_swallowed_interrupts
from evolve.traces.schema import RoundOffWarning

#: Warnings printed as one ``warning: ...`` line.
ONE_LINE_WARNINGS: tuple[type[Warning], ...] = (InputWarning, RoundOffWarning)
#: Exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Exit code of bad input.
EXIT_INPUT = 2


def flag_of(command: click.Command, param: str) -> str | None:
    """The longest option string of ``command``'s parameter named ``param`` (``--max-new-tokens``), or None.

    A command may carry ``aliases`` (``{"vocab_size": "vocab"}``: a parameter of a lower layer whose
    option has another name); ``param`` is looked up through them first.
    """
    name = (getattr(command, "aliases", None) or {}).get(param, param)
    for p in command.params:
        if p.name == name and isinstance(p, click.Option):
            return max(p.opts, key=len)
    return None


class _OneLineErrors:
    """Mixin for click commands: user errors become ``error: ...`` and exit 2.

    An :class:`InputError` raised with ``param`` while a command runs is named by that command's
    option (:func:`flag_of`): the lower layers name parameters, only the command line names flags.
    The innermost command (a group's subcommand) looks the option up; a group never names an error
    of its subcommand by an option of its own.

    Before the command runs, its outputs are checked against its whole input inventory
    (:func:`evolve.cli.inventory.check_outputs`): no output may land on a file the command reads.

    Args (besides click's): ``aliases``, {lower-layer parameter: the command's parameter name};
    ``inputs``, the parameters whose values may be paths the command reads although their type is not a
    :class:`click.Path` (a name or a file: ``--costs`` of ``run``, ``--target``); ``references``, {parameter:
    function(path) -> [(what, path)]}: the files the value of a parameter names, which the command reads through it
    (:func:`evolve.cli.inventory.references_of`; the parameters of :data:`evolve.cli.inventory.REFERENCES` need none).
    """

    def __init__(self, *args, aliases: dict[str, str] | None = None, inputs: tuple[str, ...] = (),
                 references: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.aliases = dict(aliases or {})
        self.inputs = tuple(inputs)
        self.references = dict(references or {})

    def invoke(self, ctx: click.Context):
        try:
            check_outputs(ctx)
            return super().invoke(ctx)
        except InputError as exc:
            if exc.param is not None and exc.flag is None and not getattr(exc, "_flag_looked_up", False):
                exc.flag = flag_of(ctx.command, exc.param)
                exc._flag_looked_up = True
            raise

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        redeliver_swallowed_interrupts()  # a Ctrl-C inside a C callback: no traceback, not lost
        try:
            with warnings.catch_warnings():
                for category in ONE_LINE_WARNINGS:
                    warnings.simplefilter("always", category)
                warnings.showwarning = _one_line_warning(warnings.showwarning)
                rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except InputError as exc:
            _fail(str(exc))
        except click.ClickException as exc:
            _fail(exc.format_message())
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except OSError as exc:
            _fail(os_error_text(exc))
        sys.exit(rv if isinstance(rv, int) else 0)


def _one_line_warning(show):
    """A ``warnings.showwarning`` printing :data:`ONE_LINE_WARNINGS` as ``warning: ...`` (each
    distinct message once), others through ``show``."""
    seen: set[str] = set()

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, ONE_LINE_WARNINGS):
            text = " ".join(str(message).split())
            if text not in seen:
                seen.add(text)
                click.echo(f"warning: {text}", err=True)
        else:
            show(message, category, filename, lineno, file, line)
    return showwarning


def _fail(message: str) -> None:
    first_line = " ".join(message.split("\n")).strip()
    click.echo(f"error: {first_line}", err=True)
    sys.exit(EXIT_INPUT)


#: Context settings every command of the project starts from; a command's own ``context_settings``
#: are merged over them. Set on the command (not only inherited from a group's context) because click
#: caches a command's help option the first time any context asks for it, even a context without parent.
DEFAULT_CONTEXT_SETTINGS: dict = {"help_option_names": ["-h", "--help"]}


class _DefaultContextSettings:
    """Mixin for click commands: :data:`DEFAULT_CONTEXT_SETTINGS` under the command's own ``context_settings``."""

    def __init__(self, *args, **kwargs):
        kwargs["context_settings"] = {**DEFAULT_CONTEXT_SETTINGS, **(kwargs.get("context_settings") or {})}
        super().__init__(*args, **kwargs)


class CliCommand(_OneLineErrors, _DefaultContextSettings, click.Command):
    """A click command reporting user errors as one line with exit code 2; takes ``-h`` as well as ``--help``."""


class CliGroup(_OneLineErrors, _DefaultContextSettings, click.Group):
    """A click group reporting user errors as one line with exit code 2; takes ``-h`` as well as ``--help``."""

    command_class = CliCommand
