"""The two record columns that need whole distributions: ``block_residual_mass`` and ``target_rank``.

Generators that know a position's whole target and draft distributions (the
vocabulary model :mod:`data.synth.vocab_model`, the harvester
:mod:`data.harvest.distributions`, the decode-loop simulator :mod:`evolve.sim.chain`)
write them with the functions here, so the three agree to the last bit.

Block verification (Ziteng Sun, Uri Mendlovic, Yaniv Leviathan, Asaf Aharoni,
Ahmad Beirami, Jae Hun Ro, Ananda Theertha Suresh 2024, "Block verification
accelerates speculative decoding", arXiv 2403.10444) weighs a block of drafted
tokens X_1..X_gamma with the *block weights*

    P_0 = 1,   P_i = min(1, P_{i-1} p_i(X_i) / q_i(X_i)),

(p_i, q_i: the target's and the draft's distributions at depth i of the block),
and needs, after i accepted tokens, the *residual mass*

    m_i = sum_x max(0, P_i p_{i+1}(x) - q_{i+1}(x))      (i < gamma).

The record of the drafted token X_{d+1} (``draft_index`` d) holds m_{d+1} in
``block_residual_mass``: the block weight after its own token times the *next*
depth's target distribution, minus the next depth's draft distribution. So it is
NaN on a block's last record, and it is never a per-token feature (it depends on
the next position). ``target_rank`` is the rank of the drafted token under the
target distribution, 0 for the arg max; tied tokens share a rank (the number of
tokens with a strictly larger probability).

Every function is ``@njit(cache=True)``; ``p``, ``q`` are float64 (V,).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def block_weight(weight, target_prob, draft_prob):
    """Next block weight min(1, weight * p(x) / q(x)) (Sun et al. 2024, arXiv 2403.10444).

    Args: the previous weight P_{i-1} in [0, 1]; p(x), q(x) of the drafted token (q(x) > 0).
    Returns: P_i, a float in [0, 1].
    """
    return min(1.0, weight * target_prob / draft_prob)


@njit(cache=True)
def residual_mass(weight, p, q):
    """m = sum_x max(0, weight * p(x) - q(x)): the mass of the block residual after a weight P_i.

    Args: ``weight`` P_i in [0, 1]; ``p``, ``q`` float64 (V,) the next depth's
    target and draft distributions. Returns: float in [0, weight].
    """
    s = 0.0
    for v in range(p.shape[0]):
        d = weight * p[v] - q[v]
        if d > 0.0:
            s += d
    return s


@njit(cache=True)
def target_rank(p, x):
    """Rank of token ``x`` under ``p`` (float64 (V,)): the number of tokens with a strictly larger probability.

    Returns: int in [0, V - 1]; 0 for the arg max (and for every token tied with it).
    """
    px = p[x]
    rank = 0
    for v in range(p.shape[0]):
        if p[v] > px:
            rank += 1
    return rank


def block_columns(p: np.ndarray, q: np.ndarray, drafts) -> tuple[np.ndarray, np.ndarray]:
    """``block_residual_mass`` and ``target_rank`` of one block's k drafted tokens.

    Args: ``p``, ``q`` float64 (k, V) the target's and the draft's distributions
    at each depth; ``drafts`` int (k,) the drafted token ids (q(x) > 0).
    Returns: (block_residual_mass float64 (k,), NaN at the last depth;
    target_rank int64 (k,)).
    """
    p = np.ascontiguousarray(p, dtype=np.float64)
    q = np.ascontiguousarray(q, dtype=np.float64)
    x = np.asarray(drafts, dtype=np.int64)
    k = x.size
    mass = np.full(k, np.nan)
    rank = np.empty(k, dtype=np.int64)
    weight = 1.0
    for d in range(k):
        weight = block_weight(weight, p[d, x[d]], q[d, x[d]])
        rank[d] = target_rank(p[d], x[d])
        if d + 1 < k:
            mass[d] = residual_mass(weight, p[d + 1], q[d + 1])
    return mass, rank


__all__ = ["block_columns", "block_weight", "residual_mass", "target_rank"]
