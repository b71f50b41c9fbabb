"""The drafter and backend options of ``harvest``, ``live`` and ``perf --write-costs``, and the one-drafter check.

The drafter options are built from the registry (:data:`evolve.engine.drafters.DRAFTERS`), each from its
class's plain-data ``option`` (:class:`evolve.engine.drafter_base.DrafterOption`: flag, metavar, help,
value type) with the class's ``field`` as parameter; a ``path`` value is a :class:`click.Path`, an input of the
command (:mod:`evolve.cli.inventory`) like every other path option. A command of class :class:`DrafterCommand` reads
the registry each time its parameters are asked for (parsing, help, error messages), so a drafter
registered later (:func:`evolve.engine.drafters.register_drafter`) is an option of every such command
with no edit here. :func:`check_one_drafter` names the options through the command's own parameters
(:func:`evolve.cli.errors.flag_of`). ``--backend`` (:func:`backend_option`) takes its choices and help
from :data:`evolve.engine.backends.BACKENDS`.
"""
from __future__ import annotations

from typing import Any

import click

from evolve.cli.bounds import MAX_TREE_WIDTH
from evolve.cli.errors import CliCommand, flag_of
from evolve.cli.types import LAYER_LIST, CommaList, LiveChoice
from evolve.engine.backends import backend_names, backends_help
from evolve.engine.drafter_base import VALUE_LIMITS, Drafter
from evolve.engine.drafters import DRAFTERS, chosen_drafters, drafter_fields
from evolve.errors import InputError


class _Parsed(click.ParamType):
    """A drafter option whose value type is a callable (text -> value, ValueError for a bad one)."""

    name = "value"

    def __init__(self, parse, metavar: str):
        self.parse, self.metavar = parse, metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return self.metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def value_type(value: Any, metavar: str) -> click.ParamType | None:
    """The click type of a :data:`evolve.engine.drafter_base.VALUE_TYPES` name (or of a parsing callable); ``path``
    is a :class:`click.Path` (any file or directory; existence is checked where the drafter loads it), so a drafter's
    path option joins the command's input inventory by its type (:mod:`evolve.cli.inventory`)."""
    if callable(value):
        return _Parsed(value, metavar)
    most = VALUE_LIMITS
    types = {"path": click.Path(), "count": click.IntRange(1, most["count"]),
             "counts": CommaList(click.IntRange(1, most["counts"]), metavar=metavar),
             "pair": CommaList(click.IntRange(max=most["pair"]), length=2, metavar=metavar), "layers": LAYER_LIST}
    if value not in types:
        raise ValueError(f"unknown drafter option value type {value!r} (choose from {', '.join(types)})")
    return types[value]


_OPTIONS: dict[type[Drafter], click.Option] = {}


def drafter_option(cls: type[Drafter]) -> click.Option:
    """The click option of a registered drafter class (built once per class)."""
    if cls not in _OPTIONS:
        o = cls.option
        _OPTIONS[cls] = click.Option([o.flag, cls.field], type=value_type(o.value, o.metavar), default=None,
                                     metavar=o.metavar, help=o.help)
    return _OPTIONS[cls]


class DrafterCommand(CliCommand):
    """A command taking one drafter: before it parses its arguments or shows its help, its ``params`` are given
    the registry's drafter options (those of the drafters registered now), after the parameter named
    ``drafters_after`` (None: at the end). Args (besides :class:`CliCommand`'s): ``drafters_after``."""

    def __init__(self, *args, drafters_after: str | None = None, **kwargs):
        self.drafters_after = drafters_after
        super().__init__(*args, **kwargs)
        self.sync_drafters()

    def sync_drafters(self) -> None:
        """Put the drafter options of the registry's drafters (and no others) into ``params``."""
        built = set(_OPTIONS.values())
        own = [p for p in self.params if p not in built]
        at = next((i + 1 for i, p in enumerate(own) if p.name == self.drafters_after), len(own))
        self.params = [*own[:at], *(drafter_option(d) for d in DRAFTERS), *own[at:]]

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        self.sync_drafters()
        return super().get_params(ctx)


def backend_option(help_prefix: str = ""):
    """``--backend`` (default torch), its choices and help from the backends' registry."""
    return click.option("--backend", default="torch", show_default=True, type=LiveChoice(backend_names),
                        help=help_prefix + backends_help())


def tree_width_option():
    """``--tree-width K`` of the commands that grow draft trees (harvest, live): children per expanded node."""
    return click.option("--tree-width", "tree_width", default=None, type=click.IntRange(1, MAX_TREE_WIDTH), metavar="K",
                        help="With --tree-nodes: children drawn per expanded node, and nodes expanded per drafter "
                             "pass (default 2); with --draft-suffix, the most children a node keeps.")


def drafter_values(options: dict[str, Any]) -> dict[str, Any]:
    """Take the drafter options out of a command's ``options`` (drafter field -> value, None included)."""
    return {f: options.pop(f, None) for f in drafter_fields()}


def check_one_drafter(values: dict[str, Any]) -> None:
    """Refuse anything but exactly one drafter option (``values``: drafter field -> option value), in one
    line naming the options of the running command."""
    ctx = click.get_current_context(silent=True)

    def flag(field: str) -> str:
        return (flag_of(ctx.command, field) if ctx is not None else None) or field

    chosen = [flag(d.field) for d in chosen_drafters(values)]
    if len(chosen) != 1:
        what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
        names = ", ".join(f"'{flag(f)}'" for f in drafter_fields())
        raise InputError(f"options {names}: choose exactly one drafter ({what})")


__all__ = ["DrafterCommand", "backend_option", "check_one_drafter", "drafter_option", "drafter_values",
           "value_type"]
