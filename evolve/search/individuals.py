"""The individuals of a search: DEAP fitness and tree classes, and the hall of fame.

The classes are defined at module level (not with ``deap.creator`` inside a
function), so a population, a single individual or a :class:`HallOfFame`
pickles and unpickles with its fitness values: ``pickle.loads(pickle.dumps(population))``
gives trees with the same expression strings and the same ``fitness.values``
(and ``fitness.crowding_dist`` after NSGA-II selection).
"""
from __future__ import annotations

import bisect
import copy
from typing import Any

from deap import base, gp

from evolve.eval.objectives import PARETO_WEIGHTS


class FitnessMax(base.Fitness):
    """One maximised value: the run's objective on train (:func:`evolve.search.state.score`)."""

    weights = (1.0,)


class FitnessPareto(base.Fitness):
    """The three objectives of a ``pareto`` run: tokens per call (max), TV per token (min), size (min).

    Weights :data:`evolve.eval.objectives.PARETO_WEIGHTS`.
    """

    weights = PARETO_WEIGHTS


class Individual(gp.PrimitiveTree):
    """A program tree (prefix order, :class:`deap.gp.PrimitiveTree`) with a :class:`FitnessMax`."""

    fitness_class: type[base.Fitness] = FitnessMax

    def __init__(self, content):
        super().__init__(content)
        self.fitness = self.fitness_class()


class ParetoIndividual(Individual):
    """A program tree with a :class:`FitnessPareto` (the individuals of a ``pareto`` run)."""

    fitness_class = FitnessPareto


_TYPES: dict[tuple[float, ...], tuple[type[base.Fitness], type[Individual]]] = {
    (1.0,): (FitnessMax, Individual), tuple(PARETO_WEIGHTS): (FitnessPareto, ParetoIndividual)}


def deap_types(objective) -> tuple[type[base.Fitness], type[Individual]]:
    """(fitness class, individual class) for the weights of ``objective`` (an
    :class:`evolve.eval.objectives.Objective`): :class:`FitnessMax`/:class:`Individual` for one maximised
    value, :class:`FitnessPareto`/:class:`ParetoIndividual` for the pareto weights, and for other weights
    (a user's objective) a pair made once and kept as attributes of this module, so they pickle too.
    """
    weights = tuple(float(w) for w in objective.weights)
    if weights not in _TYPES:
        tag = "_".join(("p" if w >= 0 else "m") + f"{abs(w):g}".replace(".", "d") for w in weights)
        fit = type(f"Fitness_{tag}", (base.Fitness,), {"weights": weights, "__module__": __name__})
        ind = type(f"Individual_{tag}", (Individual,), {"fitness_class": fit, "__module__": __name__})
        globals()[fit.__name__], globals()[ind.__name__] = fit, ind
        _TYPES[weights] = (fit, ind)
    return _TYPES[weights]


class HallOfFame:
    """The best distinct individuals seen so far, ordered by train fitness, then size (smaller first).

    Unlike DEAP's ``tools.HallOfFame`` (fitness only), a smaller tree with the
    same fitness displaces a larger one, so the parsimony pressure of the
    search reaches the hall of fame too. Distinct means a different expression
    string. Members are copies; ``hof[i]`` and iteration follow the order.
    Uses the first fitness value (single-objective runs).
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._ranked: list[tuple[tuple[float, int, int], Any]] = []  # ((-fitness, size, arrival), individual)
        self._keys: set[str] = set()
        self._arrivals = 0

    def update(self, population) -> None:
        """Consider every individual of ``population`` (each must have a valid fitness)."""
        for ind in population:
            rank = (-ind.fitness.values[0], len(ind))
            if len(self._ranked) >= self.maxsize and rank >= self._ranked[-1][0][:2]:
                continue
            key = str(ind)
            if key in self._keys:
                continue
            self._arrivals += 1
            entry = ((rank[0], rank[1], self._arrivals), copy.deepcopy(ind))
            bisect.insort(self._ranked, entry, key=lambda e: e[0])
            self._keys.add(key)
            if len(self._ranked) > self.maxsize:
                _, dropped = self._ranked.pop()
                self._keys.discard(str(dropped))

    def __len__(self) -> int:
        return len(self._ranked)

    def __getitem__(self, i: int):
        return self._ranked[i][1]

    def __iter__(self):
        return (ind for _, ind in self._ranked)


__all__ = ["FitnessMax", "FitnessPareto", "Individual", "ParetoIndividual", "deap_types", "HallOfFame"]
