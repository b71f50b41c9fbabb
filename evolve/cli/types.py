"""Click parameter types shared by the commands: comma-separated lists (:class:`CommaList`).

Every comma-separated option of the command line (``--lengths 50,100``, ``--budgets 0,0.01``,
``--draft-skip-layers 2,4,6-9``, ``--draft-window 4,64``, ``--sizes``, ``--features``) is parsed
here, once, into a tuple; the layers below receive tuples, never the text. A bad list is
refused by click as one line naming the option and the first bad item, e.g.
``Invalid value for '--lengths': 'x' is not a valid integer (item 2 of '10,x').``
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import click

from evolve.engine.drafter_base import VALUE_LIMITS


def legacy_option(flag: str, hint: str):
    """A hidden option that refuses ``flag`` of older versions in one line with ``hint``."""
    def refuse(ctx, param, value):
        if value is not None:
            from evolve.errors import InputError
            raise InputError(f"option '{flag}' was replaced: {hint}")
        return value
    name = "legacy_" + flag.lstrip("-").replace("-", "_")  # its own name: a new option may take the old one's
    return click.option(flag, name, hidden=True, expose_value=False, callback=refuse, default=None)


class LiveChoice(click.Choice):
    """A :class:`click.Choice` whose choices are read each time they are needed, so that a kind of program or
    an objective registered after the command was built (:func:`evolve.kinds.registry.register_kind`,
    :func:`evolve.eval.objectives.register_objective`) is accepted too."""

    def __init__(self, choices_of: Callable[[], Sequence[str]]):
        self._choices_of = choices_of
        super().__init__(tuple(choices_of()))

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._choices_of())

    @choices.setter
    def choices(self, value) -> None:  # click.Choice.__init__ assigns them; they are read live instead
        pass


class CommaList(click.ParamType):
    """``"a,b,c"`` -> a tuple of ``item_type`` values (each item stripped of spaces).

    Args:
        item_type: the click type of one item (``int``, ``float``, ``click.IntRange(1, 64)``, another
            :class:`click.ParamType`).
        length: the exact number of items, or None for any number >= 1.
        unique_sorted: return the items sorted, without repeats (the flattened spans of
            :class:`LayerSpan` items included).
        distinct: refuse a list naming one value twice (a set of values, where a repeat would silently be
            one value counted twice or kept once).
        metavar: what ``--help`` shows for the value (default ``ITEM,...``).

    A tuple or list (a default given as values, a call without click) is converted item by
    item. Errors: an empty list, an empty item, a wrong count, a repeated item (with ``distinct``), or the first item
    ``item_type`` refuses, each as one :class:`click.BadParameter` line naming the option.
    """

    name = "list"

    def __init__(self, item_type: Any = click.STRING, *, length: int | None = None, unique_sorted: bool = False,
                 metavar: str | None = None, distinct: bool = False):
        self.item_type = click.types.convert_type(item_type)
        self.length = length
        self.unique_sorted = unique_sorted
        self.distinct = distinct
        self.metavar = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        if self.metavar is not None:
            return self.metavar
        item = self.item_type.name.split()[0].upper()  # INTEGER (also for an integer range), FLOAT, TEXT
        return f"{item},..." if self.length is None else ",".join([item] * self.length)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple:
        if isinstance(value, (tuple, list)):
            text = ",".join(str(v) for v in value)
            items = [v.strip() if isinstance(v, str) else v for v in value]
        else:
            text = str(value)
            items = [s.strip() for s in text.split(",")]
        if not items or items == [""]:
            self.fail("the list is empty", param, ctx)
        # a range's own message for a non-number is "not a valid integer range": convert to the number first
        number = click.INT if isinstance(self.item_type, click.IntRange) else \
            click.FLOAT if isinstance(self.item_type, click.FloatRange) else None
        out = []
        for i, item in enumerate(items, 1):
            if item == "":
                self.fail(f"item {i} is empty (value {text!r})", param, ctx)
            try:
                value = item if number is None else number.convert(item, param, ctx)
                out.append(self.item_type.convert(value, param, ctx))
            except click.BadParameter as exc:
                self.fail(f"{exc.message.rstrip('.')} (item {i} of {text!r})", param, ctx)
        if self.length is not None and len(out) != self.length:
            what = f"{self.metavar} ({self.length} comma-separated items)" if self.metavar else \
                f"{self.length} comma-separated items"
            self.fail(f"expected {what}, got {len(out)} (value {text!r})", param, ctx)
        if self.distinct:
            seen: dict = {}
            for i, v in enumerate(out, 1):
                if v in seen:
                    self.fail(f"item {i} repeats item {seen[v]} ({v!r}); name each value once (value {text!r})",
                              param, ctx)
                seen[v] = i
        if self.unique_sorted:
            flat = {x for v in out for x in (v if isinstance(v, tuple) else (v,))}
            return tuple(sorted(flat))
        return tuple(out)


class LayerSpan(click.ParamType):
    """One item of a layer list: a 0-based index ``5`` or an inclusive range ``6-9``, as a tuple of indices, each at
    most ``most`` (the range is checked before it is expanded)."""

    name = "layer"

    def __init__(self, most: int = VALUE_LIMITS["layers"]):
        self.most = most

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "N|A-B"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[int, ...]:
        if isinstance(value, tuple):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            span = (value,)
        else:
            text = str(value).strip()
            lo, sep, hi = text.partition("-") if not text.startswith("-") else (text, "", "")
            try:
                a = int(lo)
                b = int(hi) if sep else a
            except ValueError:
                self.fail(f"{text!r} is not a layer index or a range A-B", param, ctx)
            if b < a:
                self.fail(f"{text!r}: the range ends before it starts", param, ctx)
            if b > self.most:
                self.fail(f"layer indices are at most {self.most} ({text!r})", param, ctx)
            span = tuple(range(a, b + 1))
        if span[0] < 0:
            self.fail(f"layer indices are >= 0 ({value!r})", param, ctx)
        if span[-1] > self.most:
            self.fail(f"layer indices are at most {self.most} ({value!r})", param, ctx)
        return span


#: ``--draft-skip-layers``: ``2,4,6-9`` -> sorted unique 0-based layer indices.
LAYER_LIST = CommaList(LayerSpan(), unique_sorted=True, metavar="LIST")

__all__ = ["CommaList", "LayerSpan", "LAYER_LIST"]
