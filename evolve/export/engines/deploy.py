"""A champion written for an engine: exactly where the engine can express it, else the engine's best expressible
setting tuned on the valid split, with the gap on the test split (champion, best expressible, engine default).

:func:`engine_config` asks the engine for the champion's kind (:meth:`evolve.export.engines.base.Engine.support`);
an engine without an entry for the kind refuses in one line naming its nearest setting. Without data an exact
setting is written or the champion is refused (:class:`NeedsData`: which engine cannot express it, the nearest
setting family, and that a dataset and a cost file tune it). With a dataset directory (valid and test splits) and a
cost file every expressible setting is scored on the valid split with the kind's own exact scorer (its ``score``
hook, :class:`evolve.kinds.base.KindHooks`, the one :func:`evolve.api.evaluate_rule` runs) under the cost file, the
best by tokens per second is kept (for a lossy champion, among the settings whose TV per token on valid is at most
the champion's), and the champion, that setting and the engine's default are scored on the test split.

Tokens per second: the kind's own when its metrics have it (verification-length policies, tree shapes); else (per-token
thresholds, relaxation weights, scored per block of the data's draft length gamma) tokens per call over the seconds of
one step drafting and verifying gamma tokens (:meth:`evolve.eval.costs.Costs.step_seconds`).
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from evolve.errors import InputError
from evolve.eval.costs import Costs, load_costs
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData
from evolve.export.engines.base import Engine, Provenance, Setting
from evolve.kinds.base import KindContext
from evolve.kinds.verify_length.eval_schedule import batch_schedule, fixed_length_table
from evolve.traces.io import load_split
from heuristics.contract import Rule

#: The split settings are tuned on, and the one the gap is reported on.
TUNE_SPLIT, REPORT_SPLIT = "valid", "test"
#: Slack of the TV budget (a setting may exceed the champion's TV per token by this much, rounding).
TV_SLACK = 1e-12


class NeedsData(InputError):
    """An engine cannot express a champion exactly and no dataset and cost file were given to tune its nearest
    setting (the command line names its options)."""


@dataclass(frozen=True)
class Scored:
    """A row of the gap table: its ``role`` (champion, best expressible, engine default), the ``setting`` label,
    tokens per second on valid and test (None: not scored) and TV per token on test."""

    role: str
    setting: str
    valid: float | None
    test: float | None
    tv: float | None


@dataclass(frozen=True)
class Written:
    """What :func:`engine_config` returns: the ``text`` the engine reads, the ``setting`` written, whether it is
    ``exact``, and the gap rows (empty without data)."""

    text: str
    setting: Setting
    exact: bool
    rows: tuple[Scored, ...] = ()


class Scorer:
    """``Scorer(rule, directory, costs)(other, split)``: (tokens per second, TV per token) of a rule of ``rule``'s kind
    on a split of the dataset ``directory`` under ``costs`` (:class:`evolve.eval.costs.Costs`), by the kind's
    score hook with the valid split's draft length (``gamma``), its blocks weighted as ``rule``'s run weighted them;
    each split is loaded once.

    Raises: InputError as the kind's score hook or :func:`evolve.traces.io.load_split`.
    """

    def __init__(self, rule: Rule, directory: str | os.PathLike, costs: Costs):
        self.directory, self.costs = directory, costs
        self.hook = rule.program_kind.hook("score", "python -m evolve export", f"rule '{rule.name}'")
        self.weighting = rule.weighting
        self.data: dict[str, EvalData] = {}
        self.gamma = int(self.split(TUNE_SPLIT).block_length or 1)

    def split(self, name: str) -> EvalData:
        """The split ``name`` as :class:`evolve.eval.evaluator.EvalData` (loaded on first use)."""
        if name not in self.data:
            self.data[name] = EvalData.from_traces(load_split(self.directory, name))
        return self.data[name]

    def __call__(self, rule: Rule, split: str) -> tuple[float, float]:
        """(tokens per second, TV per token) of ``rule`` on ``split``, its blocks weighted as the champion's run
        weighted them (:attr:`heuristics.contract.Rule.weighting`, when the champion's run set one)."""
        if self.weighting is not None and rule.weighting is None:
            rule = dataclasses.replace(rule, weighting=self.weighting)
        m = self.hook(rule, KindContext(lambda: self.split(split), AcceptanceQualityFitness(), self.gamma, self.costs,
                                        directory=self.directory, split=split))
        rate = getattr(m, "tokens_per_second", None)
        if rate is None:
            rate = m.tokens_per_call / self.costs.step_seconds(self.gamma, self.gamma)
        tv = getattr(m, "tv_per_token", None)
        return float(rate), float(tv or 0.0)


def provenance(rule: Rule, source: str, exact: bool, tuned: str = "", notes: tuple[str, ...] = ()) -> Provenance:
    """The :class:`evolve.export.engines.base.Provenance` of ``rule`` read from ``source``."""
    return Provenance(rule.name, rule.expression or "", source, rule.kind, exact, tuned, notes)


def engine_config(rule: Rule, source: str, engine: Engine, data: str | os.PathLike | None = None,
                  costs: str | os.PathLike | None = None,
                  schedule: tuple[tuple[int, int, int], ...] | None = None) -> Written:
    """``rule`` (an expression rule read from ``source``) written for ``engine`` (see the module doc).

    Args: ``data`` a dataset directory with valid and test splits (and tree tables for a tree shape), ``costs`` a
    cost file (both or neither); ``schedule``: (start, end, length) triples for an engine that takes a
    per-batch-size schedule (:attr:`evolve.export.engines.base.Engine.schedule`).

    Raises: InputError when the engine cannot run the rule's kind (naming its nearest setting), for only one of
    ``data`` and ``costs``, a schedule for an engine without one, or a data or cost-file error; :class:`NeedsData`
    when the rule is not exact and no data was given.
    """
    kind = rule.program_kind
    support = engine.support(kind)
    if support is None:
        nearest = engine.refusals.get(kind, "none")
        raise InputError(f"{engine.title} cannot run a {kind.name} program ({kind.title}) such as '{rule.name}'; "
                         f"its nearest setting: {nearest}")
    if schedule is not None and not engine.schedule:
        raise InputError(f"{engine.title} takes no per-batch-size schedule", param="schedule")
    if (data is None) != (costs is None):
        raise InputError("tuning needs both a dataset directory and a cost file", param="data" if data is None
                         else "costs")
    if data is None:
        exact = support.exact(rule, None)
        if exact is None:
            raise NeedsData(f"{engine.title} cannot express '{rule.name}' ({kind.title}) exactly; its nearest setting "
                            f"family is {support.nearest}, which a dataset (valid and test splits) and a cost file "
                            f"tune")
        return Written(engine.render(exact, provenance(rule, source, True), schedule), exact, True)
    score = Scorer(rule, data, load_costs(costs))
    gamma = score.gamma
    exact = support.exact(rule, gamma)
    champion_valid, champion_tv = score(rule, TUNE_SPLIT)
    best, best_valid = exact, None
    if exact is None:
        for setting in support.settings(rule, gamma, gamma):
            try:
                rate, tv = score(setting.rule, TUNE_SPLIT)
            except InputError:  # a setting reading a column this data lacks
                continue
            if tv <= champion_tv + TV_SLACK and (best_valid is None or rate > best_valid):
                best, best_valid = setting, rate
        if best is None:
            raise InputError(f"{engine.title}: no setting of {support.nearest} could be scored on {data}")
    else:
        best_valid = score(exact.rule, TUNE_SPLIT)[0]
    rows = [_row("champion", rule.name, champion_valid, score(rule, REPORT_SPLIT))]
    rows.append(_row("best expressible" if exact is None else "exact setting", best.label, best_valid,
                     score(best.rule, REPORT_SPLIT)))
    default = support.default(gamma)
    if default is None or default.rule is None:
        rows.append(Scored("engine default", "no default of this kind", None, None, None))
    else:
        rows.append(_row("engine default", default.label, score(default.rule, TUNE_SPLIT)[0],
                         score(default.rule, REPORT_SPLIT)))
    tuned = "" if exact is not None else (f"{best.label}, tuned on split {TUNE_SPLIT} of {data} under cost file "
                                          f"{costs} by tokens per second (TV per token at most the champion's)")
    notes = (f"scored on {data} under {costs}: tokens per second on {REPORT_SPLIT}, champion "
             f"{rows[0].test:.6g}, this setting {rows[1].test:.6g}",)
    text = engine.render(best, provenance(rule, source, exact is not None, tuned, notes), schedule)
    return Written(text, best, exact is not None, tuple(rows))


#: The end of a schedule's last range: its length holds from the largest batch size listed up to this one.
LAST_BATCH_SIZE = 65536


def tuned_schedule(rule: Rule, directory: str | os.PathLike, costs: str | os.PathLike,
                   requests: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """The per-batch-size schedule of fixed draft lengths 0..gamma (the valid split's draft length) tuned on the valid
    split of ``directory`` under the cost file ``costs`` at the batch sizes ``requests``
    (:func:`evolve.kinds.verify_length.eval_schedule.batch_schedule`; standard verification), as (start, end,
    length) triples from batch size 1, the last range ending at :data:`LAST_BATCH_SIZE`: what
    :func:`engine_config` writes for an engine that takes one.

    Raises: InputError for a ``rule`` whose kind has no draft length (a tree shape: the tree is its size), or a data
    or cost-file error."""
    if not rule.program_kind.reads_gamma:
        raise InputError(f"a {rule.program_kind.name} program ({rule.program_kind.title}) has no draft length to "
                         f"schedule by batch size", param="concurrency")
    model = load_costs(costs)
    valid = EvalData.from_traces(load_split(directory, TUNE_SPLIT))
    ranges = batch_schedule(fixed_length_table(valid, int(valid.block_length or 1), model), requests, model)
    return tuple((r.start, LAST_BATCH_SIZE if r.end is None else r.end, r.length) for r in ranges)


def _row(role: str, label: str, valid: float, test: tuple[float, float]) -> Scored:
    return Scored(role, label, valid, test[0], test[1])


def gap_table(engine: Engine, rows: tuple[Scored, ...], data: Any, costs: Any) -> str:
    """The gap rows as a plain-text table (columns padded, two spaces apart, a dashed rule line), with a caption;
    the TV column only when a row's TV per token is not 0."""
    tv = any(r.tv for r in rows)
    head = ["row", "setting", f"tok/s {TUNE_SPLIT}", f"tok/s {REPORT_SPLIT}"] + ([f"TV/token {REPORT_SPLIT}"] if tv
                                                                                else [])

    def number(v: float | None) -> str:
        return "-" if v is None or not math.isfinite(v) else f"{v:.4g}"

    body = [[r.role, r.setting, number(r.valid), number(r.test)] + ([number(r.tv)] if tv else []) for r in rows]
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    caption = (f"{engine.title}: the champion, the engine's best expressible setting (tuned on {TUNE_SPLIT}) and its "
               f"default, scored on {REPORT_SPLIT} of {data} under cost file {costs}")
    return caption + "\n\n" + "\n".join(lines) + "\n"


__all__ = ["LAST_BATCH_SIZE", "TUNE_SPLIT", "REPORT_SPLIT", "NeedsData", "Scored", "Scorer", "Written", "provenance",
           "engine_config", "gap_table", "tuned_schedule"]
