"""Batched evaluation of a whole population in one compiled call (the evolution loop's evaluator).

:class:`PopulationEvaluator` takes the individuals of a generation (DEAP trees,
prefix node lists, expression strings, :class:`evolve.gp.compiler.Program` or
expression :class:`heuristics.contract.Rule` objects), keys each by its
canonical expression (:func:`evolve.gp.compiler.to_string`), scores every
distinct expression not seen before exactly once, and returns one
:class:`evolve.eval.evaluator.Metrics` per individual, in order.

Scoring: each new expression is compiled once to its postfix program and
lowered to register code (:func:`evolve.eval.fastpath.lowering.lower`; ``log`` and ``exp``
of a bare feature read a row computed once per split), the programs are
concatenated into flat arrays (:func:`evolve.eval.fastpath.lowering.pack`) and the whole
batch runs in one call of :func:`evolve.eval.fastpath.scoring.score_packed`: parallel
over (program, token chunk) work items on all cores, tokens in cache-sized
tiles, the metric reductions fused into the interpreter. The metrics are
exactly those of :func:`evolve.eval.evaluator.evaluate` for each program alone (same
kernel, same chunking), whatever the number of threads.

Usage in a DEAP loop::

    scorer = PopulationEvaluator(train, AcceptanceQualityFitness())
    invalid = [ind for ind in population if not ind.fitness.valid]
    for ind, m in zip(invalid, scorer.evaluate(invalid)):
        ind.fitness.values = (m.fitness,)
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from evolve.gp.compiler import Node, Program, compile_nodes, from_tree, parse, to_string
from evolve.eval.evaluator import (
    EvalData, Metrics, AcceptanceQualityFitness, check_features, check_gamma, metrics_from_counts,
)
from evolve.eval.costs import DEFAULT_COSTS, Costs
from evolve.eval.fastpath.lowering import derivable_pairs, lower, pack
from evolve.eval.fastpath.scoring import score_packed

#: Default number of distinct expressions whose metrics are remembered across calls.
DEFAULT_CACHE_SIZE = 200_000


@dataclass
class EvaluationStats:
    """Running totals of a :class:`PopulationEvaluator` (all calls so far).

    ``individuals``: individuals asked for; ``distinct``: distinct expressions
    among them per call, summed; ``scored``: programs actually run;
    ``cache_hits``: individuals answered from earlier calls; ``nodes``: tree
    nodes of the scored programs; ``node_evaluations``: nodes x tokens of the
    scored programs; ``instructions``: register-code instructions of the scored
    programs (after constant folding, shared subtrees and derived rows);
    ``compile_seconds`` and ``score_seconds``: wall time spent lowering (derived
    rows included) and in the kernel; ``derived_rows``: rows of log/exp of a
    feature the split holds.
    """

    calls: int = 0
    individuals: int = 0
    distinct: int = 0
    scored: int = 0
    cache_hits: int = 0
    nodes: int = 0
    node_evaluations: int = 0
    instructions: int = 0
    compile_seconds: float = 0.0
    score_seconds: float = 0.0
    derived_rows: int = 0

    @property
    def seconds(self) -> float:
        """Total evaluation wall time (compiling + scoring), seconds."""
        return self.compile_seconds + self.score_seconds


def canonical(individual: Any) -> tuple[str, list[Node] | None, Program | None]:
    """(key, prefix nodes or None, program or None) of one individual.

    The key is :func:`evolve.gp.compiler.to_string` of the expression; a bare
    :class:`Program` (no expression text) is keyed by its arrays.
    Raises: InputError for an unparsable expression string; TypeError for an
    unsupported object.
    """
    if isinstance(individual, Program):
        key = "program:" + individual.ops.tobytes().hex() + individual.args.tobytes().hex() \
            + individual.consts.tobytes().hex()
        return key, None, individual
    if isinstance(individual, str):
        nodes = parse(individual, "individual")
        return to_string(nodes), nodes, None
    if isinstance(individual, list) and (not individual or isinstance(individual[0], Node)):
        return to_string(individual), individual, None
    program = getattr(individual, "program", None)
    if program is not None and getattr(individual, "nodes", None) is not None:  # an expression Rule
        return individual.expression, individual.nodes, program
    from deap import gp
    if isinstance(individual, gp.PrimitiveTree):
        nodes = from_tree(individual)
        return to_string(nodes), nodes, None
    raise TypeError(f"cannot evaluate an object of type {type(individual).__name__}")


@dataclass
class PopulationEvaluator:
    """Scores populations on one split; remembers the metrics of up to ``cache_size`` expressions.

    Args:
        data: the prepared split.
        fitness: parameters of the acceptance-quality fitness.
        gamma, costs: block metrics as in :func:`evolve.eval.evaluator.evaluate`
            (None: skipped).
        cache_size: distinct expressions remembered across calls (least
            recently used dropped first); 0 remembers only within a call.
        derive: compute ``log(feature)`` and ``exp(feature)`` once per split as
            derived rows (:meth:`evolve.eval.evaluator.EvalData.derived_rows`) that
            every program reads instead of recomputing them (same values, bit
            for bit; the C library's log/exp dominate the cost of random programs).

    Raises (constructor): InputError for a bad gamma.
    """

    data: EvalData
    fitness: AcceptanceQualityFitness = AcceptanceQualityFitness()
    gamma: int | None = None
    costs: Costs = DEFAULT_COSTS
    cache_size: int = DEFAULT_CACHE_SIZE
    derive: bool = True
    stats: EvaluationStats = field(default_factory=EvaluationStats)

    def __post_init__(self) -> None:
        self._gamma = check_gamma(self.gamma, self.data)
        self._cache: OrderedDict[str, Metrics] = OrderedDict()

    def evaluate(self, individuals: Iterable[Any]) -> list[Metrics]:
        """Metrics of every individual, in order (see the module doc).

        Raises: InputError if an individual reads a feature the split lacks.
        """
        individuals = list(individuals)
        keyed = [canonical(ind) for ind in individuals]
        result: list[Metrics | None] = [None] * len(individuals)
        todo: dict[str, list[int]] = {}
        sources: dict[str, tuple[list[Node] | None, Program | None]] = {}
        for i, (key, nodes, program) in enumerate(keyed):
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                result[i] = hit
                self.stats.cache_hits += 1
                continue
            if key not in todo:
                todo[key] = []
                sources[key] = (nodes, program)
            todo[key].append(i)
        self.stats.calls += 1
        self.stats.individuals += len(individuals)
        self.stats.distinct += len({k for k, _, _ in keyed})
        if todo:
            metrics = self._score([sources[k] for k in todo])
            for key, m in zip(todo, metrics):
                for i in todo[key]:
                    result[i] = m
                self._remember(key, m)
        return result  # type: ignore[return-value]

    def _remember(self, key: str, metrics: Metrics) -> None:
        if self.cache_size <= 0:
            return
        self._cache[key] = metrics
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _score(self, sources: Sequence[tuple[list[Node] | None, Program | None]]) -> list[Metrics]:
        t0 = time.perf_counter()
        programs = []
        for nodes, program in sources:
            if program is None:
                program = compile_nodes(nodes)
            self._check(program)
            programs.append(program)
        D, derived = None, None
        if self.derive:
            pairs = self._derivable(derivable_pairs(np.concatenate([p.ops for p in programs]),
                                                    np.concatenate([p.args for p in programs])))
            if pairs:
                D, derived = self.data.derived_rows(pairs)
        rows = self.data.feature_rows
        lowered = [lower(p.ops, p.args, p.consts, rows, derived) for p in programs]
        packed = pack(lowered)
        t1 = time.perf_counter()
        counts = self._counts(packed, D, lowered=lowered)
        t2 = time.perf_counter()
        n = self.data.n
        nodes_total = int(packed.nodes.sum())
        self.stats.scored += len(lowered)
        self.stats.nodes += nodes_total
        self.stats.node_evaluations += nodes_total * n
        self.stats.instructions += sum(lo.instructions for lo in lowered)
        self.stats.compile_seconds += t1 - t0
        self.stats.score_seconds += t2 - t1
        self.stats.derived_rows = self.data._derived_count
        return [self._metrics(c) for c in counts]

    def _derivable(self, pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """The (opcode, FEATURES index) pairs of ``pairs`` to compute as derived rows (all of them; a scorer that
        rewrites a feature row while it scores leaves that feature out)."""
        return pairs

    def _check(self, program: Program) -> None:
        """Raise InputError if ``program`` cannot be scored on the split (a missing feature)."""
        check_features(program, self.data, "individual")

    def _counts(self, packed, D: np.ndarray | None, lowered=()) -> np.ndarray:
        """Counts (P, N_COUNTS) of the packed programs (:func:`evolve.eval.fastpath.scoring.score_packed`); ``lowered``
        holds the same programs one by one, for scorers that run them separately."""
        return score_packed(packed, self.data.X, self.data.r, self.data.u, self.data.bounds,
                            self.data.depth, self._gamma, D, self.data.baseline)

    def _metrics(self, counts: np.ndarray):
        """One program's :class:`evolve.eval.evaluator.Metrics` from its counts."""
        return metrics_from_counts(counts, self.data.n, self.fitness, self.gamma, self.costs)


def evaluate_population(individuals: Iterable[Any], data: EvalData, fitness: AcceptanceQualityFitness = AcceptanceQualityFitness(), *,
                        gamma: int | None = None, costs: Costs = DEFAULT_COSTS) -> list[Metrics]:
    """Metrics of every individual (one batched call; duplicates scored once). See :class:`PopulationEvaluator`.

    Raises: InputError for a missing feature or a bad gamma.
    """
    return PopulationEvaluator(data, fitness, gamma, costs, cache_size=0).evaluate(individuals)


def score_counts(programs: Sequence[Program], data: EvalData, gamma: int = 0) -> np.ndarray:
    """Raw counts (float64 (P, N_COUNTS)) of compiled programs, one batched call, no deduplication."""
    for p in programs:
        check_features(p, data)
    packed = pack([lower(p.ops, p.args, p.consts, data.feature_rows) for p in programs])
    return score_packed(packed, data.X, data.r, data.u, data.bounds, data.depth, gamma, baseline=data.baseline)


__all__ = ["PopulationEvaluator", "EvaluationStats", "evaluate_population", "score_counts", "canonical"]
