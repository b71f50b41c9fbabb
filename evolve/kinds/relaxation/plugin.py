"""The hooks of kind ``relaxation`` (:class:`evolve.kinds.base.KindHooks`): scored by relaxed block verification
(:mod:`evolve.eval.relaxed_block`), seeded with lossless block verification and the fixed-w family
(:mod:`evolve.kinds.relaxation.search_seeds`), and run by every command."""
from __future__ import annotations

from evolve.kinds.base import KindContext, KindHooks
from evolve.eval.relaxed_block import RelaxedMetrics, attach
from evolve.kinds.relaxation.eval_population import RelaxedPopulationEvaluator, evaluate_relaxed
from evolve.kinds.relaxation.export_layout import RELAXATION_LAYOUT
from evolve.kinds.relaxation.live import live_decoder
from evolve.kinds.relaxation.report_hooks import CAPTION, COMPARE, simulate_plan, tree_rows
from evolve.kinds.relaxation.export_engines import engine_support
from evolve.kinds.relaxation.search_seeds import choose_relaxed_seeds
from evolve.kinds.relaxation.pareto import relaxed_family_curve, relaxed_rule_curve, relaxed_runs_curve
from evolve.traces.io import load_split


def population(context: KindContext) -> RelaxedPopulationEvaluator:
    """The relaxed block verification population scorer (block metrics only)."""
    return RelaxedPopulationEvaluator(context.data, context.fitness, gamma=context.gamma,
                                      cache_size=context.cache_size)


def score(rule, context: KindContext) -> RelaxedMetrics:
    """One relaxation rule's relaxed block verification metrics with draft length ``gamma``, as its run scores it
    (:func:`evolve.kinds.relaxation.eval_population.evaluate_relaxed`), its speedup under the context's costs; the
    block columns come from the split file of the context's dataset directory when given."""
    records = context.split_data()
    if context.directory is not None:
        attach(records, load_split(context.directory, context.split))
    return evaluate_relaxed([rule.program], records, context.gamma, context.costs)[0]


def seeds(cfg, features, train, gamma, objective):
    """Lossless block verification (w = 0) and the fixed-w family."""
    return choose_relaxed_seeds(cfg, train, gamma, objective)


HOOKS = KindHooks(metrics=RelaxedMetrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  caption=CAPTION, simulate=simulate_plan, live=live_decoder, pareto=relaxed_rule_curve,
                  pareto_runs=relaxed_runs_curve, pareto_references=relaxed_family_curve, trees=tree_rows,
                  export=RELAXATION_LAYOUT, engines=engine_support)
