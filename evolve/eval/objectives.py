"""Speed/quality objectives at block level: ``speed_at_tv`` and the ``pareto`` objectives.

Both read the block metrics of :mod:`evolve.eval.evaluator` (Leviathan et al.
2023, arXiv 2211.17192, section 3), computed with a draft length gamma:
``tokens_per_call`` (expected tokens one target call emits, in [1, gamma + 1])
and ``tv_per_token`` (expected total-variation damage per emitted token,
each depth's TV weighted by the probability that it is reached).

speed_at_tv (objective ``speed_at_tv``)
    Maximise tokens per call subject to TV per token <= budget b:

        f = tokens_per_call - K * max(0, tv_per_token - b) / max(b, TV_UNIT)

    with K = :data:`DEFAULT_PENALTY` = 10 and TV_UNIT = :data:`TV_UNIT` = 0.001
    (the scale used at b = 0). Inside the budget f is exactly tokens per call;
    at the budget the penalty starts from 0, so f is continuous there; beyond
    it f falls by K = 10 tokens per call for every budget's worth of excess
    (1 token per call for 10% over budget). That is about 100 times steeper
    than what the extra damage buys on the frontier (on the default data
    d tokens_per_call / d tv_per_token is about 10, so 10% more budget at b =
    0.01 buys about 0.01 tokens per call), so the optimum of f sits on the
    budget, never beyond it.

pareto (objective ``pareto``)
    Three objectives for NSGA-II (Deb et al. 2002; DEAP's ``selNSGA2``):
    (speed, up), (tv_per_token, down), (program size in nodes, down), where
    speed = speed_at_tv with b = the TV cap (default 0.05, the largest default
    budget of ``benchmark.py pareto``): tokens per call inside the cap, and
    steeply less beyond it, so rules far outside the region of interest are
    dominated (e.g. ``always_accept`` by the constant 0 of the same size) and
    the front stays where the comparison looks.

The objective registry
    A run optimises one :class:`Objective`, named by ``python -m evolve run --objective``:
    ``acceptance_quality`` and ``expected`` (the acceptance-quality fitness,
    :class:`evolve.eval.evaluator.AcceptanceQualityFitness`, on the sampled outcomes or in
    expectation), ``speed_at_tv`` and ``pareto`` (above); for verification-length policies
    ``tokens_per_second`` (within ``tv_budget`` when a lossy rule verifies the drafts:
    :func:`tokens_per_second_at_tv`) and ``pareto_tokens_per_second`` (NSGA-II over tokens per second
    within ``tv_cap``, TV per token and size). An objective says which kinds of program
    it scores (:mod:`evolve.kinds.registry`), whether it needs the block metrics, how it turns one
    program's train metrics into DEAP fitness values, and what the champion selection reads on
    valid. :func:`register_objective` adds one from Python, as gplearn's ``make_fitness`` does
    (docs/reference/api.md); every part of the search reads the objective object, never its name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from evolve.errors import InputError
from evolve.eval.costs import concurrent_tokens_per_second
from evolve.eval.evaluator import Metrics
from evolve.kinds.base import ProgramKind

#: Default draft length gamma of the block objectives.
DEFAULT_GAMMA = 5
#: Default TV-per-token budget (``tv_budget``) of ``speed_at_tv``.
DEFAULT_BUDGET = 0.01
#: Default TV-per-token cap (``tv_cap``) of the ``pareto`` speed objective.
DEFAULT_TV_CAP = 0.05
#: K: tokens per call lost per budget's worth of excess TV.
DEFAULT_PENALTY = 10.0
#: Scale of the excess at budget 0 (TV per token).
TV_UNIT = 1e-3
#: DEAP fitness weights of the pareto objectives (speed up, TV down, size down).
PARETO_WEIGHTS: tuple[float, float, float] = (1.0, -1.0, -1.0)
#: Names of the pareto objectives, in order.
PARETO_OBJECTIVES: tuple[str, str, str] = ("tokens_per_call", "tv_per_token", "size")


def check_budget(budget: float, name: str = "tv_budget") -> float:
    """``budget`` as a float after checking that it is a TV per token in [0, 1].

    Raises: InputError naming ``name`` (the value's name, e.g. ``tv_budget``
    or ``tv_cap``) and the value for a non-number, NaN, infinity or a value
    outside [0, 1].
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) \
            or not 0.0 <= budget <= 1.0:
        raise InputError(f"{name} must be a TV per token in [0, 1] (value {budget!r})")
    return float(budget)


def speed_at_tv_value(tokens_per_call: float, tv_per_token: float, budget: float = DEFAULT_BUDGET,
                      penalty: float = DEFAULT_PENALTY) -> float:
    """tokens_per_call - K * max(0, tv_per_token - budget) / max(budget, TV_UNIT) (see the module doc).

    Args:
        tokens_per_call: expected tokens per target call (>= 1).
        tv_per_token: expected TV per emitted token (>= 0).
        budget: TV per token allowed, >= 0.
        penalty: K, tokens per call lost per budget's worth of excess.

    Returns: the objective (tokens per call); -inf for NaN inputs.
    """
    if math.isnan(tokens_per_call) or math.isnan(tv_per_token):
        return -math.inf
    return tokens_per_call - penalty * max(0.0, tv_per_token - budget) / max(budget, TV_UNIT)


def block_values(metrics: Metrics) -> tuple[float, float]:
    """(tokens_per_call, tv_per_token) of ``metrics``.

    Raises: ValueError when the block metrics were not computed (no gamma, or a
    split without ``draft_index``).
    """
    if metrics.tokens_per_call is None or metrics.tv_per_token is None:
        raise ValueError("block metrics missing: evaluate with gamma on a split with draft_index")
    return metrics.tokens_per_call, metrics.tv_per_token


def speed_at_tv(metrics: Metrics, budget: float = DEFAULT_BUDGET, penalty: float = DEFAULT_PENALTY) -> float:
    """The ``speed_at_tv`` objective of one rule's metrics (see :func:`speed_at_tv_value`).

    Raises: ValueError when the block metrics are missing.
    """
    tpc, tv = block_values(metrics)
    return speed_at_tv_value(tpc, tv, budget, penalty)


def pareto_values(metrics: Metrics, size: int, tv_cap: float = DEFAULT_TV_CAP,
                  penalty: float = DEFAULT_PENALTY) -> tuple[float, float, float]:
    """The three NSGA-II objectives (speed up, TV per token down, size down) of one program.

    speed = :func:`speed_at_tv_value` (tokens_per_call, tv_per_token, tv_cap):
    tokens per call within the cap. NaN TV becomes +inf (worst).

    Raises: ValueError when the block metrics are missing.
    """
    tpc, tv = block_values(metrics)
    speed = speed_at_tv_value(tpc, tv, tv_cap, penalty)
    return speed, (math.inf if math.isnan(tv) else tv), float(size)


def within_budget(metrics: Metrics, budget: float) -> bool:
    """Whether the rule's TV per emitted token is at most ``budget``."""
    return block_values(metrics)[1] <= budget


#: Fitness given to a program whose objective value is not finite (worst for maximised, negated for minimised).
WORST = 1e9


def quality_margin(metrics: Metrics, params: Any, expected: bool = False) -> float:
    """(quality - quality_floor) / standard error of the quality estimate; +-inf for a zero error.

    Quality Q = 1 - w_fa * fa - w_fr * fr with rates fa, fr over N drafted tokens
    (false accepts and false rejects, or with ``expected`` the expected TV and
    expected false-reject rates and Q = ``expected_quality``). The standard
    error is sqrt((w_fa^2 fa (1 - fa) + w_fr^2 fr (1 - fr)) / N): binomial for
    counted rates, an upper bound for means of values in [0, 1], covariance
    ignored. ``params`` carries the acceptance-quality parameters
    (:class:`evolve.eval.evaluator.AcceptanceQualityFitness`). Returns +inf when
    the error is 0 and Q >= floor, -inf when Q < floor with no error, 0.0 when N is 0.
    """
    n = metrics.records
    if n == 0:
        return 0.0
    if expected:
        quality, fa, fr = metrics.expected_quality, metrics.expected_tv, metrics.expected_false_reject
    else:
        quality, fa, fr = metrics.quality_score, metrics.false_accepts / n, metrics.false_rejects / n
    fa, fr = min(max(fa, 0.0), 1.0), min(max(fr, 0.0), 1.0)
    var = (params.false_accept_weight ** 2 * fa * (1 - fa) + params.false_reject_weight ** 2 * fr * (1 - fr)) / n
    excess = quality - params.quality_floor
    if var <= 0.0:
        return math.inf if excess >= 0 else -math.inf
    return excess / math.sqrt(var)


#: The benchmark row metrics that can judge a champion (:attr:`Objective.measure`).
MEASURES: tuple[str, ...] = ("fitness", "tokens_per_call", "tokens_per_second")


@dataclass(frozen=True)
class Objective:
    """What a run optimises (see "The objective registry" in the module doc).

    The callables receive the run's settings ``cfg`` (a :class:`evolve.search.config.RunConfig`
    or any object with its fields: ``tv_budget``, ``tv_cap``, ``acceptance_quality_fitness()``).

    Attributes:
        name: registry name (``--objective NAME``, key ``objective`` of champion files).
        description: one line for the command's help.
        score: ``score(metrics, cfg) -> float``, higher is better: ranks a single-objective
            population on train, picks the champion on valid (every objective) and fills the
            logbook's ``best_valid``.
        values: ``values(metrics, size, cfg) -> tuple`` of DEAP fitness values of a program of
            ``size`` nodes (several for a multi-objective run); None: ``(score(metrics, cfg),)``.
        weights: DEAP fitness weights (+1 maximise, -1 minimise); more than one value runs NSGA-II
            (Deb et al. 2002) and keeps the final front.
        kinds: names of kinds of program it scores besides those that list it (a built-in kind lists the
            objectives that score it, :attr:`evolve.kinds.base.ProgramKind.objectives`, and the built-in objectives
            list none; :func:`scores_kind`). A user's objective scores thresholds unless it says otherwise.
        needs_blocks: it reads the block metrics (tokens per call, TV per token): the data needs
            ``draft_index`` and the run's ``gamma`` applies.
        margin: ``margin(metrics, cfg) -> float`` for objectives with a quality floor: the
            champion choice of a warm-started run prefers near-equal candidates far from the floor
            (:mod:`evolve.search.champion`); None: no floor.
        worst: fitness values given in place of non-finite ones; None: -:data:`WORST` for a
            maximised value, +:data:`WORST` for a minimised one.
        reads_costs: it reads the run's cost file and concurrency settings (which other objectives refuse).
        measure: the benchmark row metric that judges a champion of this objective
            (:mod:`evolve.report.compare.verdict`): ``fitness`` (the acceptance-quality fitness, the column
            ``Fitness``), ``tokens_per_call`` or ``tokens_per_second``.
    """

    name: str
    description: str
    score: Callable[[Metrics, Any], float]
    values: Callable[[Metrics, int, Any], tuple] | None = None
    weights: tuple[float, ...] = (1.0,)
    kinds: tuple[str, ...] = ("threshold",)
    needs_blocks: bool = False
    margin: Callable[[Metrics, Any], float] | None = None
    worst: tuple[float, ...] | None = None
    reads_costs: bool = False
    measure: str = "fitness"

    @property
    def multi(self) -> bool:
        """True when the run keeps a front (NSGA-II) rather than one ranking."""
        return len(self.weights) > 1

    def fitness_values(self, metrics: Metrics, size: int, cfg: Any) -> tuple[float, ...]:
        """DEAP fitness values of one program (non-finite values replaced by :attr:`worst`)."""
        raw = self.values(metrics, size, cfg) if self.values is not None else (self.score(metrics, cfg),)
        worst = self.worst or tuple(-WORST if w > 0 else WORST for w in self.weights)
        return tuple(float(v) if math.isfinite(v) else w for v, w in zip(raw, worst))


def _quality_score(metrics: Metrics, cfg: Any) -> float:
    return metrics.fitness


def _expected_score(metrics: Metrics, cfg: Any) -> float:
    return metrics.expected_fitness


def _speed_score(metrics: Metrics, cfg: Any) -> float:
    return speed_at_tv(metrics, cfg.tv_budget)


def _pareto_values(metrics: Metrics, size: int, cfg: Any) -> tuple[float, float, float]:
    return pareto_values(metrics, size, cfg.tv_cap)


def _raw_tokens_per_second(metrics: Any, cfg: Any) -> float:
    requests = getattr(cfg, "concurrency", 1)
    if requests == 1:
        return metrics.tokens_per_second
    return concurrent_tokens_per_second(metrics.tokens_per_call, metrics.mean_verified, metrics.mean_drafted,
                                        requests, cfg.cost_model)


def tokens_per_second_at_tv(tokens_per_second: float, tv_per_token: float, plain_token_s: float,
                            budget: float = DEFAULT_BUDGET, penalty: float = DEFAULT_PENALTY) -> float:
    """Tokens per second with TV per token <= ``budget``: :func:`speed_at_tv_value` in units of plain decoding's
    speed, (speedup - K * max(0, tv - budget) / max(budget, TV_UNIT)) / ``plain_token_s``: exactly the tokens
    per second inside the budget (always, for a lossless verifier), and K times plain decoding's tokens per
    second less for every budget's worth of excess. -inf for NaN inputs."""
    if math.isnan(tokens_per_second):
        return -math.inf
    # the penalty of speed_at_tv (0 within the budget: the tokens per second exactly), in plain decoding's speed
    return tokens_per_second + speed_at_tv_value(0.0, tv_per_token, budget, penalty) / plain_token_s


def _tokens_per_second(metrics: Any, cfg: Any) -> float:
    tv = metrics.tv_per_token
    return tokens_per_second_at_tv(_raw_tokens_per_second(metrics, cfg), 0.0 if tv is None else tv,
                                   cfg.cost_model.plain_token_s, cfg.tv_budget)


def _pareto_tokens_per_second(metrics: Any, size: int, cfg: Any) -> tuple[float, float, float]:
    tv = metrics.tv_per_token
    speed = tokens_per_second_at_tv(_raw_tokens_per_second(metrics, cfg), tv, cfg.cost_model.plain_token_s,
                                    cfg.tv_cap)
    return speed, (math.inf if math.isnan(tv) else tv), float(size)


#: The registered objectives by name (:func:`register_objective` adds more).
OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("acceptance_quality", "acceptance rate times quality score (half the quality score below the "
              "quality floor), on the sampled accept/reject outcomes", _quality_score, worst=(0.0,), kinds=(),
              margin=lambda m, cfg: quality_margin(m, cfg.acceptance_quality_fitness())),
    Objective("expected", "the acceptance-quality fitness in expectation (noise-free)", _expected_score,
              worst=(0.0,), kinds=(), margin=lambda m, cfg: quality_margin(m, cfg.acceptance_quality_fitness(), True)),
    Objective("speed_at_tv", "tokens per target call with TV per token <= tv_budget", _speed_score,
              kinds=(), needs_blocks=True, measure="tokens_per_call"),
    Objective("pareto", "NSGA-II over tokens per call, TV per token and program size (keeps the front; the "
              "champion is the fastest member within tv_budget on valid)", _speed_score, values=_pareto_values,
              weights=PARETO_WEIGHTS, kinds=(), needs_blocks=True, measure="tokens_per_call"),
    Objective("tokens_per_second", "expected tokens per second under the run's cost file (the costs setting), "
              "exact from the records; with concurrency R > 1, the throughput of R requests decoded together; "
              "with a lossy verifier (verify_with), within tv_budget; for tree shapes, on the tree tables",
              _tokens_per_second, kinds=(), needs_blocks=True, reads_costs=True, measure="tokens_per_second"),
    Objective("pareto_tokens_per_second", "NSGA-II over tokens per second (within tv_cap), TV per token and program "
              "size, for a policy whose drafts a lossy rule verifies (verify_with); the champion is the fastest "
              "member within tv_budget on valid", _tokens_per_second, values=_pareto_tokens_per_second,
              weights=PARETO_WEIGHTS, kinds=(), needs_blocks=True, reads_costs=True, measure="tokens_per_second"),
)}


def register_objective(objective: Objective) -> Objective:
    """Add ``objective`` to :data:`OBJECTIVES`, so runs can name it (``RunConfig(objective=NAME)``).

    Raises: ValueError if another objective of that name is registered, its weights are empty, or its measure is
    not one of :data:`MEASURES`.
    """
    if objective.measure not in MEASURES:
        raise ValueError(f"objective {objective.name!r}: measure {objective.measure!r} is not one of "
                         f"{', '.join(MEASURES)}")
    if not objective.weights:
        raise ValueError(f"objective {objective.name!r}: no fitness weights")
    if len(objective.weights) == 1 and objective.weights[0] <= 0:
        raise ValueError(f"objective {objective.name!r}: a single-value objective is maximised (weights (1.0,)); "
                         f"return its negation to minimise")
    if OBJECTIVES.get(objective.name, objective) is not objective:
        raise ValueError(f"an objective named {objective.name!r} is registered already")
    OBJECTIVES[objective.name] = objective
    return objective


def scores_kind(objective: Objective, kind: ProgramKind) -> bool:
    """Whether ``objective`` scores runs of ``kind``: the kind lists it, or it lists the kind."""
    return objective.name in kind.objectives or kind.name in objective.kinds


def objective_named(name: Any) -> Objective:
    """The registered objective ``name``. Raises InputError (param ``objective``) for an unknown one."""
    if isinstance(name, Objective):
        return name
    if not isinstance(name, str) or name not in OBJECTIVES:
        raise InputError(f"unknown objective {name!r} (choose from {', '.join(OBJECTIVES)})", param="objective")
    return OBJECTIVES[name]


__all__ = ["DEFAULT_GAMMA", "DEFAULT_BUDGET", "DEFAULT_TV_CAP", "DEFAULT_PENALTY", "TV_UNIT", "PARETO_WEIGHTS",
           "PARETO_OBJECTIVES", "speed_at_tv", "speed_at_tv_value", "pareto_values", "block_values",
           "within_budget", "check_budget", "tokens_per_second_at_tv", "WORST", "quality_margin", "Objective", "OBJECTIVES", "register_objective",
           "objective_named", "scores_kind"]
