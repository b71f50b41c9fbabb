"""A policy exported into an engine's own loop, priced there first: ``python -m evolve export CHAMPION --to
llama-cpp-python --data DIR --costs FILE``.

A champion evolved under one cost file (the project's backend, another machine) can lose in the engine a user
deploys in: there a target call over T tokens, a drafted token and plain decoding cost what that engine's own loop
makes them cost (``benchmark.py perf --write-costs FILE --engine NAME``, :mod:`evolve.perf.engine_loop`). So the
champion is re-scored under the engine's cost file (at the dataset's mean context where the file was timed at two:
:func:`evolve.harvest.context.at_dataset_context`) on the dataset's valid and test splits (the kind's own exact
scorer, :class:`evolve.export.engines.deploy.Scorer`), beside the settings the same module can run instead: plain
decoding (``fixed_gamma:gamma=0``, a draft model that drafts nothing) and every fixed draft length up to the
champion's run's gamma (``fixed_gamma:gamma=G``, :mod:`heuristics.length_policies`). The fastest on valid by
tokens per second is written; where that is not the champion the module's docstring says which setting was written,
why, and by how much, and the table printed beside it gives every candidate on valid and test. Never a
configuration predicted to lose to another that the module can run.

A cost file timed in another engine's loop, or on one of the project's backends (its ``engine`` key: ``torch``,
``llama_cpp``), is refused in one line naming both engines (:func:`check_cost_engine`); a file that names no engine
(written by hand, e.g. for hardware one does not have) is taken as the user's statement of the engine's costs.
"""
from __future__ import annotations

from dataclasses import dataclass

from evolve.errors import InputError
from evolve.eval.costs import load_costs, loop_engine
from evolve.harvest.context import at_dataset_context
from evolve.export.engines.deploy import REPORT_SPLIT, TUNE_SPLIT, Scored, Scorer, _number, _table
from heuristics.contract import Rule
from heuristics.length_policies import fixed_gamma


@dataclass(frozen=True)
class Priced:
    """What :func:`priced_policy` chose: the ``rule`` written, the ``rows`` (every candidate on valid and test, in
    tokens per second under the cost file), ``plain`` (plain decoding's tokens per second there), ``notes`` (for the
    module's docstring: why this setting) and ``context`` (the tokens of context the calls are priced at, the
    dataset's mean; None for a file timed at one context)."""

    rule: Rule
    rows: tuple[Scored, ...]
    plain: float
    notes: tuple[str, ...]
    context: float | None = None


def check_cost_engine(path, costs, target: str, own_loop: bool = True) -> None:
    """Refuse (InputError, one line naming the file and both engines, parameter ``costs``) a cost file timed in an
    engine other than ``target``: an engine loop's file (:func:`evolve.eval.costs.loop_engine`) of another engine, or,
    with ``own_loop`` (a draft-model target, whose module runs in the engine's own loop), any other file that names
    an engine (the project's backends' files, their ``engine`` key). Without ``own_loop`` (the engines whose exports
    are configurations, :mod:`evolve.export.engines.deploy`, transformers' included) a backend's file stands for the
    engine's costs, as their tuning has always read it."""
    timed = loop_engine(costs)
    named = costs.extra.get("engine")
    if timed == target or (timed is None and (not own_loop or not isinstance(named, str))):
        return
    from evolve.engine.backends import backend_names

    where = (f"{timed}'s own loop" if timed is not None else f"this project's {named} backend"
             if named in backend_names() else f"'{named}' (its engine key), not in {target}'s own loop")
    raise InputError(f"{path}: timed in {where}, but the export is for {target}, whose loop costs differ; time a "
                     f"cost file in {target}'s own loop (benchmark.py perf, engine {target})", param="costs")


def priced_policy(rule: Rule, data: str, costs_path: str, gamma: int | None, target: str) -> Priced:
    """Score ``rule`` (a verification-length policy) and the settings its module can run instead under the cost file
    ``costs_path`` of ``target`` on the dataset ``data`` (module doc), at the draft length ``gamma`` (the champion's
    run's; None: the valid split's block length). Returns the :class:`Priced` choice.

    Raises: InputError as :func:`check_cost_engine`, :func:`evolve.eval.costs.load_costs` and the kind's scorer."""
    costs = load_costs(costs_path)
    check_cost_engine(costs_path, costs, target)
    costs = at_dataset_context(costs, data)
    score = Scorer(rule, data, costs, gamma)
    candidates = [(rule, "champion")] + [(fixed_gamma(g), "plain decoding" if g == 0 else "fixed length")
                                         for g in range(score.gamma + 1)]
    rows, valid = [], []
    for cand, role in candidates:
        v = score(cand, TUNE_SPLIT)[0]
        t = score(cand, REPORT_SPLIT)
        valid.append(v)
        rows.append(Scored(role, cand.name, v, t[0], t[1]))
    best = max(range(len(candidates)), key=lambda i: (valid[i], i == 0))  # the champion wins a tie
    plain = 1.0 / costs.plain_token_s
    chosen = candidates[best][0]
    at = costs.priced_context
    notes = [f"priced in {target} under cost file {costs_path}"
             + (f" at {at:.0f} tokens of context (the dataset's mean)" if at is not None else "")
             + f" on {data}: tokens per second on {TUNE_SPLIT} / "
             f"{REPORT_SPLIT}: champion {rows[0].valid:.4g} / {rows[0].test:.4g}, plain decoding {plain:.4g}"]
    if best != 0:
        notes.append(f"written: {chosen.name} in place of the champion '{rule.name}', which is predicted "
                     f"{valid[best] / valid[0]:.3f}x slower than it on {TUNE_SPLIT} in {target}"
                     + (" (plain decoding: decoding without the module does the same)" if chosen.name.endswith("=0")
                        else ""))
    marked = tuple(Scored(r.role + (" (written)" if i == best else ""), r.setting, r.valid, r.test, r.tv)
                   for i, r in enumerate(rows))
    return Priced(chosen, marked, plain, tuple(notes), at)


def priced_table(priced: Priced, target: str, data: str, costs_path: str) -> str:
    """The candidates of ``priced`` as a plain-text table with a caption (tokens per second under the cost file, and
    the speedup over plain decoding on test)."""
    head = ["row", "setting", f"tok/s {TUNE_SPLIT}", f"tok/s {REPORT_SPLIT}", f"speedup {REPORT_SPLIT}"]
    body = [[r.role, r.setting, _number(r.valid), _number(r.test), f"{r.test / priced.plain:.3f}x"]
            for r in priced.rows]
    at = "" if priced.context is None else f" at {priced.context:.0f} tokens of context (the dataset's mean)"
    caption = (f"{target}: the champion and the settings its module can run instead, priced under cost file "
               f"{costs_path}{at} (plain decoding {priced.plain:.4g} tokens/s) on {TUNE_SPLIT} and {REPORT_SPLIT} of "
               f"{data}; the fastest on {TUNE_SPLIT} is written")
    return caption + "\n\n" + _table(head, body)


__all__ = ["Priced", "check_cost_engine", "priced_policy", "priced_table"]
