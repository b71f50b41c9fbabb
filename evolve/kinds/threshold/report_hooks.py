"""What a threshold does in the commands: ``benchmark.py``'s rows, the simulator's sweep, live decoding and
``pareto --rule``'s one-point curve (the kind's report hooks, :mod:`evolve.kinds.threshold.plugin`)."""
from __future__ import annotations

from typing import Sequence

from evolve.eval.evaluator import EvalData
from evolve.kinds.base import KindContext
from evolve.commands.compare.table import KindScorer, missing_columns, timed_evaluate
from evolve.commands.options import naming_param
from evolve.commands.pareto.command import evolved_curve, rule_curve
from evolve.commands.simulate import SimulateOptions, SweepPlan, options_verification
from evolve.sim.decoding import check_verification
from evolve.live.decoding import ChainDecoder, tokenwise_decoder
from evolve.traces.io import Traces
from heuristics.contract import Rule


def scores(rule: Rule, context: KindContext, traces: Traces | None, repeats: int):
    """A threshold rule: its :class:`evolve.eval.evaluator.Metrics` (:func:`timed_evaluate`)."""
    metrics, ms = timed_evaluate(rule, context, repeats)
    return {"metrics": metrics}, ms


COMPARE = KindScorer(lambda rule, data, traces: missing_columns(rule, data), scores)


def simulate_plan(rule, o: SimulateOptions, gamma: int) -> SweepPlan:
    """A threshold rule: the chain under ``--verify`` (default token-wise), ``--relaxation`` with ``block``."""
    verification = options_verification(o, gamma, relaxation=o.relaxation)
    naming_param("verify", check_verification, verification, rule, gamma)
    return SweepPlan(rule, verification, rule.name)


def live_decoder(rule: Rule) -> ChainDecoder:
    """A threshold rule decodes token by token (:func:`evolve.live.decoding.tokenwise_decoder`)."""
    return tokenwise_decoder(rule)


def pareto_curve(rule: Rule, traces, data: EvalData, gamma: int, budgets: Sequence[float]):
    """A threshold rule named by ``--rule``: its per-token one-point curve (:func:`rule_curve`)."""
    return rule_curve(rule, data, gamma, budgets)


def pareto_runs(run_dirs, traces, data: EvalData, gamma: int, budgets: Sequence[float]):
    """Threshold runs named by ``--run``: every distinct rule of them as the ``evolved`` per-token curve
    (:func:`evolve.commands.pareto.command.evolved_curve`)."""
    return evolved_curve(run_dirs, data, gamma, budgets)


__all__ = ["COMPARE", "scores", "simulate_plan", "live_decoder", "pareto_curve", "pareto_runs"]
