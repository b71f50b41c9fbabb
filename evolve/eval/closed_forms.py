"""Closed forms of the block metrics when every drafted token has the same acceptance rate.

With a constant acceptance probability alpha per drafted token the block
formulas of :mod:`evolve.eval.evaluator` reduce to geometric sums (Leviathan et
al. 2023, arXiv 2211.17192, section 3). Tests compare the evaluator against
them; :func:`naive_theoretical_speedup` is a different, cruder formula kept to
show where it disagrees.
"""
from __future__ import annotations

from evolve.eval.costs import Costs


def tokens_per_call_constant(alpha: float, gamma: int) -> float:
    """Expected tokens per target call when every drafted token is accepted with probability ``alpha``.

    (1 - alpha^(gamma+1)) / (1 - alpha), and gamma + 1 at alpha = 1
    (Leviathan et al. 2023, arXiv 2211.17192, eq. 1). Equals
    1 + sum_{k=1..gamma} alpha^k, the block formula with every tau = alpha.
    """
    if alpha == 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def speedup_constant(alpha: float, gamma: int, costs: Costs) -> float:
    """Expected wall-time speedup for a constant acceptance rate ``alpha`` under ``costs``.

    With the costs of a cost ratio c (:func:`evolve.eval.costs.ratio_costs`): (1 - alpha^(gamma+1)) /
    ((1 - alpha)(gamma*c + 1)) (Leviathan et al. 2023, theorem 3.8): one call costs gamma draft steps
    (c each) plus one target step (:meth:`evolve.eval.costs.Costs.speedup`).
    """
    return costs.speedup(tokens_per_call_constant(alpha, gamma), gamma)


def naive_theoretical_speedup(gamma: int, alpha: float) -> float:
    """A naive speedup estimate, gamma*alpha / (1 + gamma*(1 - alpha)), kept for comparison only.

    Where it differs from the expected tokens per call (:func:`tokens_per_call_constant`)
    and why: it is not derived from the decode step. It counts gamma*alpha
    accepted drafts as if each position were accepted independently (a
    rejection really ends the block, so the prefix is geometric, not binomial),
    drops the token every step emits after the accepted prefix (the residual
    sample or the bonus token), and divides by an ad hoc 1 + gamma*(1 - alpha).
    So at alpha = 0 it gives 0 although every target call still emits one token
    (true tokens per call 1), at alpha = 1 it gives gamma instead of gamma + 1,
    and it ignores the draft's cost (the cost ratio c of :func:`speedup_constant`).
    """
    return gamma * alpha / (1.0 + gamma * (1.0 - alpha))
