"""The hooks of kind ``threshold`` (:class:`evolve.kinds.base.KindHooks`): scored per token by the shared evaluator
(:mod:`evolve.eval.evaluator`, :mod:`evolve.eval.population`), seeded with the registered rules and the best
members of the published families (:func:`evolve.search.warm_start.choose_seeds`), and run by every command but
``trees``."""
from __future__ import annotations

from evolve.eval.evaluator import Metrics, evaluate
from evolve.eval.population import PopulationEvaluator
from evolve.kinds.base import KindContext, KindHooks
from evolve.kinds.threshold.export_layout import THRESHOLD_LAYOUT
from evolve.kinds.threshold.report_hooks import COMPARE, live_decoder, pareto_curve, pareto_runs, simulate_plan
from evolve.kinds.threshold.export_engines import engine_support
from evolve.search.warm_start import choose_seeds


def population(context: KindContext) -> PopulationEvaluator:
    """The per-token population scorer (acceptance counts, expected metrics, block metrics with ``gamma``)."""
    return PopulationEvaluator(context.data, context.fitness, gamma=context.gamma, cache_size=context.cache_size)


def score(rule, context: KindContext) -> Metrics:
    """One threshold rule's :class:`evolve.eval.evaluator.Metrics` on the context's split, its speedup under the
    context's costs (:func:`evolve.eval.evaluator.evaluate`)."""
    return evaluate(rule, context.split_data(), context.fitness, gamma=context.gamma, costs=context.costs)


def seeds(cfg, features, train, gamma, objective):
    """The registered rules and the best family members (:func:`evolve.search.warm_start.choose_seeds`)."""
    return choose_seeds(cfg, features, train, gamma, objective)


HOOKS = KindHooks(metrics=Metrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  simulate=simulate_plan, live=live_decoder, pareto=pareto_curve,
                  pareto_runs=pareto_runs, export=THRESHOLD_LAYOUT,
                  engines=engine_support)
