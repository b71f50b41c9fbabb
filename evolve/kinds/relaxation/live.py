"""A relaxation weight decoded live: relaxed block verification of each block against p~_d = (1 - w_d) p_d + w_d q_d
(Sun et al. 2024, arXiv 2403.10444, against the mixture target of Narasimhan et al. 2024, arXiv 2405.19261), w_d
from the depth's prefix-level features (:func:`relaxation_weights`), the bonus token after a full block from p_k.
Its damage is the one :mod:`evolve.eval.relaxed_block` scores from records: the expected sum of
w_d TV(p_d, q_d) = w_d (1 - overlap_d) over the emitted depths, given the drafts (:func:`relaxed_block_decision`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from evolve.engine.onehot import densify
from evolve.live.decoding import (ChainDecoder, block_decision_with_stops, candidate_features, live_block_verified,
                                  rule_features, rule_thresholds)
from evolve.verification.block import relaxed_damage, relaxed_target


def relaxation_weights(rule, p: np.ndarray, q: np.ndarray, p_ent: np.ndarray, q_ent: np.ndarray, start: int,
                       drafts: Sequence[int], needed: Sequence[str] = ()) -> np.ndarray:
    """The relaxation weights w float64 (k,) in [0, 1] of a relaxation ``rule`` at depths 0..k-1 of a block.

    Args as :func:`evolve.live.decoding.candidate_features` (``p``, ``q`` float64 (k, V), entropies (k,) in nats, ``start``
    the position of depth 0, the k drafted ids); the rule reads prefix-level features only (a
    relaxation rule cannot read the drafted token's), computed as the harvester's records hold them.
    NaN or infinite weights become 0, then they are clamped to [0, 1] (as
    :mod:`evolve.eval.relaxed_block` scores them).
    """
    X = candidate_features(p, q, p_ent, q_ent, start, np.asarray(drafts)[:, None])
    return rule_thresholds(rule, X, needed)


def relaxed_block_decision(p: np.ndarray, q: np.ndarray, drafts: Sequence[int], eta: np.ndarray,
                           w: np.ndarray) -> tuple[int, np.ndarray, float, float]:
    """Relaxed block verification's decision on one block: :func:`evolve.live.decoding.block_decision` against the relaxed
    targets p~_d = (1 - w_d) p_d + w_d q_d at the drafted depths d = 0..k-1 and p_k itself for the
    bonus token (w = 0 there).

    Args: ``p`` float64 (k+1, V), ``q`` float64 (k, V), ``drafts`` the k drafted ids, ``eta`` float64
    (k,) uniforms, ``w`` float64 (k,) weights in [0, 1]. Returns (n, the unnormalised distribution of
    the next token, the expected tokens of the call 1 + E[n], the block's expected damage given the
    drafts: E[sum over the emitted depths d of w_d TV(p_d, q_d)], TV(p_d, q_d) = 1 - sum_v min(p_d,
    q_d), by :func:`evolve.verification.block.relaxed_damage`). With w = 0 everywhere it is exactly
    :func:`evolve.live.decoding.block_decision` with damage 0.
    """
    k = len(drafts)
    p, q = densify(p), densify(q)
    w = np.asarray(w, dtype=np.float64)
    target = np.concatenate([relaxed_target(p[:k], q, w), p[k:k + 1]])
    n, dist, expected, h = block_decision_with_stops(target, q, drafts, eta)
    damage = w * (1.0 - np.clip(np.minimum(p[:k], q).sum(axis=1), 0.0, 1.0))
    return n, dist, expected, float(relaxed_damage(h, damage, k))


def live_decoder(rule) -> ChainDecoder:
    """A relaxation rule (the weight w) decodes by relaxed block verification against (1 - w) p + w q
    (:func:`evolve.live.decoding.live_block_verified` with :func:`relaxed_block_decision`), in a row named after the
    rule. Raises InputError for a rule reading a feature live decoding does not compute."""
    needed = rule_features(rule)

    def relax(p, q, p_ent, q_ent, start, drafts, eta):
        k = len(drafts)
        w = relaxation_weights(rule, p[:k], q, p_ent, q_ent, start, drafts, needed)
        return relaxed_block_decision(p, q, drafts, eta, w)

    def verify(engine, batch, k, counts, keep=None):
        return live_block_verified(engine, batch, k, counts, keep, relax)

    return ChainDecoder(rule.name, verify, needed)


__all__ = ["live_decoder", "relaxation_weights", "relaxed_block_decision"]
