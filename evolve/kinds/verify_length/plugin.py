"""The hooks of kind ``verify-length`` (:class:`evolve.kinds.base.KindHooks`): scored in tokens per second under a
cost file (:mod:`evolve.kinds.verify_length.eval_policy`), seeded with the fixed draft lengths and confidence
thresholds (:mod:`evolve.kinds.verify_length.search_seeds`), compared beside the competitor policies and decoded
live."""
from __future__ import annotations

from evolve.kinds.base import KindHooks
from evolve.kinds.verify_length.eval_policy import LengthMetrics, LengthPopulationEvaluator
from evolve.kinds.verify_length.export_layout import LENGTH_LAYOUT
from evolve.kinds.verify_length.export_engines import engine_support, schedule
from evolve.kinds.verify_length.report_hooks import CAPTION, COMPARE, live_decoder
from evolve.kinds.verify_length.search_seeds import choose_length_seeds
from evolve.kinds.verify_length.report_compare import check_policy_settings


def population(data, fitness, gamma, cache_size, costs, verifier, weighting) -> LengthPopulationEvaluator:
    """The verification-length population scorer (tokens per second under ``costs``, drafts verified by
    ``verifier``, blocks weighted by ``weighting``)."""
    return LengthPopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size, costs=costs, verifier=verifier,
                                     weighting=weighting)


def score(rule, data, directory, split, gamma, fitness, speedup_costs, costs) -> LengthMetrics:
    """One policy's :class:`evolve.kinds.verify_length.eval_policy.LengthMetrics` under ``costs`` with longest draft
    ``gamma``, its drafts verified by its own run's verifier and its blocks weighted by its run's weighting."""
    verifier, weighting = check_policy_settings(rule)
    scorer = LengthPopulationEvaluator(data(), gamma=gamma, cache_size=0, costs=costs, verifier=verifier,
                                       weighting=weighting)
    return scorer.evaluate([rule.program])[0]


def seeds(cfg, features, train, gamma, objective):
    """Fixed draft lengths and confidence thresholds."""
    return choose_length_seeds(cfg, train, gamma, objective)


HOOKS = KindHooks(check=check_policy_settings, metrics=LengthMetrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  caption=CAPTION, live=live_decoder, export=LENGTH_LAYOUT,
                  engines=engine_support, schedule=schedule)
