"""The numbers of one speculation block, in numpy float64: distributions, sampling, residual, records.

Distributions are softmax(logits / T) computed in float64 over the first ``V``
logits; T = 0 means greedy decoding (one-hot at the arg max, lowest id on ties).
Entropies are in nats. Sampling is by inverse CDF with one uniform.

A deterministic distribution (greedy decoding, or a deterministic drafter such as n-gram prompt
lookup) is kept as :class:`OneHot` rows, the token ids alone: never a dense (m, V) float64 array.
Every function here takes dense rows or :class:`OneHot` rows and gives the same float64 values
(bit for bit) as on the dense one-hot rows: probabilities 0 or 1, entropy 0, and the
vocabulary sums (overlap, residual mass, phi) by the same sequential kernels with the one-hot
side read from its id.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from evolve.engine.onehot import OneHot, argmax_rows, block_columns_any, block_phi_any, densify, max_rows, \
    overlap_rows, values_at
from evolve.verification.tokenwise import residual_distribution, standard_threshold


@dataclass(frozen=True)
class Sampling:
    """How both models' logits become the distributions sampling uses (:func:`distributions`): ``temperature``
    T >= 0 (0: greedy), ``top_k`` K >= 0 (0: off), ``top_p`` P in (0, 1] (1: off); the engine parameters of the
    same names in Hugging Face transformers and vLLM."""

    temperature: float
    top_k: int = 0
    top_p: float = 1.0


def distributions(logits, temperature: float, top_k: int = 0, top_p: float = 1.0,
                  sparse_greedy: bool = False) -> tuple[np.ndarray | OneHot, np.ndarray]:
    """Sampling distributions and their entropies from logits, in float64.

    Args: ``logits`` torch tensor (m, V) of any float dtype; ``temperature`` T >= 0; ``top_k``
    K >= 0 (0: off); ``top_p`` P in (0, 1] (1: off).
    Returns: probs float64 (m, V) and entropies float64 (m,) in nats (>= 0) of the distribution
    sampling uses, in the order of Hugging Face transformers' logits processors and vLLM's sampler:
    softmax(logits / T); then top-k keeps the tokens whose logit is >= the K-th largest (ties at the
    boundary are all kept); then top-p keeps, in order of decreasing probability (lower id first
    on ties), the shortest prefix whose mass reaches P (the token that crosses P is kept, and
    always at least one token); the kept probabilities are renormalised, the others are exactly 0.
    T = 0 is greedy decoding: one-hot at the lowest arg max, entropy 0 (K and P change nothing);
    with ``sparse_greedy`` its rows are :class:`OneHot` (the ids only), else dense.

    The float64 values are those of the plain formulas (log-softmax, exp, -sum p log p with 0 log 0 = 0);
    the work is done in place on one float64 copy of the logits (about 2.5x faster than with temporaries).
    """
    import torch

    if temperature == 0:
        ids = logits.detach().to(device="cpu", dtype=torch.float64).numpy().argmax(axis=1)  # lowest id on ties
        if sparse_greedy:
            return OneHot(ids.astype(np.int64), int(logits.shape[-1])), np.zeros(ids.shape[0], dtype=np.float64)
        probs = np.zeros(tuple(logits.shape), dtype=np.float64)
        probs[np.arange(logits.shape[0]), ids] = 1.0
        return probs, np.zeros(logits.shape[0], dtype=np.float64)
    x = logits.detach().to(device="cpu", dtype=torch.float64, copy=True)
    if temperature != 1.0:
        x.div_(temperature)
    if 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p < 1.0:
        p = torch.softmax(x, dim=-1)
        sp, order = torch.sort(p, dim=-1, descending=True, stable=True)
        drop_sorted = (torch.cumsum(sp, dim=-1) - sp) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        x = x.masked_fill(drop, float("-inf"))
    logp = torch.log_softmax(x, dim=-1)
    p = torch.exp(logp)
    # p * logp is NaN exactly where p = 0 and logp = -inf (a truncated token) and 0 where exp underflows:
    # zeroing the NaNs is the guard "where p > 0" of -sum p log p, with the same bits
    ent = torch.clamp(-logp.mul_(p).nan_to_num_(nan=0.0).sum(dim=-1), min=0.0)
    return p.numpy(), ent.numpy()


def sample_index(probs: np.ndarray | OneHot, u: float) -> int:
    """Inverse-CDF sample of a float64 distribution (V,) (or a one-row :class:`OneHot`: its id) with a
    uniform u in [0, 1).

    Never returns a zero-probability index. Raises nothing.
    """
    if isinstance(probs, OneHot):
        return int(probs.ids)
    c = np.cumsum(probs)
    i = int(np.searchsorted(c, u * c[-1], side="right"))
    if i >= probs.size:
        i = int(np.flatnonzero(probs > 0)[-1])
    return i


def standard_residual(p: np.ndarray | OneHot, q: np.ndarray | OneHot) -> np.ndarray | OneHot:
    """The standard rule's residual norm(max(0, p - q)) of one position, dense or :class:`OneHot` rows
    (Leviathan et al. 2023, arXiv 2211.17192; :func:`evolve.verification.tokenwise.residual_distribution`
    with tau = 1).

    Args: float64 (V,) target p and draft q, either a one-row :class:`OneHot`. Returns float64 (V,)
    summing to 1 (p itself in the degenerate case max(0, p - q) = 0, which a rejection cannot produce in
    exact arithmetic); a one-hot p gives p itself (its residual is p or 0).
    """
    if isinstance(p, OneHot):
        return p
    return residual_distribution(p, densify(q) if isinstance(q, OneHot) else q, 1.0)


def object_rows(values: np.ndarray) -> np.ndarray:
    """A float64 (k, K) array as an object array (k,) of its rows: a list column for a record dict or DataFrame."""
    out = np.empty(values.shape[0], dtype=object)
    for i in range(values.shape[0]):
        out[i] = values[i]
    return out


def block_records(p: np.ndarray, q: np.ndarray, p_ent: np.ndarray, q_ent: np.ndarray,
                  drafts: Sequence[int], u: np.ndarray) -> dict[str, np.ndarray]:
    """Schema columns (all but ``seq_id`` and ``position``) of one block's k drafted tokens.

    Args: p, q float64 (k, V) target and draft distributions at each depth (either may be
    :class:`OneHot` rows; the columns equal those of the dense one-hot rows); p_ent, q_ent
    float64 (k,) their entropies (nats); drafts (k,) token ids; u float64 (k,) uniforms.
    Returns: dict of arrays of length k (float64, bool, int64) as in :mod:`evolve.traces.schema`, with
    ``block_residual_mass`` (NaN on the block's last record) and ``target_rank`` from
    :func:`evolve.verification.block.block_columns` (the block of the k records actually drafted), and
    ``block_residual_phi`` (:func:`evolve.verification.block.block_phi`; an object array of k rows).
    """
    k = len(drafts)
    rows = np.arange(k)
    x = np.asarray(drafts, dtype=np.int64)
    dp, tp = values_at(q, rows, x), values_at(p, rows, x)
    r = standard_threshold(tp, dp)
    mass, rank = block_columns_any(p, q, x)
    return {
        "draft_prob": dp,
        "target_prob": tp,
        "draft_entropy": np.asarray(q_ent, dtype=np.float64),
        "target_entropy": np.asarray(p_ent, dtype=np.float64),
        "top_token_match": argmax_rows(q) == argmax_rows(p),
        "rand_value": np.asarray(u, dtype=np.float64),
        "baseline_accepts": u < r,
        "draft_index": rows.astype(np.int64),
        "draft_top_prob": max_rows(q),
        "target_top_prob": max_rows(p),
        "overlap": np.clip(overlap_rows(p, q), 0.0, 1.0),
        "block_residual_mass": mass,
        "target_rank": rank,
        "block_residual_phi": object_rows(block_phi_any(p, q)),
    }


__all__ = ["OneHot", "Sampling", "block_records", "densify", "distributions", "object_rows", "sample_index",
           "standard_residual"]
