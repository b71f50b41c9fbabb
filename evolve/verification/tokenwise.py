"""Token-wise verification: the standard rule and its residual (Leviathan et al. 2023, arXiv 2211.17192).

A token-wise rule accepts the drafted token x at one depth iff u < tau (u uniform in [0, 1)); the
standard rule is tau = r = min(1, p(x)/q(x)). After a rejection the recovered token is drawn from the
residual norm(max(0, p - q tau)) (norm(max(0, p - q)) for the standard rule), which makes the emitted
token follow p exactly when tau = r (terms: :mod:`evolve.verification`).

:func:`residual_distribution` is also the exported numpy modules' function, word for word
(:mod:`evolve.export.numpy_module` copies its source, the docstring cut to its first line);
:data:`TORCH_RESIDUAL` is the torch modules' text of the same function (the core imports numpy
only, so torch's version is kept here as source text, and tests/test_verification.py holds it to
:func:`residual_distribution`).
"""
from __future__ import annotations

import numpy as np
from numba import njit


def standard_threshold(target_prob: np.ndarray, draft_prob: np.ndarray) -> np.ndarray:
    """Standard rule r = min(1, p/q) (Leviathan et al. 2023, arXiv 2211.17192).

    Args: float64 arrays of shape (n,), ``draft_prob`` > 0. Returns float64 (n,).
    """
    return np.minimum(1.0, target_prob / draft_prob)


@njit(cache=True)
def acceptance_ratio(target_prob, draft_prob):
    """The standard rule's threshold of one drafted token, r = min(1, p(x)/q(x)), for the Numba kernels
    (:func:`standard_threshold` for arrays; Leviathan et al. 2023, arXiv 2211.17192).

    Args: floats p(x) >= 0 and q(x) > 0. Returns a float in [0, 1].
    """
    return min(1.0, target_prob / draft_prob)


@njit(cache=True)
def residual_weights(p, q, tau, out):
    """The residual's unnormalised weights max(0, p(v) - q(v) tau(v)) of every token v, into ``out``, for the
    Numba kernels (:func:`residual_distribution` normalises them for arrays; Leviathan et al. 2023 for tau = r).

    Args: ``p``, ``q``, ``tau`` (thresholds in [0, 1]) and ``out`` float64 (V,). Returns nothing.
    """
    for v in range(p.shape[0]):
        out[v] = max(0.0, p[v] - q[v] * tau[v])


def residual_distribution(target_probs, draft_probs, tau):
    """norm(max(0, p - q * tau)) over the last axis (float64); p itself where that is all zero.

    Args: ``target_probs`` p and ``draft_probs`` q float64 (..., V) (any array-like; the last axis is the
    vocabulary), ``tau`` the thresholds, broadcastable to q (tau = 1 gives the standard rule's residual
    norm(max(0, p - q)); a threshold per token of the vocabulary, or one per row as (..., 1)).
    Returns float64 (..., V), each row summing to 1, or p itself where max(0, p - q tau) is all zero
    (which a rejection cannot produce in exact arithmetic). Raises nothing (numpy's broadcasting errors
    aside). Leviathan et al. 2023 (arXiv 2211.17192) for tau = r.
    """
    p = np.asarray(target_probs, dtype=np.float64)
    r = np.maximum(p - np.asarray(draft_probs, dtype=np.float64) * np.asarray(tau, dtype=np.float64), 0.0)
    s = r.sum(axis=-1, keepdims=True)
    return np.where(s > 0, r / np.where(s > 0, s, 1.0), p)


#: :func:`residual_distribution` in torch, the text of the exported torch modules (float64 tensors on
#: p's device; the same operations in the same order).
TORCH_RESIDUAL = '''
def residual_distribution(target_probs, draft_probs, tau):
    """norm(max(0, p - q * tau)) over the last axis (float64); p itself where that is all zero."""
    p = torch.as_tensor(target_probs, dtype=torch.float64)
    q = torch.as_tensor(draft_probs, dtype=torch.float64, device=p.device)
    r = torch.clamp(p - q * torch.as_tensor(tau, dtype=torch.float64, device=p.device), min=0.0)
    s = r.sum(dim=-1, keepdim=True)
    return torch.where(s > 0, r / torch.where(s > 0, s, torch.ones_like(s)), p)
'''


__all__ = ["TORCH_RESIDUAL", "acceptance_ratio", "residual_distribution", "residual_weights", "standard_threshold"]
