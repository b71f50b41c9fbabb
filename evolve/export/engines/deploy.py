"""A champion written for an engine: exactly where the engine can express it, else the engine's best expressible
setting tuned on the valid split, with the gap on the test split (champion, best expressible, engine default).

:func:`engine_config` asks the engine for the champion's kind (:meth:`evolve.export.engines.base.Engine.support`);
an engine without an entry for the kind refuses in one line naming its nearest setting. Without data an exact
setting is written or the champion is refused (:class:`NeedsData`: which engine cannot express it, the nearest
setting family, and that a dataset and a cost file tune it). With a dataset directory (valid and test splits) and a
cost file every expressible setting is scored on the valid split with the kind's own exact scorer (its ``score``
hook, :class:`evolve.kinds.base.KindHooks`, the one :func:`evolve.api.evaluate_rule` runs) under the cost file, the
best by tokens per second is kept (for a lossy champion, among the settings whose TV per token on valid is at most
the champion's), and the champion, that setting, the engine's default and plain decoding are scored on the test
split. Never a configuration predicted to lose: where the setting kept (the champion's exact setting, or the best
expressible) is predicted slower on the valid split than plain decoding (the cost file's ``plain_token_s``), plain
decoding (:data:`PLAIN`, no speculative setting) is written in its place and the file says which setting it replaced
and by how much (a per-batch-size schedule, which holds its own lengths, is written with that said instead).

Tokens per second: the kind's own when its metrics have it (verification-length policies, tree shapes); else (per-token
thresholds, relaxation weights, scored per block of the data's draft length gamma) tokens per call over the seconds of
one step drafting and verifying gamma tokens (:meth:`evolve.eval.costs.Costs.step_seconds`).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.errors import InputError
from evolve.eval.costs import Costs, load_costs
from evolve.harvest.context import at_dataset_context
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData
from evolve.engine.drafter_base import EngineFamily
from evolve.export.engines.base import UNKNOWN_DRAFTER, Drafter, Engine, Provenance, Schedule, Setting
from evolve.traces.io import load_metadata, load_split
from heuristics.champions import read_champion
from evolve.kinds.base import KindContext
from heuristics.contract import Rule

#: The split settings are tuned on, and the one the gap is reported on.
TUNE_SPLIT, REPORT_SPLIT = "valid", "test"
#: Slack of the TV budget (a setting may exceed the champion's TV per token by this much, rounding).
TV_SLACK = 1e-12
#: Plain decoding, which every engine runs (no speculative setting at all; its tokens per second the cost file's
#: ``plain_token_s``): written where the best setting an engine can express is predicted slower.
PLAIN = Setting("plain", None, {})
#: Relative tolerance of "slower than plain decoding" (a setting that drafts nothing scores plain decoding's rate up
#: to rounding).
PLAIN_TOLERANCE = 1e-9


class NeedsData(InputError):
    """An engine cannot express a champion exactly and no dataset and cost file were given to tune its nearest
    setting (the command line names its options)."""


@dataclass(frozen=True)
class Scored:
    """A row of the gap table: its ``role`` (champion, best expressible, engine default, plain decoding), the
    ``setting`` label, tokens per second on valid and test (None: not scored) and TV per token on test."""

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
    score hook with the draft length ``gamma`` (None: the valid split's block length; a champion's run's gamma, which
    the command gives), its blocks weighted as ``rule``'s run weighted them; each split is loaded once.

    Raises: InputError as the kind's score hook or :func:`evolve.traces.io.load_split`, and naming the dataset when
    ``gamma`` exceeds the valid split's block length.
    """

    def __init__(self, rule: Rule, directory: str | os.PathLike, costs: Costs, gamma: int | None = None):
        self.directory, self.costs = directory, costs
        self.hook = rule.program_kind.hook("score", "python -m evolve export", f"rule '{rule.name}'")
        self.settings = rule.program_kind.settings(**dict(rule.settings))  # the champion's run's own settings
        self.data: dict[str, EvalData] = {}
        block = int(self.split(TUNE_SPLIT).block_length or 1)
        if gamma is not None and gamma > block:
            raise InputError(f"{directory}: its blocks hold at most {block} drafts, fewer than the champion's run's "
                             f"gamma {gamma}")
        self.gamma = block if gamma is None else int(gamma)

    def split(self, name: str) -> EvalData:
        """The split ``name`` as :class:`evolve.eval.evaluator.EvalData` (loaded on first use)."""
        if name not in self.data:
            self.data[name] = EvalData.from_traces(load_split(self.directory, name))
        return self.data[name]

    def __call__(self, rule: Rule, split: str) -> tuple[float, float]:
        """(tokens per second, TV per token) of ``rule`` on ``split``, scored for the champion's run: the kind's score
        hook is given the champion's own run settings (:attr:`evolve.kinds.base.KindContext.settings`; a
        verification-length setting then weights its blocks as the champion's run did)."""
        m = self.hook(rule, KindContext(lambda: self.split(split), AcceptanceQualityFitness(), self.gamma, self.costs,
                                        self.settings, directory=self.directory, split=split))
        rate = getattr(m, "tokens_per_second", None)
        if rate is None:
            rate = m.tokens_per_call / self.costs.step_seconds(self.gamma, self.gamma)
        tv = getattr(m, "tv_per_token", None)
        return float(rate), float(tv or 0.0)


def provenance(rule: Rule, source: str, exact: bool, tuned: str = "", notes: tuple[str, ...] = (),
               drafter: Drafter = UNKNOWN_DRAFTER, length: int | None = None) -> Provenance:
    """The :class:`evolve.export.engines.base.Provenance` of ``rule`` read from ``source``, drafted by ``drafter``,
    scored at the draft length ``length``."""
    return Provenance(rule.name, rule.expression or "", source, rule.kind, exact, tuned, notes, drafter, length)


def scored_length(source: str, gamma: int | None) -> int | None:
    """The draft length a champion read from ``source`` was scored at: ``gamma`` (its run's, as the run context
    reads it) when given, else the ``gamma`` its champion file's run configuration records (a run whose objective
    reads no blocks still records the length its block metrics were computed at), else None."""
    if gamma is not None:
        return int(gamma)
    if not Path(source).is_file():
        return None
    prov = read_champion(source).provenance or {}
    config = prov.get("config") if isinstance(prov.get("config"), dict) else {}
    recorded = config.get("gamma")
    return recorded if type(recorded) is int and recorded >= 1 else None


def _drafter_of(harvest: Any, path: str, key: str) -> Drafter | None:
    """The :class:`evolve.export.engines.base.Drafter` of a harvest's config (key ``key`` of the file ``path``:
    ``config`` of a dataset's metadata, ``provenance.data.generator_config`` of a champion file), or None when it
    names none. A prompt-lookup drafter's n-gram lengths are its ``max`` and ``min`` (:mod:`evolve.engine.ngram`);
    absent, the drafter has none (:attr:`Drafter.ngram` None).

    Raises: InputError naming the file and the key for lengths an engine would refuse (not integers, below 1, or
    the shortest above the longest)."""
    if not isinstance(harvest, dict) or not isinstance(harvest.get("drafter"), dict):
        return None
    found = harvest["drafter"]
    drafter = Drafter(found.get("kind") if isinstance(found.get("kind"), str) else "")
    if not drafter.lookup or (found.get("max") is None and found.get("min") is None):
        return drafter
    longest, shortest = found.get("max"), found.get("min")
    for name, value in (("max", longest), ("min", shortest)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{path}: key '{key}.drafter.{name}' is {value!r}, not an n-gram length >= 1")
    if shortest > longest:
        raise InputError(f"{path}: key '{key}.drafter': the shortest n-gram ({shortest}) exceeds the longest "
                         f"({longest})")
    return Drafter(drafter.kind, (int(longest), int(shortest)))


def harvest_drafter(source: str, data: str | os.PathLike | None = None) -> Drafter:
    """The drafter the champion's harvest drafted with: from the champion file's provenance
    (``provenance.data.generator_config.drafter``) and, with a dataset ``data``, from its ``metadata.json``
    (``config.drafter``); unknown (an empty :class:`evolve.export.engines.base.Drafter`) when neither says.

    Raises: InputError naming both when the champion's harvest and the dataset's drafted differently (the settings
    tuned on the dataset would be written for another drafter), naming the file and key for a lookup's n-gram
    lengths an engine would refuse, or as :func:`evolve.traces.io.load_metadata`."""
    own = None
    if Path(source).is_file():
        prov = read_champion(source).provenance or {}
        own = _drafter_of((prov.get("data") or {}).get("generator_config") if isinstance(prov.get("data"), dict)
                          else None, source, "provenance.data.generator_config")
    tuned = (_drafter_of(load_metadata(data).get("config"), str(Path(data) / "metadata.json"), "config")
             if data is not None else None)
    if own is not None and tuned is not None and own.kind != tuned.kind:
        raise InputError(f"the champion {source} was harvested with drafter '{own.kind}' and the dataset {data} with "
                         f"'{tuned.kind}': tune it on a dataset of its own drafter", param="data")
    return own or tuned or UNKNOWN_DRAFTER


def engine_config(rule: Rule, source: str, engine: Engine, data: str | os.PathLike | None = None,
                  costs: str | os.PathLike | None = None, schedule: Schedule | None = None,
                  drafter: Drafter = UNKNOWN_DRAFTER, gamma: int | None = None) -> Written:
    """``rule`` (an expression rule read from ``source``) written for ``engine`` (see the module doc).

    Args: ``data`` a dataset directory with valid and test splits (and tree tables for a tree shape), ``costs`` a
    cost file (both or neither); ``gamma`` the draft length the tuning scores at (the champion's run's; None: the
    valid split's block length, :class:`Scorer`); ``schedule``: (start, end, length) triples for an engine that takes a
    per-batch-size schedule (:attr:`evolve.export.engines.base.Engine.schedule`); ``drafter`` the harvest's drafter
    (:func:`harvest_drafter`), which the written file drafts with.

    Raises: InputError when the engine cannot run the rule's kind (naming its nearest setting), for only one of
    ``data`` and ``costs``, a schedule for an engine without one, or a data or cost-file error; :class:`NeedsData`
    when the rule is not exact and no data was given.
    """
    kind = rule.program_kind
    support = engine.support(kind)
    if support is None:
        nearest = engine.refusals.get(kind, "none")
        raise InputError(f"{engine.title} {engine.version} cannot run a {kind.name} program ({kind.title}) such as "
                         f"'{rule.name}'; its nearest setting: {nearest}")
    if schedule is not None and not engine.schedule:
        raise InputError(f"{engine.title} takes no per-batch-size schedule", param="schedule")
    if drafter.family is EngineFamily.SUFFIX and engine.capabilities.suffix is None:
        raise InputError(f"{engine.title} {engine.version} has no suffix decoding, which '{rule.name}''s harvest "
                         f"drafted with; nearest setting: its prompt lookup (a prompt-lookup harvest, then that "
                         f"engine's fixed draft length), or vLLM's method suffix; the policy itself, suffix decoding "
                         f"included, runs as a module inside transformers' or llama-cpp-python's own loop (the "
                         f"export targets transformers-generate and llama-cpp-python)")
    if (data is None) != (costs is None):
        raise InputError("tuning needs both a dataset directory and a cost file", param="data" if data is None
                         else "costs")
    suffix = drafter.family is EngineFamily.SUFFIX  # the engine's suffix method picks its own match: tuned, not exact
    if data is None:
        exact = None if suffix else support.exact(rule, None)
        if exact is None:
            raise NeedsData(f"{engine.title} {engine.version} cannot express '{rule.name}' ({kind.title}) exactly; "
                            f"its nearest setting family is {support.nearest}, which a dataset (valid and test "
                            f"splits) and a cost file tune")
        return Written(engine.render(exact, provenance(rule, source, True, drafter=drafter,
                                                       length=scored_length(source, gamma)), schedule), exact, True)
    score = Scorer(rule, data, at_dataset_context(load_costs(costs), data), gamma)
    gamma = score.gamma
    exact = None if suffix else support.exact(rule, gamma)
    champion_valid, champion_tv = score(rule, TUNE_SPLIT)
    best, best_valid = exact, None
    if exact is None:
        candidates = _drafted_as(support.settings(rule, gamma, gamma), drafter)
        if suffix and not any(c.family is EngineFamily.SUFFIX for c in candidates):
            raise InputError(f"{engine.title} {engine.version} expresses no {kind.title} with suffix decoding, which "
                             f"'{rule.name}''s harvest drafted with (its suffix method drafts a chain by its own "
                             f"knobs); nearest setting: those knobs, tuned by exporting a verify-length champion of a "
                             f"suffix-decoding chain harvest")
        for setting in candidates:
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
    rows.append(_row("best expressible" if exact is None else "exact setting", _shown(best), best_valid,
                     score(best.rule, REPORT_SPLIT)))
    default = support.default(gamma)
    if default is None or default.rule is None:
        rows.append(Scored("engine default", "no default of this kind", None, None, None))
    else:
        rows.append(_row("engine default", _shown(default), score(default.rule, TUNE_SPLIT)[0],
                         score(default.rule, REPORT_SPLIT)))
    tuned = "" if exact is not None else (f"{best.label}, tuned on split {TUNE_SPLIT} of {data} under cost file "
                                          f"{costs} by tokens per second (TV per token at most the champion's)")
    notes = (f"scored on {data} under {costs}: tokens per second on {REPORT_SPLIT}, champion "
             f"{rows[0].test:.6g}, this setting {rows[1].test:.6g}",)
    plain = 1.0 / score.costs.plain_token_s
    slower = best_valid < plain * (1 - PLAIN_TOLERANCE)  # a fixed length 0 scores plain decoding's rate, rounded
    if slower and schedule is None:  # never a configuration predicted to lose: plain decoding written in its place
        notes = (f"written: plain decoding in place of {best.label}, the best setting {engine.title} can express "
                 f"for '{rule.name}', which is predicted {plain / best_valid:.3f}x slower than plain decoding under "
                 f"cost file {costs} on {TUNE_SPLIT} ({best_valid:.6g} against {plain:.6g} tokens per second); "
                 f"champion on {REPORT_SPLIT}: {rows[0].test:.6g}",)
        tuned = (f"plain decoding: {best.label}, the best setting {engine.title} can express for the champion, is "
                 f"predicted slower under cost file {costs} on split {TUNE_SPLIT} of {data}")
        best, exact = PLAIN, None
    elif slower:  # a per-batch-size schedule holds its own lengths: the file says where it loses
        notes += (f"predicted slower than plain decoding under this cost file ({best_valid:.6g} against "
                  f"{plain:.6g} tokens per second on {TUNE_SPLIT}): deploy without speculation",)
    rows.append(Scored("plain decoding" + (" (written)" if best is PLAIN else ""), PLAIN.label, plain, plain, 0.0))
    text = engine.render(best, provenance(rule, source, exact is not None, tuned, notes, drafter, gamma), schedule)
    return Written(text, best, exact is not None, tuple(rows))


def _drafted_as(settings: list[Setting], drafter: Drafter) -> list[Setting]:
    """The settings that draft as the harvest did: with a suffix-decoding harvest those of the engine's suffix method
    (and plain decoding); with another, those that name no drafter family of their own."""
    if drafter.family is EngineFamily.SUFFIX:
        return [s for s in settings if s.family is EngineFamily.SUFFIX or not s.knobs]
    return [s for s in settings if s.family is None]


def _shown(setting: Setting) -> str:
    """A gap-table label: the setting's, marked with an asterisk when the engine runs it as written only under a
    condition (the file says which; :func:`gap_table` explains the mark)."""
    return setting.label + ("*" if setting.note else "")


def tuned_schedule(rule: Rule, directory: str | os.PathLike, costs: str | os.PathLike,
                   requests: tuple[int, ...]) -> tuple[Schedule, Any]:
    """The per-batch-size schedule of ``python -m evolve export --concurrency`` from the kind's ``schedule`` hook
    (:class:`evolve.kinds.base.KindHooks`): (start, end, length) triples tuned on the valid split of ``directory``
    under the cost file ``costs`` at the batch sizes ``requests``, and its price ``throughput(length, batch size)``
    -> tokens per second on valid.

    Raises: InputError for a kind without one (a tree shape: the tree is its size), or a data or cost-file error."""
    hook = rule.program_kind.hooks().schedule
    if hook is None:
        raise InputError(f"a {rule.program_kind.name} program ({rule.program_kind.title}) has no draft length to "
                         f"schedule by batch size", param="concurrency")
    return hook(rule, directory, costs, requests)


def schedule_table(engine: Engine, text: str, schedule: Schedule, requests: tuple[int, ...], throughput: Any) -> str:
    """The schedule as the engine runs it: at each batch size of ``requests``, the length tuned, the length the
    engine reads from the written ``text`` (:attr:`evolve.export.engines.base.Engine.schedule_length`) and the tokens
    per second on valid of the length it runs (``throughput(length, batch size)``), with a caption."""
    head = ["batch size", "length tuned", "length run", "tok/s valid"]
    body = []
    for r in sorted(set(requests)):
        tuned = next(length for start, end, length in schedule if start <= r <= end)
        run = engine.schedule_length(text, r) if engine.schedule_length is not None else tuned
        body.append([str(r), str(tuned), str(run), _number(throughput(run, r))])
    caption = (f"{engine.title} {engine.version}: the per-batch-size schedule as the engine reads the written file "
               f"(tuned on {TUNE_SPLIT}), in place of one length")
    return caption + "\n\n" + _table(head, body)


def _row(role: str, label: str, valid: float, test: tuple[float, float]) -> Scored:
    return Scored(role, label, valid, test[0], test[1])


def _number(v: float | None) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v:.4g}"


def _table(head: list[str], body: list[list[str]]) -> str:
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def gap_table(engine: Engine, rows: tuple[Scored, ...], data: Any, costs: Any) -> str:
    """The gap rows as a plain-text table (columns padded, two spaces apart, a dashed rule line), with a caption;
    the TV column only when a row's TV per token is not 0, the speedup over plain decoding on the test split when a
    plain decoding row is there (:func:`engine_config` adds it: the cost file's ``plain_token_s``); a setting marked
    ``*`` runs as written only under the condition its file states (a footer says so); plain decoding written in
    place of the best expressible setting, or a schedule predicted slower than plain decoding, is named in a footer,
    as the file's notes name it."""
    plain = next((r for r in rows if r.role.startswith("plain decoding")), None)
    tv = any(r.tv for r in rows)
    head = (["row", "setting", f"tok/s {TUNE_SPLIT}", f"tok/s {REPORT_SPLIT}"] + ([f"TV/token {REPORT_SPLIT}"] if tv
                                                                                  else [])
            + ([f"speedup {REPORT_SPLIT}"] if plain is not None else []))
    body = [[r.role, r.setting, _number(r.valid), _number(r.test)] + ([_number(r.tv)] if tv else [])
            + ([_speedup(r.test, plain.test)] if plain is not None else []) for r in rows]
    caption = (f"{engine.title} {engine.version}: the champion, the engine's best expressible setting (tuned on "
               f"{TUNE_SPLIT}), its default and plain decoding, scored on {REPORT_SPLIT} of {data} under cost file "
               f"{costs}")
    footer = ("\n* runs as priced only under the condition the written file states (its header)\n"
              if any(r.setting.endswith("*") for r in rows) else "")
    if plain is not None and plain.role.endswith("(written)"):
        footer += (f"\nplain decoding written: the best setting {engine.title} can express for the champion is "
                   f"predicted slower than plain decoding on {TUNE_SPLIT} under this cost file "
                   f"({_number(plain.valid)} tokens/s): deploy without speculation (the file says so)\n")
    elif plain is not None and rows[1].valid is not None and rows[1].valid < plain.valid * (1 - PLAIN_TOLERANCE):
        footer += (f"\nplain decoding under this cost file: {_number(plain.valid)} tokens/s, faster than the written "
                   f"setting on {TUNE_SPLIT}: deploy without speculation (the file says so)\n")
    return caption + "\n\n" + _table(head, body) + footer


def _speedup(rate: float | None, plain: float | None) -> str:
    return "-" if rate is None or not plain or not math.isfinite(rate) else f"{rate / plain:.3f}x"


__all__ = ["TUNE_SPLIT", "REPORT_SPLIT", "PLAIN", "NeedsData", "Scored", "Scorer", "Written", "provenance", "harvest_drafter",
           "engine_config", "gap_table", "schedule_table", "tuned_schedule"]
