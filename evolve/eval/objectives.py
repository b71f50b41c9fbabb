"""Speed/quality objectives at block level: ``speed_at_tv`` and the ``pareto`` objectives.

Both read the block metrics of :mod:`evolve.eval.evaluator` (Leviathan et al.
2023, arXiv 2211.17192, section 3), computed with a draft length gamma:
``tokens_per_call`` (expected tokens one target call emits, in [1, gamma + 1])
and ``tv_per_token`` (expected total-variation damage per emitted token,
each depth's TV weighted by the probability that it is reached).

speed_at_tv (fitness kind ``speed_at_tv``)
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

pareto (fitness kind ``pareto``)
    Three objectives for NSGA-II (Deb et al. 2002; DEAP's ``selNSGA2``):
    (speed, up), (tv_per_token, down), (program size in nodes, down), where
    speed = speed_at_tv with b = the TV cap (default 0.05, the largest default
    budget of ``benchmark.py pareto``): tokens per call inside the cap, and
    steeply less beyond it, so rules far outside the region of interest are
    dominated (e.g. ``always_accept`` by the constant 0 of the same size) and
    the front stays where the comparison looks.
"""
from __future__ import annotations

import math

from evolve.eval.evaluator import Metrics

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
    from evolve.errors import InputError
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


__all__ = ["DEFAULT_GAMMA", "DEFAULT_BUDGET", "DEFAULT_TV_CAP", "DEFAULT_PENALTY", "TV_UNIT", "PARETO_WEIGHTS",
           "PARETO_OBJECTIVES", "speed_at_tv", "speed_at_tv_value", "pareto_values", "block_values",
           "within_budget", "check_budget"]
