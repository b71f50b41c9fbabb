"""Which population scorer scores a kind of program (:mod:`evolve.gp.kinds`).

A ``threshold`` program is scored per token by :class:`evolve.eval.population.PopulationEvaluator`
(acceptance counts, expected metrics, block metrics with ``gamma``); a ``relaxation`` program,
the weight w of relaxed block verification, by
:class:`evolve.eval.relaxed_population.RelaxedPopulationEvaluator` (block metrics only). Both take
``(data, fitness, gamma=, cache_size=)`` and return one :class:`evolve.eval.evaluator.Metrics`-like
record per program.
"""
from __future__ import annotations

from evolve.errors import InputError
from evolve.eval.population import PopulationEvaluator
from evolve.eval.relaxed_population import RelaxedPopulationEvaluator
from evolve.gp.kinds import RELAXATION, THRESHOLD, ProgramKind

#: The population scorer of each kind, by kind name.
POPULATION_SCORERS: dict[str, type[PopulationEvaluator]] = {
    THRESHOLD.name: PopulationEvaluator,
    RELAXATION.name: RelaxedPopulationEvaluator,
}


def population_scorer(kind: ProgramKind) -> type[PopulationEvaluator]:
    """The population scorer class of ``kind``. Raises InputError (param ``evolve``) for a kind none scores."""
    try:
        return POPULATION_SCORERS[kind.name]
    except KeyError:
        raise InputError(f"no population scorer for {kind.name} programs (kinds with one: "
                         f"{', '.join(POPULATION_SCORERS)})", param="evolve") from None


__all__ = ["POPULATION_SCORERS", "population_scorer"]
