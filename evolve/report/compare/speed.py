"""Tokens per second in ``benchmark.py``: rows under a cost file, and the verification-length rows.

Under a cost file (``--costs FILE``, :mod:`evolve.eval.costs`) every row with block metrics gets
``tokens_per_second`` = tokens per call / seconds per call, the seconds of a fixed draft length
gamma being ``target_forward_s(gamma + 1) + gamma * draft_token_s``, and its ``speedup`` becomes
tokens per second times ``plain_token_s`` (the default cost model gives the evaluator's speedup
exactly). A verification-length policy (kind ``verify-length``, :mod:`evolve.eval.verify_length`)
is scored by its own expected seconds per call, and three competitors follow the rules of a split
with ``draft_index`` (rows of kind ``policy``): ``best_fixed_gamma`` and ``confidence_threshold``
(their setting tuned on the valid split when the dataset has one, else on the scored split; the
setting is in the row's ``expression``) and ``survival_prefix``.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Sequence

from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData
from evolve.eval.verify_length import LengthPopulationEvaluator, competitors
from evolve.gp.kinds import VERIFY_LENGTH
from evolve.report.compare.rows import Row
from heuristics.contract import Rule

#: Kind of the competitor rows.
POLICY = "policy"
#: The competitor rows, in order.
COMPETITORS: tuple[str, ...] = ("best_fixed_gamma", "confidence_threshold", "survival_prefix")


def with_costs(row: Row, costs: Costs) -> Row:
    """``row`` with ``tokens_per_second`` and the cost file's ``speedup`` (rows scored at a fixed gamma; a
    verification-length row already has both)."""
    tpc = row.value("tokens_per_call")
    if tpc is None or row.gamma is None or row.value("tokens_per_second") is not None:
        return row
    tps = tpc / costs.fixed_gamma_seconds(row.gamma)
    return dataclasses.replace(row, tokens_per_second=tps, cost_speedup=tps * costs.plain_token_s)


def length_scores(rule: Rule, data: EvalData, repeats: int, gamma: int, costs: Costs) -> tuple[dict, float]:
    """A verification-length policy's row fields (its :class:`evolve.eval.verify_length.LengthMetrics` as the
    row's block metrics) and best time of ``repeats`` scorings in ms."""
    scorer = LengthPopulationEvaluator(data, gamma=gamma, cache_size=0, costs=costs)
    metrics = scorer.evaluate([rule.program])[0]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        LengthPopulationEvaluator(data, gamma=gamma, cache_size=0, costs=costs).evaluate([rule.program])
        best = min(best, time.perf_counter() - t0)
    return {"metrics": None, "verifier": metrics, "records": data.n}, best * 1e3


def competitor_rows(data: EvalData, gamma: int | None, costs: Costs, tuned_on: EvalData | None,
                    tuned_name: str) -> list[Row]:
    """The three competitor rows of one split (none without block metrics)."""
    if gamma is None or data.depth is None:
        return []
    t0 = time.perf_counter()
    found = competitors(data, gamma, costs, tuned_on)
    ms = (time.perf_counter() - t0) * 1e3
    rows = []
    for name in COMPETITORS:
        setting, metrics = found[name]
        where = f" (tuned on {tuned_name})" if setting else ""
        rows.append(Row(name, POLICY, data.split, data.source, None, ms, expression=f"{setting}{where}" or None,
                        gamma=gamma, verifier=metrics, records=data.n, program_kind=VERIFY_LENGTH.name))
    return rows


def apply_costs(rows: Sequence[Row], costs: Costs) -> list[Row]:
    """Every row :func:`with_costs`."""
    return [with_costs(r, costs) for r in rows]


__all__ = ["POLICY", "COMPETITORS", "with_costs", "length_scores", "competitor_rows", "apply_costs"]
