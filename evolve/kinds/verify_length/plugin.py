"""The hooks of kind ``verify-length`` (:class:`evolve.kinds.base.KindHooks`): scored in tokens per second under a
cost file (:mod:`evolve.kinds.verify_length.eval_policy`), seeded with the fixed draft lengths and confidence
thresholds (:mod:`evolve.kinds.verify_length.search_seeds`), compared beside the competitor policies and decoded
live."""
from __future__ import annotations

from evolve.kinds.base import KindContext, KindHooks
from evolve.kinds.verify_length.settings import LengthSettings
from evolve.kinds.verify_length.eval_policy import LengthMetrics, LengthPopulationEvaluator
from evolve.kinds.verify_length.export_layout import LENGTH_LAYOUT
from evolve.kinds.verify_length.live import live_decoder
from evolve.kinds.verify_length.report_hooks import CAPTION, COMPARE
from evolve.kinds.verify_length.export_engines import engine_support, schedule
from evolve.kinds.verify_length.search_seeds import choose_length_seeds
from evolve.kinds.verify_length.report_compare import check_policy_settings


def population(context: KindContext) -> LengthPopulationEvaluator:
    """The verification-length population scorer (tokens per second under the context's costs, drafts verified by
    the run's ``verify_with``, blocks weighted by its ``length_weighting``: :class:`LengthSettings`)."""
    settings = context.settings or LengthSettings()
    return LengthPopulationEvaluator(context.data, context.fitness, gamma=context.gamma, cache_size=context.cache_size,
                                     costs=context.costs, verifier=settings.verifier,
                                     weighting=settings.length_weighting)


def score(rule, context: KindContext) -> LengthMetrics:
    """One policy's :class:`evolve.kinds.verify_length.eval_policy.LengthMetrics` under the context's costs with
    longest draft ``gamma``, its drafts verified by its own run's verifier and its blocks weighted by its run's
    weighting (the rule's, :func:`check_policy_settings`; a rule whose run set no weighting follows the context's
    settings, the run the figures are for)."""
    verifier, weighting = check_policy_settings(rule)
    if rule.setting("length_weighting") is None and context.settings is not None:
        weighting = context.settings.length_weighting
    scorer = LengthPopulationEvaluator(context.split_data(), gamma=context.gamma, cache_size=0, costs=context.costs,
                                       verifier=verifier, weighting=weighting)
    return scorer.evaluate([rule.program])[0]


def seeds(cfg, features, train, gamma, objective):
    """Fixed draft lengths, confidence thresholds and the logistic stopping rule trained on train."""
    return choose_length_seeds(cfg, train, gamma, objective, tuple(features))


HOOKS = KindHooks(check=check_policy_settings, metrics=LengthMetrics, population=population, score=score, seeds=seeds, compare=COMPARE,
                  caption=CAPTION, live=live_decoder, export=LENGTH_LAYOUT,
                  engines=engine_support, schedule=schedule)
