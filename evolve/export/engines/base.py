"""What an engine target is (:class:`Engine`), the settings it can write (:class:`Setting`), and the shared readers of
a champion's shape: its fixed draft length, its static tree, its family member.

An engine declares, as plain data, the knobs it offers (:class:`Knob`: name, type, range, default, the source file
that defines it) and, per kind of program (:class:`evolve.kinds.base.ProgramKind`), a :class:`KindSupport`: which
champions it writes exactly (``exact``), which settings it can express (``settings``, written as rules of the same
kind so the kind's own scorer scores them), its default (``default``) and, in words, the nearest setting family
(``nearest``). ``render`` turns one setting into the text the engine reads. Nothing here compares an engine's or a
kind's name: the command asks the engine for the kind's entry (:meth:`Engine.support`).

The readers evaluate the champion through its exported numpy module (:func:`evolve.export.numpy_module.numpy_source`
with the kind's own layout), so a fixed length or a static tree is read with the exported module's exact semantics
(a verification-length policy drafts while ``keep_drafting`` is 1; a tree node keeps ``tree_children`` children).
"""
from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from evolve.errors import InputError
from evolve.export.codegen import straight_line
from evolve.export.numpy_module import numpy_source
from evolve.gp.compiler import Node
from evolve.kinds.base import ProgramKind
from heuristics.contract import Rule

#: Longest draft (or tree depth) a champion is read at when its length or tree is recognised.
MAX_LENGTH = 64


@dataclass(frozen=True)
class Knob:
    """One setting an engine offers: ``name`` as the engine spells it (a flag or a config key), ``type`` (``int``,
    ``float``, ``str``, ``list``), ``range`` in words, ``default`` as the engine's source sets it (text), ``source``:
    the file of the engine's repository that defines it (and the commit read, where versions differ)."""

    name: str
    type: str
    range: str
    default: str
    source: str


@dataclass(frozen=True)
class Setting:
    """One configuration an engine can express: ``label`` (short, for tables), ``rule`` (the same configuration as a
    rule of the champion's kind, scored by the kind's own scorer; None when the scorer cannot score it), ``knobs``
    (knob name -> value, what :attr:`Engine.render` writes) and ``note`` (how exact it is, in words)."""

    label: str
    rule: Rule | None
    knobs: Mapping[str, Any]
    note: str = ""


@dataclass(frozen=True)
class KindSupport:
    """What an engine can do with one kind of program.

    ``exact(rule, gamma)`` the setting that runs ``rule`` exactly, or None; ``settings(rule, gamma, depth)`` every
    setting the engine can express for a champion of this kind (the candidates tuned on the valid split; ``gamma``
    bounds the draft length and the tree width, ``depth`` the tree depth: :mod:`evolve.export.engines.deploy` passes
    the data's longest draft for both); ``default(gamma)`` the engine's default setting, or
    None when the engine has none (a knob it requires); ``nearest``: the setting family, in words, a refusal names.
    """

    exact: Callable[[Rule, int | None], Setting | None]
    settings: Callable[[Rule, int, int], list[Setting]]
    default: Callable[[int], Setting | None]
    nearest: str


@dataclass(frozen=True)
class Provenance:
    """Where a written configuration comes from: the champion's ``rule`` name, ``expression``, ``source`` (its file or
    ``registered rule NAME``), ``kind``, whether the setting is ``exact``, and ``tuned`` (what was tuned on which split
    and cost file; empty for an exact setting)."""

    rule: str
    expression: str
    source: str
    kind: str
    exact: bool
    tuned: str = ""
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The provenance as lines of text (no comment marks)."""
        out = [f"champion: {self.rule} ({self.kind})", f"expression: {self.expression}", f"source: {self.source}",
               "exact: yes, the engine runs the champion as scored" if self.exact else
               f"exact: no, the engine's best expressible setting ({self.tuned})"]
        return out + list(self.notes)


#: A renderer: (setting, provenance, schedule) -> the text the engine reads.
Render = Callable[[Setting, Provenance, tuple[tuple[int, int, int], ...] | None], str]


@dataclass(frozen=True)
class Engine:
    """One engine target of ``python -m evolve export --to NAME`` (see the module doc).

    ``name`` the target's name; ``title`` the engine in words; ``reads`` how the engine reads the written file;
    ``knobs`` the documented knobs; ``kinds`` ProgramKind -> :class:`KindSupport`; ``render`` the writer;
    ``schedule``: whether ``render`` takes a per-batch-size schedule; ``refusals`` ProgramKind -> the nearest setting,
    in words, for a kind the engine cannot run at all (named in its one-line refusal).
    """

    name: str
    title: str
    reads: str
    knobs: tuple[Knob, ...]
    kinds: Mapping[ProgramKind, KindSupport]
    render: Render
    schedule: bool = False
    refusals: Mapping[ProgramKind, str] = field(default_factory=dict)

    def support(self, kind: ProgramKind) -> KindSupport | None:
        """The engine's entry for ``kind``, or None when it cannot run programs of that kind."""
        return self.kinds.get(kind)


# --- reading a champion's shape -------------------------------------------------------------------------------

def program_values(rule: Rule, layout: Any, columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The values of ``rule``'s exported function (its kind's ``layout``, :class:`evolve.export.codegen.Layout`) on
    ``columns`` (name -> float64 array, one shape), or None when the rule reads a column not given.

    The numpy module of :mod:`evolve.export.numpy_module` is executed, so the values have the exported module's
    semantics exactly (a decision, a child count, a clamped weight). Raises nothing for a well-formed rule.
    """
    features = straight_line(rule.nodes).features
    if any(f not in columns for f in features):
        return None
    namespace: dict[str, Any] = {}
    exec(compile(numpy_source(rule.name, rule.nodes, layout, "engine check"), "<exported>", "exec"), namespace)
    function = namespace[layout.kind.function_name]
    return np.asarray(function(**{f: columns[f] for f in features}), dtype=np.float64)


def fixed_length(rule: Rule, layout: Any) -> int | None:
    """The draft length of a verification-length policy that reads only ``draft_index`` (drafting stops at the first
    step whose decision is 0), or None for a policy reading anything else or never stopping by :data:`MAX_LENGTH`."""
    decisions = program_values(rule, layout, {"draft_index": np.arange(MAX_LENGTH + 1, dtype=np.float64)})
    if decisions is None:
        return None
    decisions = np.broadcast_to(decisions, (MAX_LENGTH + 1,))
    stops = np.flatnonzero(decisions <= 0.0)
    return int(stops[0]) if stops.size else None


def static_widths(rule: Rule, layout: Any) -> tuple[int, ...] | None:
    """Children per depth of a tree shape that reads only ``draft_index`` (the tree ends at the first depth with no
    child), or None for a shape reading anything else, keeping every drawn child (an infinite value) or not ending by
    :data:`MAX_LENGTH`."""
    children = program_values(rule, layout, {"draft_index": np.arange(MAX_LENGTH + 1, dtype=np.float64)})
    if children is None:
        return None
    children = np.broadcast_to(children, (MAX_LENGTH + 1,))
    widths = []
    for c in children:
        if c <= 0.0:
            return tuple(widths)
        if not math.isfinite(c):
            return None
        widths.append(int(c))
    return None


def constant_value(rule: Rule, layout: Any) -> float | None:
    """The value of a program that reads no column (through its exported function), or None."""
    value = program_values(rule, layout, {})
    return None if value is None else float(value.reshape(-1)[0])


def constants(nodes: list[Node]) -> list[float]:
    """The constants of prefix ``nodes`` in prefix order."""
    return [float(n.value) for n in nodes if n.node_type not in ("prim", "feature")]


def member(rule: Rule, make: Callable[..., Rule], guesses: list[tuple]) -> tuple | None:
    """The first parameter tuple of ``guesses`` whose family member ``make(*params)`` has ``rule``'s expression
    exactly (the same normalised expression text), or None. A guess ``make`` refuses (ValueError) is skipped."""
    for params in guesses:
        try:
            candidate = make(*params)
        except (ValueError, TypeError):
            continue
        if candidate.expression == rule.expression:
            return params
    return None


def tree_paths(widths: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The node paths of a static tree with ``widths[d]`` children at every node of depth d, breadth first (the
    format of vLLM's ``speculative_token_tree`` and TensorRT-LLM's ``eagle_choices``: a node is the tuple of its
    child indices from the root)."""
    paths: list[tuple[int, ...]] = []
    level: list[tuple[int, ...]] = [()]
    for w in widths:
        level = [p + (i,) for p in level for i in range(w)]
        paths += level
    return paths


def check_schedule(schedule: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, int, int], ...]:
    """``schedule`` checked: (start batch size, end batch size, draft length) triples, inclusive ranges starting at
    batch size 1, contiguous and increasing, lengths >= 0. Raises InputError (param ``schedule``) otherwise."""
    rows = tuple(tuple(int(v) for v in row) for row in schedule)
    if not rows or any(len(r) != 3 for r in rows):
        raise InputError("a schedule is a non-empty tuple of (start, end, length) triples", param="schedule")
    expected = 1
    for start, end, length in rows:
        if start != expected or end < start or length < 0:
            raise InputError(f"range ({start}, {end}, {length}) does not continue the schedule at batch size "
                             f"{expected} (ranges are contiguous, inclusive, from 1; lengths >= 0)", param="schedule")
        expected = end + 1
    return rows


# --- writing -------------------------------------------------------------------------------------------------

def comment(lines: list[str], mark: str = "#") -> str:
    """``lines`` as comment lines with ``mark`` (each line on its own)."""
    return "\n".join(f"{mark} {line}".rstrip() for line in lines)


def flags(knobs: Mapping[str, Any]) -> str:
    """The command-line flags of ``knobs`` (flag -> value) on one line, each value quoted for a POSIX shell."""
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in knobs.items())


def yaml_text(header: list[str], mapping: Mapping[str, Any]) -> str:
    """A YAML document: ``header`` as ``#`` comments, then one ``key: value`` line per item with the value written
    as JSON (JSON's flow style is YAML too), so any YAML reader (and :func:`read_yaml_text`) reads it back; an empty
    mapping is written ``{}``."""
    body = "\n".join(f"{key}: {json.dumps(value)}" for key, value in mapping.items()) or "{}"
    return f"{comment(header)}\n{body}\n"


def read_yaml_text(text: str) -> dict[str, Any]:
    """The mapping of a document :func:`yaml_text` wrote (comments skipped). Raises ValueError for another line."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "{}":
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise ValueError(f"not a 'key: value' line: {line!r}")
        out[key] = json.loads(value)
    return out


__all__ = ["MAX_LENGTH", "Knob", "Setting", "KindSupport", "Provenance", "Render", "Engine", "program_values",
           "fixed_length", "static_widths", "constant_value", "constants", "member", "tree_paths", "check_schedule",
           "comment", "flags", "yaml_text", "read_yaml_text"]
