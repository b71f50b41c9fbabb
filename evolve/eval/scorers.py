"""Which population scorer scores a kind of program (:mod:`evolve.gp.kinds`).

A ``threshold`` program is scored per token by :class:`evolve.eval.population.PopulationEvaluator`
(acceptance counts, expected metrics, block metrics with ``gamma``); a ``relaxation`` program,
the weight w of relaxed block verification, by
:class:`evolve.eval.relaxed_population.RelaxedPopulationEvaluator` (block metrics only); a
``verify-length`` policy by :class:`evolve.eval.verify_length.LengthPopulationEvaluator` (tokens per
second under a cost file). :func:`population_scorer` builds one with a common signature.
"""
from __future__ import annotations

from typing import Callable

from evolve.errors import InputError
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.evaluator import AcceptanceQualityFitness, EvalData, Metrics
from evolve.eval.relaxed_block import RelaxedMetrics
from evolve.eval.population import PopulationEvaluator
from evolve.eval.relaxed_population import RelaxedPopulationEvaluator
from evolve.eval.tree_population import TreeShapePopulationEvaluator
from evolve.eval.tree_shape import ShapeMetrics
from evolve.eval.verify_length import DEFAULT_WEIGHTING, LengthMetrics, LengthPopulationEvaluator
from evolve.gp.kinds import RELAXATION, THRESHOLD, TREE_SHAPE, VERIFY_LENGTH, ProgramKind


def _threshold(data, fitness, gamma, cache_size, costs, verifier=None, weighting=DEFAULT_WEIGHTING):
    return PopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size)


def _relaxation(data, fitness, gamma, cache_size, costs, verifier=None, weighting=DEFAULT_WEIGHTING):
    return RelaxedPopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size)


def _length(data, fitness, gamma, cache_size, costs, verifier=None, weighting=DEFAULT_WEIGHTING):
    return LengthPopulationEvaluator(data, fitness, gamma=gamma, cache_size=cache_size, costs=costs, verifier=verifier,
                                     weighting=weighting)


def _tree_shape(data, fitness, gamma, cache_size, costs, verifier=None, weighting=DEFAULT_WEIGHTING):
    return TreeShapePopulationEvaluator(data, fitness, cache_size=cache_size, costs=costs)


#: The metrics record each kind's scorer returns (what a checkpoint's evaluator caches hold), by kind name.
METRICS_CLASSES: dict[str, type] = {THRESHOLD.name: Metrics, RELAXATION.name: RelaxedMetrics,
                                    VERIFY_LENGTH.name: LengthMetrics, TREE_SHAPE.name: ShapeMetrics}

#: The population scorer factory of each kind, by kind name: ``(data, fitness, gamma, cache_size, costs,
#: verifier, weighting)`` (``verifier``, ``weighting``: what verifies a verification-length policy's drafts and
#: how its blocks are weighted; other kinds ignore them).
POPULATION_SCORERS: dict[str, Callable[..., PopulationEvaluator]] = {
    THRESHOLD.name: _threshold,
    RELAXATION.name: _relaxation,
    VERIFY_LENGTH.name: _length,
    TREE_SHAPE.name: _tree_shape,
}


def population_scorer(kind: ProgramKind, data: EvalData, fitness: AcceptanceQualityFitness, gamma: int | None,
                      cache_size: int, costs: Costs = DEFAULT_COSTS, verifier=None,
                      weighting: str = DEFAULT_WEIGHTING) -> PopulationEvaluator:
    """A population scorer of ``kind`` on ``data`` (``verifier``: a verification-length policy's
    :class:`evolve.eval.verify_length.LengthVerifier`, None: the standard rule; ``weighting``: how its blocks are
    weighted, :func:`evolve.eval.verify_length.block_cover`). Raises InputError (param
    ``evolve``) for a kind none scores, and as the scorer's constructor."""
    try:
        make = POPULATION_SCORERS[kind.name]
    except KeyError:
        raise InputError(f"no population scorer for {kind.name} programs (kinds with one: "
                         f"{', '.join(POPULATION_SCORERS)})", param="evolve") from None
    return make(data, fitness, gamma, cache_size, costs, verifier, weighting)


__all__ = ["METRICS_CLASSES", "POPULATION_SCORERS", "population_scorer"]
