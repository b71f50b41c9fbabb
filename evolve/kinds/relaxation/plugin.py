"""The hooks of kind ``relaxation`` (:class:`evolve.kinds.base.KindHooks`): scored by relaxed block verification
(:mod:`evolve.kinds.relaxation.eval_block`), seeded with lossless block verification and the fixed-w family
(:mod:`evolve.kinds.relaxation.search_seeds`), and run by every command."""
from __future__ import annotations

from evolve.kinds.base import KindHooks
from evolve.kinds.relaxation.eval_block import RelaxedMetrics, attach
from evolve.kinds.relaxation.eval_population import RelaxedPopulationEvaluator, evaluate_relaxed
from evolve.kinds.relaxation.export_layout import RELAXATION_LAYOUT
from evolve.kinds.relaxation.export_engines import engine_support
from evolve.kinds.relaxation.report_hooks import CAPTION, COMPARE, live_decoder, simulate_plan, tree_rows
from evolve.kinds.relaxation.search_seeds import choose_relaxed_seeds
from evolve.report.pareto.relaxed import relaxed_rule_curve
from evolve.traces.io import load_split


def population(data, fitness, gamma, cache_size, costs, verifier, weighting) -> RelaxedPopulationEvaluator:
    """The relaxed block verification population scorer (block metrics only)."""
    return RelaxedPopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size)


def score(rule, data, directory, split, gamma, fitness, speedup_costs, costs) -> RelaxedMetrics:
    """One relaxation rule's relaxed block verification metrics with draft length ``gamma``, as its run scores it
    (:func:`evolve.kinds.relaxation.eval_population.evaluate_relaxed`); the block columns come from the split file
    of ``directory`` when given."""
    records = data()
    if directory is not None:
        attach(records, load_split(directory, split))
    return evaluate_relaxed([rule.program], records, gamma, speedup_costs)[0]


def seeds(cfg, features, train, gamma, objective):
    """Lossless block verification (w = 0) and the fixed-w family."""
    return choose_relaxed_seeds(cfg, train, gamma, objective)


HOOKS = KindHooks(metrics=RelaxedMetrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  caption=CAPTION, simulate=simulate_plan, live=live_decoder, pareto=relaxed_rule_curve,
                  trees=tree_rows, export=RELAXATION_LAYOUT, engines=engine_support)
