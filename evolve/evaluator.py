"""Scoring acceptance rules and evolved programs over a trace split.

Metrics (seed 004, ``../shared/seeds/004``; notes ``acceptance-math.md`` sections 1-2):

* seed metrics, sampled with the record's own ``rand_value`` u (accept iff u < tau):
  acceptance_rate A, accuracy (agreement with ``baseline_accepts``), false accepts
  FA (accepted, baseline rejected), false rejects FR,
  quality = max(0, 1 - w_fa*FA/N - w_fr*FR/N), fitness = A*quality if
  quality >= floor else scale*quality (defaults w_fa=10, w_fr=0.1, floor=0.95,
  scale=0.5);
* expected metrics, free of sampling noise, with tau clamped to [0, 1] and
  r = min(1, p/q): expected_acceptance = mean(tau), expected_tv =
  mean(max(0, tau - r)) (an unbiased estimate of the total-variation distance
  between the rule's output and p, i.e. the rule's damage), expected_false_reject
  = mean(max(0, r - tau)), expected_quality and expected_fitness by the same
  formulas;
* n_invalid: thresholds that were NaN or infinite (treated as 0: reject).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from data.io import Traces
from data.schema import standard_threshold
from evolve.compiler import Program
from evolve.interpreter import (
    C_ACCEPT, C_FALSE_ACCEPT, C_FALSE_REJECT, C_INVALID, C_SUM_EXPECTED_FR, C_SUM_TAU, C_SUM_TV,
    function_thresholds, function_thresholds_extra, program_thresholds, score_program, score_thresholds,
)
from evolve.primitives import FEATURES


@dataclass(frozen=True)
class SeedFitness:
    """Seed 004's fitness: quality = max(0, 1 - w_fa*FA/N - w_fr*FR/N); A*Q if Q >= floor else scale*Q."""

    false_accept_weight: float = 10.0
    false_reject_weight: float = 0.1
    quality_floor: float = 0.95
    below_floor_scale: float = 0.5

    def quality(self, false_accept_rate: float, false_reject_rate: float) -> float:
        """Quality score in [0, 1] from false-accept and false-reject rates (fractions of N)."""
        return max(0.0, 1.0 - self.false_accept_weight * false_accept_rate
                   - self.false_reject_weight * false_reject_rate)

    def fitness(self, acceptance: float, quality: float) -> float:
        """Fitness from acceptance rate and quality score."""
        return acceptance * quality if quality >= self.quality_floor else self.below_floor_scale * quality


@dataclass
class EvalData:
    """A split prepared for the interpreter.

    ``X`` float64 (len(FEATURES), n), C-contiguous, one row per feature of
    :data:`evolve.primitives.FEATURES` (missing optional features are NaN and
    listed as unavailable); ``r`` float64 (n,) = min(1, p/q); ``u`` float64 (n,)
    rand_value; ``b`` bool (n,) baseline_accepts.
    """

    X: np.ndarray
    r: np.ndarray
    u: np.ndarray
    b: np.ndarray
    available: tuple[str, ...]
    source: str = "<memory>"
    split: str = ""
    block_start: np.ndarray | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.r.size)

    @classmethod
    def from_traces(cls, traces: Traces) -> "EvalData":
        """Prepare a validated split. Memory: about 8*(len(FEATURES)+2)+1 bytes per token."""
        n = traces.n
        X = np.full((len(FEATURES), n), np.nan)
        available = []
        for i, name in enumerate(FEATURES):
            if traces.has(name):
                X[i] = traces[name]
                available.append(name)
        r = standard_threshold(traces["target_prob"], traces["draft_prob"])
        return cls(X, r, np.ascontiguousarray(traces["rand_value"], dtype=np.float64),
                   np.ascontiguousarray(traces["baseline_accepts"], dtype=np.bool_),
                   tuple(available), traces.source, traces.split)

    def feature(self, name: str) -> np.ndarray:
        """Row of ``X`` for feature ``name``, float64 (n,)."""
        return self.X[FEATURES.index(name)]


@dataclass(frozen=True)
class Metrics:
    """Metrics of one rule on one split (see module doc). Rates are fractions, not percent."""

    tokens: int
    acceptance_rate: float
    accuracy: float
    false_accepts: int
    false_rejects: int
    quality_score: float
    fitness: float
    expected_acceptance: float
    expected_tv: float
    expected_false_reject: float
    expected_quality: float
    expected_fitness: float
    n_invalid: int

    def to_dict(self) -> dict:
        """Plain dict of the fields."""
        return asdict(self)


def metrics_from_counts(counts: np.ndarray, n: int, fitness: SeedFitness = SeedFitness()) -> Metrics:
    """Turn interpreter counts (float64 (N_COUNTS,)) over ``n`` tokens into :class:`Metrics`.

    With n == 0 every rate is 0.
    """
    if n == 0:
        return Metrics(0, 0.0, 0.0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    fa, fr = int(counts[C_FALSE_ACCEPT]), int(counts[C_FALSE_REJECT])
    acceptance = counts[C_ACCEPT] / n
    quality = fitness.quality(fa / n, fr / n)
    e_acc, e_tv, e_fr = counts[C_SUM_TAU] / n, counts[C_SUM_TV] / n, counts[C_SUM_EXPECTED_FR] / n
    e_quality = fitness.quality(e_tv, e_fr)
    return Metrics(
        tokens=n,
        acceptance_rate=float(acceptance),
        accuracy=float((n - fa - fr) / n),
        false_accepts=fa,
        false_rejects=fr,
        quality_score=float(quality),
        fitness=float(fitness.fitness(acceptance, quality)),
        expected_acceptance=float(e_acc),
        expected_tv=float(e_tv),
        expected_false_reject=float(e_fr),
        expected_quality=float(e_quality),
        expected_fitness=float(fitness.fitness(e_acc, e_quality)),
        n_invalid=int(counts[C_INVALID]),
    )


def check_features(program: Program, data: EvalData, what: str = "program") -> None:
    """Raise InputError if ``program`` reads a feature the split lacks."""
    from data.errors import InputError
    missing = [f for f in program.features if f not in data.available]
    if missing:
        raise InputError(f"{data.source}: {what} needs column '{missing[0]}', which this split lacks")


def program_counts(program: Program, data: EvalData) -> np.ndarray:
    """Interpreter counts of a compiled program (float64 (N_COUNTS,))."""
    return score_program(program.ops, program.args, program.consts, program.stack_size,
                         data.X, data.r, data.u, data.b)


def evaluate_program(program: Program, data: EvalData, fitness: SeedFitness = SeedFitness()) -> Metrics:
    """Metrics of a compiled program on ``data``. Raises InputError for a missing feature."""
    check_features(program, data)
    return metrics_from_counts(program_counts(program, data), data.n, fitness)


def thresholds(rule, data: EvalData) -> np.ndarray:
    """Raw thresholds (float64 (n,), before NaN handling and clamping) of a rule or program.

    ``rule`` is a :class:`Program` or a :class:`heuristics.contract.Rule`.
    """
    program = rule if isinstance(rule, Program) else rule.program
    if program is not None:
        check_features(program, data, getattr(rule, "name", "program"))
        return program_thresholds(program.ops, program.args, program.consts, program.stack_size, data.X)
    out = np.empty(data.n)
    if rule.extra_columns:
        missing = [c for c in rule.extra_columns if c not in data.available]
        if missing:
            from data.errors import InputError
            raise InputError(f"{data.source}: rule '{rule.name}' needs column '{missing[0]}', which this split lacks")
        E = np.ascontiguousarray(np.stack([data.feature(c) for c in rule.extra_columns]))
        return function_thresholds_extra(rule.compiled(), data.X, E, out)
    return function_thresholds(rule.compiled(), data.X, out)


def evaluate_thresholds(tau: np.ndarray, data: EvalData, fitness: SeedFitness = SeedFitness()) -> Metrics:
    """Metrics of given raw thresholds ``tau`` float64 (n,)."""
    tau = np.ascontiguousarray(tau, dtype=np.float64)
    return metrics_from_counts(score_thresholds(tau, data.r, data.u, data.b), data.n, fitness)


def evaluate(rule, data: EvalData, fitness: SeedFitness = SeedFitness()) -> Metrics:
    """Metrics of a :class:`Program` or :class:`heuristics.contract.Rule` on ``data``.

    Expression rules and programs run through the fused interpreter; function
    rules are called per token by a compiled loop, then reduced.

    Raises: InputError if the rule needs a column the split lacks.
    """
    program = rule if isinstance(rule, Program) else rule.program
    if program is not None:
        check_features(program, data, getattr(rule, "name", "program"))
        return metrics_from_counts(program_counts(program, data), data.n, fitness)
    return evaluate_thresholds(thresholds(rule, data), data, fitness)


def reference_metrics(tau: np.ndarray, traces: Traces, fitness: SeedFitness = SeedFitness()) -> Metrics:
    """Plain-numpy metrics of raw thresholds, independent of the interpreter (for tests)."""
    tau = np.asarray(tau, dtype=np.float64)
    n = tau.size
    invalid = ~np.isfinite(tau)
    t = np.clip(np.where(invalid, 0.0, tau), 0.0, 1.0)
    r = standard_threshold(traces["target_prob"], traces["draft_prob"])
    accept = traces["rand_value"] < t
    base = traces["baseline_accepts"]
    counts = np.array([accept.sum(), (accept & ~base).sum(), (base & ~accept).sum(), invalid.sum(),
                       t.sum(), np.maximum(0.0, t - r).sum(), np.maximum(0.0, r - t).sum()], dtype=np.float64)
    return metrics_from_counts(counts, n, fitness)
