"""The hooks of kind ``threshold`` (:class:`evolve.kinds.base.KindHooks`): scored per token by the shared evaluator
(:mod:`evolve.eval.evaluator`, :mod:`evolve.eval.population`), seeded with the registered rules and the best
members of the published families (:func:`evolve.search.warm_start.choose_seeds`), and run by every command but
``trees``."""
from __future__ import annotations

from evolve.eval.evaluator import Metrics, evaluate
from evolve.eval.population import PopulationEvaluator
from evolve.kinds.base import KindHooks
from evolve.kinds.threshold.export_layout import THRESHOLD_LAYOUT
from evolve.kinds.threshold.export_engines import engine_support
from evolve.kinds.threshold.report_hooks import COMPARE, live_decoder, pareto_curve, simulate_plan
from evolve.search.warm_start import choose_seeds


def population(data, fitness, gamma, cache_size, costs, verifier, weighting) -> PopulationEvaluator:
    """The per-token population scorer (acceptance counts, expected metrics, block metrics with ``gamma``)."""
    return PopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size)


def score(rule, data, directory, split, gamma, fitness, speedup_costs, costs) -> Metrics:
    """One threshold rule's :class:`evolve.eval.evaluator.Metrics` on ``data`` (:func:`evolve.eval.evaluator.evaluate`)."""
    return evaluate(rule, data(), fitness, gamma=gamma, costs=speedup_costs)


def seeds(cfg, features, train, gamma, objective):
    """The registered rules and the best family members (:func:`evolve.search.warm_start.choose_seeds`)."""
    return choose_seeds(cfg, features, train, gamma, objective)


HOOKS = KindHooks(metrics=Metrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  simulate=simulate_plan, live=live_decoder, pareto=pareto_curve, export=THRESHOLD_LAYOUT,
                  engines=engine_support)
