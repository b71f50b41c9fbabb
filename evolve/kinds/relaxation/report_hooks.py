"""What a relaxation weight does in the commands: ``benchmark.py``'s rows (relaxed block verification), the
simulator's sweep and ``trees``' rows (the kind's report hooks, :mod:`evolve.kinds.relaxation.plugin`; live decoding
is :mod:`evolve.kinds.relaxation.live`, ``benchmark.py pareto`` :mod:`evolve.kinds.relaxation.pareto`)."""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import EvalData, thresholds
from evolve.kinds.base import KindContext
from evolve.kinds.relaxation import KIND
from evolve.eval.relaxed_block import RelaxedMetrics, attach, relaxed_of
from evolve.kinds.relaxation.eval_population import evaluate_relaxed
from evolve.eval.tree_scoring import ShapeData, require_relaxable, shape_metrics
from evolve.commands.compare.table import DEFAULT_REPEATS, KindScorer
from evolve.commands.options import naming_param
from evolve.commands.simulate import SimulateOptions, SweepPlan, block_only, options_verification
from evolve.report.trees import tree_row
from evolve.sim.verification import Verification
from evolve.traces.io import Traces
from evolve.traces.tree_tables import RELAX_GRID
from heuristics.contract import Rule


def timed_relaxed(rule: Rule, data: EvalData, repeats: int = DEFAULT_REPEATS, gamma: int = 1,
                  costs: Costs = DEFAULT_COSTS) -> tuple[RelaxedMetrics, float]:
    """Relaxed block verification's metrics of a relaxation rule (the weight w) on ``data`` and the best wall
    time of one evaluation in milliseconds (one untimed warm-up, then ``repeats`` timed ones).

    Scored by the relaxation kind's population scorer, the one the search scores its programs with
    (:func:`evolve.kinds.relaxation.eval_population.evaluate_relaxed`; weights NaN/inf -> 0, clamped to [0, 1]), so
    a run's champion gets here exactly the figures its ``champion.json`` records for the same split and
    gamma: tokens per call 1 + E[tau] per block with draft length ``gamma``, speedup under ``costs``,
    TV per emitted token the expected sum of w_i (1 - overlap_i) over the emitted positions (block
    verification, Sun et al. 2024, arXiv 2403.10444, against (1 - w) p + w q). The split's block columns
    must be attached (:func:`evolve.eval.relaxed_block.attach`) or in its split file.
    Raises: InputError for a column the split lacks or a gamma above its block length.
    """
    def run() -> RelaxedMetrics:
        return evaluate_relaxed([rule.program], data, gamma, costs)[0]

    metrics = run()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return metrics, best * 1e3


def relaxed_missing_columns(rule: Rule, data: EvalData, traces: Traces | None = None) -> list[str]:
    """Columns a relaxation rule needs (its own and :data:`evolve.kinds.relaxation.KIND` ``.columns``, the
    block columns of relaxed block verification) that the split lacks; ``traces`` is the split's columns
    (None: only ``data`` and, for the block columns, its split file are consulted)."""
    have = set(data.available) | (set(traces.columns) if traces is not None else set())
    if traces is None:
        try:
            relaxed_of(data)
            have |= set(KIND.columns)
        except InputError:
            pass
    return [c for c in dict.fromkeys((*rule.columns_needed, *KIND.columns)) if c not in have]


def scores(rule: Rule, context: KindContext, traces: Traces | None, repeats: int):
    """A relaxation rule: relaxed block verification's block metrics alone (:func:`timed_relaxed`), with the
    split's gamma; the per-token columns stay empty as for the ``block_verification`` row."""
    data = context.split_data()
    if traces is not None:
        attach(data, traces)
    metrics, ms = timed_relaxed(rule, data, repeats, context.gamma, context.costs)
    return {"metrics": None, "verifier": metrics, "records": data.n}, ms


COMPARE = KindScorer(relaxed_missing_columns, scores)
#: What ``benchmark.py``'s caption says about relaxation rows.
CAPTION = ("{names}: relaxation weight w, scored as relaxed block verification: block verification"
           " (Sun et al. 2024, arXiv 2403.10444) against (1 - w) p + w q with the split's gamma, TV/tok ="
           " expected sum of w (1 - overlap) over the emitted positions per emitted token; no per-token"
           " threshold (-).")


def simulate_plan(rule, o: SimulateOptions, gamma: int) -> SweepPlan:
    """A relaxation rule (the weight w of a relaxation champion): block verification against (1 - w) p + w q
    with the standard rule underneath, w = the rule's expression; ``--verify token|fly`` and
    ``--relaxation`` are refused (the champion is the relaxation)."""
    from heuristics.contract import STANDARD_RULE
    what = f"rule '{rule.name}' (a relaxation weight w)"
    block_only(what, o)
    if o.relaxation is not None:
        raise InputError(f"{what} is the relaxation itself; give no other relaxation with it "
                         f"(value {o.relaxation!r})", param="relaxation")
    options_verification(o, gamma, verify="block")  # FLy options are refused as for --verify block
    verification = naming_param("champion" if o.champion is not None else "rule_name",
                                Verification("block", relaxation=rule.expression).check, gamma)
    return SweepPlan(STANDARD_RULE, verification, rule.name,
                     f"relaxation champion {rule.name}: block verification against (1 - w) p + w q, "
                     f"w = {rule.expression}")


def tree_rows(split: str, name: str, program, d: ShapeData, tune: ShapeData,
              costs: Costs) -> list[dict[str, Any]]:
    """The relaxation champion's row (every harvested tree, SpecInfer against the mixture) and the fixed-w row at
    the largest grid w whose TV per token on ``tune`` is at most the champion's there."""
    require_relaxable(d)
    require_relaxable(tune)
    every = np.full(d.decisions.n, np.inf)
    trees, fixed_trees = np.zeros((d.trees, 2)), np.zeros((d.trees, 2))
    m = shape_metrics(every, d, costs, relaxation=thresholds(program, d.contexts), per_tree=trees)
    budget_tv = shape_metrics(np.full(tune.decisions.n, np.inf), tune, costs,
                              relaxation=thresholds(program, tune.contexts)).tv_per_token
    fixed = [w for w in RELAX_GRID
             if shape_metrics(np.full(tune.decisions.n, np.inf), tune, costs,
                              relaxation=np.full(tune.decisions.n, w)).tv_per_token <= budget_tv + 1e-15]
    w = max(fixed)
    f = shape_metrics(every, d, costs, relaxation=np.full(d.decisions.n, w), per_tree=fixed_trees)
    return [tree_row(split, name, "champion", "relaxation, whole tree", m, trees),
            tree_row(split, "fixed_w", "relaxation", f"w={w:g} (TV <= {name}'s on {tune.table.split or 'tune'})", f,
                 fixed_trees)]


__all__ = ["COMPARE", "CAPTION", "timed_relaxed", "relaxed_missing_columns", "scores", "simulate_plan", "tree_rows"]
