"""Variation and selection operators of the search (a DEAP toolbox and selection helpers).

* Initial trees: ramped half-and-half (Koza 1992), depths ``init_min_depth``
  to ``init_max_depth``.
* Parent selection of the single-objective loop: double tournament (Luke and
  Panait 2002, "Fighting bloat with nonparametric parsimony pressure",
  PPSN VII): a fitness tournament of ``tournament_size``, then a size
  tournament between two winners that keeps the smaller with probability
  ``parsimony_size / 2``.
* Crossover: one-point subtree crossover (swap one random subtree of each parent).
* Mutation (:func:`mutate`): subtree, node replacement, one constant, shrink or
  hoist (Kinnear 1994), drawn at random. Under the ``pareto`` fitness the
  constant mutation shifts one constant by a small Gaussian step
  (:func:`mut_constant_shift`) instead of redrawing it, so the thresholds of
  seeded rules are tuned locally.
* Crossover and mutation are guarded by Koza's static depth limit (Koza 1992,
  "Genetic Programming", MIT Press; 17 levels there): an offspring taller than
  ``max_depth`` is replaced by one of its parents, drawn at random.
* NSGA-II helpers: :func:`dcd_tournament` (mating selection), :func:`distinct_first`
  and :func:`first_front`.

All randomness comes from Python's ``random`` (seeded by the search).
"""
from __future__ import annotations

import copy
import operator
import random

from deap import base, gp, tools

from evolve.search.config import RunConfig
from evolve.search.individuals import deap_types


def toolbox(cfg: RunConfig, pset: gp.PrimitiveSet) -> base.Toolbox:
    """The DEAP toolbox of a run: ``individual``, ``select``, ``mate``, ``mutate`` (and ``expr``, ``expr_mut``).

    Individuals are :class:`evolve.search.individuals.Individual` (or
    the individual class of a multi-objective objective, :func:`evolve.search.individuals.deap_types`); ``select`` is the
    double tournament (Luke and Panait 2002); ``mate`` and ``mutate`` carry
    Koza's static depth limit ``cfg.max_depth`` on the tree height; under the
    multi-objective objectives (``pareto``) ``mutate`` shifts constants (:func:`mut_constant_shift`).
    """
    _, individual = deap_types(cfg.objective_spec)
    tb = base.Toolbox()
    tb.register("expr", gp.genHalfAndHalf, pset=pset, min_=cfg.init_min_depth, max_=cfg.init_max_depth)
    tb.register("individual", tools.initIterate, individual, tb.expr)
    tb.register("select", tools.selDoubleTournament, fitness_size=cfg.tournament_size,
                parsimony_size=cfg.parsimony_size, fitness_first=True)
    tb.register("mate", gp.cxOnePoint)
    tb.register("expr_mut", gp.genFull, min_=0, max_=cfg.mutation_max_depth)
    tb.register("mutate", mutate, pset=pset, expr=tb.expr_mut, shift_constants=cfg.objective_spec.multi)
    limit = gp.staticLimit(key=operator.attrgetter("height"), max_value=cfg.max_depth)
    tb.decorate("mate", limit)
    tb.decorate("mutate", limit)
    return tb


def mutate(individual, pset: gp.PrimitiveSet, expr, shift_constants: bool = False):
    """One mutation of ``individual`` (in place), drawn with these probabilities.

    Subtree mutation 35% (a random subtree replaced by a tree from ``expr``),
    node replacement 20% (a node replaced by another of the same arity), one
    constant 20% (one ephemeral constant redrawn, or with ``shift_constants``
    shifted by :func:`mut_constant_shift`; node replacement if the tree
    has none), shrink 10% (a random inner node replaced by one of its
    argument subtrees) and hoist 15% (:func:`mut_hoist`). Returns a tuple of one tree,
    as DEAP's mutation operators.
    """
    r = random.random()
    if r < 0.35:
        return gp.mutUniform(individual, expr=expr, pset=pset)
    if r < 0.55:
        return gp.mutNodeReplacement(individual, pset=pset)
    if r < 0.75:
        if any(isinstance(type(node), gp.MetaEphemeral) for node in individual):
            if shift_constants:
                return mut_constant_shift(individual)
            return gp.mutEphemeral(individual, mode="one")
        return gp.mutNodeReplacement(individual, pset=pset)
    if r < 0.85:
        return gp.mutShrink(individual)
    return mut_hoist(individual)


#: Standard deviation of :func:`mut_constant_shift`, relative to the constant's magnitude (at least 0.1).
CONSTANT_SHIFT = 0.1


def mut_constant_shift(individual):
    """Shift one ephemeral constant c (chosen uniformly) to round(c + N(0, s^2), 3), s = CONSTANT_SHIFT * max(|c|, 0.1).

    A local step (a threshold 0.12 moves by about 0.012), where redrawing the
    constant uniformly in [-1, 1] jumps across the range; it lets a search
    tune the thresholds of seeded rules. Trees without constants are
    returned unchanged. Returns a tuple of one tree, as DEAP's mutation operators.
    """
    indices = [i for i, node in enumerate(individual) if isinstance(type(node), gp.MetaEphemeral)]
    if indices:
        i = random.choice(indices)
        node = copy.copy(individual[i])
        node.value = round(node.value + random.gauss(0.0, CONSTANT_SHIFT * max(abs(node.value), 0.1)), 3)
        individual[i] = node
    return individual,


def mut_hoist(individual):
    """Hoist mutation (Kinnear 1994): the tree is replaced by one of its subtrees, chosen uniformly.

    Lifts a useful building block buried in a larger tree to the root (and
    counters bloat). Returns a tuple of one tree, as DEAP's mutation operators.
    """
    if len(individual) > 1:
        index = random.randrange(1, len(individual))
        subtree = individual[individual.searchSubtree(index)]
        individual[0:len(individual)] = subtree
    return individual,


def dcd_tournament(population, k: int) -> list:
    """``k`` parents by binary tournaments: the dominating one wins, else the larger crowding distance.

    The comparison of DEAP's ``selTournamentDCD`` (Deb et al. 2002, "A fast and
    elitist multiobjective genetic algorithm: NSGA-II", IEEE Trans. Evol.
    Comput. 6(2)), without its requirement that the population size be a
    multiple of 4. Individuals need ``fitness.crowding_dist`` (set by
    ``tools.selNSGA2``); ties go to the first drawn.
    """
    out = []
    for _ in range(k):
        a, b = random.choice(population), random.choice(population)
        if b.fitness.dominates(a.fitness):
            out.append(b)
        elif a.fitness.dominates(b.fitness):
            out.append(a)
        else:
            out.append(b if b.fitness.crowding_dist > a.fitness.crowding_dist else a)
    return out


def distinct_first(individuals) -> list:
    """``individuals`` with the first copy of each expression first, repeated expressions after them.

    Survivor selection then keeps duplicates only when there are fewer distinct
    expressions than places (they would otherwise crowd the front).
    """
    seen, first, rest = set(), [], []
    for ind in individuals:
        key = str(ind)
        (rest if key in seen else first).append(ind)
        seen.add(key)
    return first + rest


def first_front(population) -> list:
    """The non-dominated individuals of ``population``, one per distinct expression, in population order."""
    front = tools.sortLogNondominated(population, len(population), first_front_only=True) if population else []
    in_front = {id(ind) for ind in front}
    seen, out = set(), []
    for ind in population:
        if id(ind) in in_front and str(ind) not in seen:
            seen.add(str(ind))
            out.append(ind)
    return out


__all__ = ["CONSTANT_SHIFT", "toolbox", "mutate", "mut_constant_shift", "mut_hoist", "dcd_tournament", "distinct_first",
           "first_front"]
