"""What an engine target is (:class:`Engine`), what it can run (:class:`Capabilities`), the settings it can write
(:class:`Setting`), and where a written configuration comes from (:class:`Provenance`, with the harvest's drafter,
:class:`Drafter`).

An engine declares, as plain data, the knobs it offers (:class:`Knob`: name, type, range, default, the source file
that defines it), the engine version its files were checked against (``version``), and what that version can run
(:class:`Capabilities`: a fixed draft-length knob, block verification, a confidence stop, a chain, a static tree,
per-level top-k trees, per-batch-size schedules, acceptance families, its lossless default, its defaults). A kind of
program says, in its own package (its ``engines`` hook, :class:`evolve.kinds.base.KindHooks`, built with
:mod:`evolve.export.engines.supports`), how its programs map onto those capabilities: a :class:`KindSupport` giving
which champions the engine writes exactly (``exact``), which settings it can express (``settings``, written as rules
of the same kind so the kind's own scorer scores them), its default (``default``) and, in words, the nearest setting
family (``nearest``). ``render`` turns one setting into the text the engine reads. Nothing here compares an engine's
or a kind's name: the command asks the engine for the kind's entry (:meth:`Engine.support`), which asks the kind.

The readers of a champion's shape (its fixed length, its static tree) are :mod:`evolve.export.engines.shapes`; the
writers of the engines' text formats are :mod:`evolve.export.engines.text`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from evolve.engine.drafter_base import EngineFamily
from evolve.engine.drafters import DRAFTERS
from evolve.kinds.base import ProgramKind
from heuristics.contract import Rule

#: Knob name -> value, what a renderer writes.
Knobs = Mapping[str, Any]
#: A per-batch-size schedule: (start batch size, end batch size, draft length) triples, contiguous from 1.
Schedule = tuple[tuple[int, int, int], ...]


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
    (knob name -> value, what :attr:`Engine.render` writes), ``note`` (how exact it is, or the condition under
    which the engine runs it as written, in words) and ``family``: the drafter family the setting drafts with where it
    names one (suffix decoding's knobs: the engine's suffix method; None: the harvest's drafter, whichever)."""

    label: str
    rule: Rule | None
    knobs: Knobs
    note: str = ""
    family: EngineFamily | None = None


@dataclass(frozen=True)
class KindSupport:
    """What an engine can do with one kind of program.

    ``exact(rule, gamma)`` the setting that runs ``rule`` exactly, or None; ``settings(rule, gamma, depth)`` every
    setting the engine can express for a champion of this kind (the candidates tuned on the valid split; ``gamma``
    bounds the draft length and the tree width, ``depth`` the tree depth: :mod:`evolve.export.engines.deploy` passes
    the data's longest draft for both); ``default(gamma)`` the engine's default setting, or None when the engine has
    none (a knob it requires); ``nearest``: the setting family, in words, a refusal names. ``runs`` False: the engine
    cannot run the kind at all (``nearest`` is then the nearest setting of another kind, named in the refusal).
    ``not_rules``: names the kind knows that are not rule programs (competitor decisions no engine runs) -> why, in
    words, with the nearest setting.
    """

    exact: Callable[[Rule, int | None], Setting | None]
    settings: Callable[[Rule, int, int], list[Setting]]
    default: Callable[[int], Setting | None]
    nearest: str
    runs: bool = True
    not_rules: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def refused(nearest: str, not_rules: Mapping[str, str] | None = None) -> "KindSupport":
        """The entry of a kind the engine cannot run; ``nearest`` names the setting to export instead."""
        return KindSupport(lambda rule, gamma: None, lambda rule, gamma, depth: [], lambda gamma: None, nearest,
                           False, dict(not_rules or {}))


@dataclass(frozen=True)
class Family:
    """An acceptance family an engine ships as knobs: ``make(*params)`` its member as a rule, ``guesses(constants)``
    the parameter tuples to try for a champion with those constants, ``knobs(*params)`` the member's knobs, ``grid``
    the parameter tuples swept when tuning."""

    make: Callable[..., Rule]
    guesses: Callable[[list[float]], list[tuple]]
    knobs: Callable[..., Knobs]
    grid: tuple


@dataclass(frozen=True)
class Capabilities:
    """What one engine version can run, as plain data (each field None, False or empty: it cannot).

    ``length(L)``: the knobs of a fixed draft length L >= 1 (a chain drafting L tokens a step); plain decoding (L = 0)
    is always the empty setting. ``block``: the knobs that make the drafts of a length verified as a block (block
    verification, Sun et al. 2024, arXiv 2403.10444), merged over the length's; ``block_condition``: what makes the
    engine apply it (written into the file). ``confidence(h, n)``: a capped confidence stop (stop after a drafted
    token whose drafter probability is below h, at most n drafts); ``confidence_condition`` the condition it holds
    under. ``chain(d)``: a chain of depth d (a tree of width 1; None: ``length`` is used). ``static_tree(widths)``:
    a static tree of widths[d] children per node of depth d, at most ``max_tree_nodes`` nodes. ``topk_tree(k, d)``:
    per-level top-k (EAGLE-2's dynamic tree, Li et al. 2024, arXiv 2406.16858). ``lossless``: the knobs of the
    engine's lossless (standard-rule) verification, its default acceptance; None: it has no such knob and verifies
    the standard way. ``families``: the acceptance families it ships. ``schedule``: it takes a per-batch-size draft
    length schedule (:attr:`Engine.schedule_length` reads one as the engine does). ``default_length``,
    ``default_confidence`` (h, n): its defaults (None: a required knob). ``step_policy``: it runs a per-draft-step
    decision as a Python module inside its own loop (llama-cpp-python), given the columns ``step_columns`` (drafter
    family -> the columns the module drafting with it gives a decision).
    ``suffix(L, depth, factor, min_prob)``: the knobs of suffix decoding (its own drafter, :mod:`evolve.engine.suffix`)
    drafting at most L tokens from trees of depth ``depth``, at most factor x match length, the tokens of estimated
    probability at least ``min_prob``; None: the engine has no suffix decoding.
    """

    length: Callable[[int], Knobs] | None = None
    block: Knobs | None = None
    block_condition: str = ""
    confidence: Callable[[float, int], Knobs] | None = None
    confidence_condition: str = ""
    chain: Callable[[int], Knobs] | None = None
    static_tree: Callable[[tuple[int, ...]], Knobs] | None = None
    max_tree_nodes: int | None = None
    topk_tree: Callable[[int, int], Knobs] | None = None
    lossless: Knobs | None = None
    families: tuple[Family, ...] = ()
    schedule: bool = False
    default_length: int | None = None
    default_confidence: tuple[float, int] | None = None
    step_policy: bool = False
    step_columns: Mapping[EngineFamily, tuple[str, ...]] = field(default_factory=dict)
    suffix: Callable[[int, int, float, float], Knobs] | None = None


@dataclass(frozen=True)
class Drafter:
    """The drafter a champion's harvest drafted with, read from the dataset's metadata (``config.drafter``):
    ``kind`` (the registered drafter's name, :data:`evolve.engine.drafters.DRAFTERS`; empty: unknown) and, for
    prompt lookup, the n-gram lengths ``ngram`` (longest, shortest). Engines read its :attr:`family`, never its
    name, so a new drafter needs no engine edit."""

    kind: str = ""
    ngram: tuple[int, int] | None = None

    @property
    def family(self) -> EngineFamily | None:
        """What an engine must draft with (the registered drafter's :class:`evolve.engine.drafter_base.EngineFamily`;
        None: unknown, a drafter no longer registered)."""
        return next((d.family for d in DRAFTERS if d.name == self.kind), None) if self.kind else None

    @property
    def lookup(self) -> bool:
        """Whether the drafts come from prompt lookup (no draft model)."""
        return self.family is EngineFamily.LOOKUP


#: A harvest drafter nothing is known of (a registered rule, a champion without provenance).
UNKNOWN_DRAFTER = Drafter()


@dataclass(frozen=True)
class Provenance:
    """Where a written configuration comes from: the champion's ``rule`` name, ``expression``, ``source`` (its file or
    ``registered rule NAME``), ``kind``, whether the setting is ``exact``, ``tuned`` (what was tuned on which split
    and cost file; empty for an exact setting), ``notes``, the harvest's ``drafter`` (what the engine must draft
    with for the setting to mean what it was scored as) and ``length``, the draft length the champion was scored at
    (its run's gamma, or its dataset's draft length; None where neither is known), which an engine that needs a
    draft length beside an acceptance rule writes."""

    rule: str
    expression: str
    source: str
    kind: str
    exact: bool
    tuned: str = ""
    notes: tuple[str, ...] = ()
    drafter: Drafter = UNKNOWN_DRAFTER
    length: int | None = None

    def lines(self) -> list[str]:
        """The provenance as lines of text (no comment marks)."""
        out = [f"champion: {self.rule} ({self.kind})", f"expression: {self.expression}", f"source: {self.source}",
               "exact: yes, the engine runs the champion as scored" if self.exact else
               f"exact: no, the engine's best expressible setting ({self.tuned})"]
        if self.drafter.kind:
            lookup = f" (n-grams {self.drafter.ngram[0]} down to {self.drafter.ngram[1]})" if self.drafter.ngram else ""
            out.append(f"harvest drafter: {self.drafter.kind}{lookup}")
        return out + list(self.notes)


#: A renderer: (setting, provenance, schedule) -> the text the engine reads.
Render = Callable[[Setting, Provenance, Schedule | None], str]


@dataclass(frozen=True)
class Engine:
    """One engine target of ``python -m evolve export --to NAME`` at one checked version (see the module doc).

    ``name`` the target's name; ``title`` the engine in words; ``reads`` how the engine reads the written file;
    ``knobs`` the documented knobs; ``capabilities`` what this version can run; ``render`` the writer; ``version``
    the engine version the written files were checked against (``checked``: how, in words); ``schedule_length``
    (for an engine whose capabilities take a schedule): (the written text, batch size) -> the draft length the engine
    runs at that batch size, read as the engine reads the file.
    """

    name: str
    title: str
    reads: str
    knobs: tuple[Knob, ...]
    capabilities: Capabilities
    render: Render
    version: str = ""
    checked: str = ""
    schedule_length: Callable[[str, int], int] | None = None

    @property
    def schedule(self) -> bool:
        """Whether ``render`` takes a per-batch-size schedule."""
        return self.capabilities.schedule

    def entry(self, kind: ProgramKind) -> KindSupport | None:
        """What ``kind`` says this engine can do with its programs (its ``engines`` hook), or None (no hook)."""
        hook = kind.hooks().engines
        return None if hook is None else hook(self)

    def support(self, kind: ProgramKind) -> KindSupport | None:
        """The engine's entry for ``kind``, or None when it cannot run programs of that kind."""
        found = self.entry(kind)
        return found if found is not None and found.runs else None

    @property
    def refusals(self) -> "_Refusals":
        """Kind -> the nearest setting, in words, of a kind this engine cannot run (``.get(kind, default)``)."""
        return _Refusals(self)


class _Refusals:
    """The nearest settings of the kinds an engine cannot run, asked of each kind (:attr:`Engine.refusals`)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def get(self, kind: ProgramKind, default: str = "none") -> str:
        found = self.engine.entry(kind)
        return found.nearest if found is not None and not found.runs else default


__all__ = ["Knobs", "Schedule", "Knob", "Setting", "KindSupport", "Family", "Capabilities", "Drafter", "UNKNOWN_DRAFTER", "Provenance",
           "Render", "Engine"]
