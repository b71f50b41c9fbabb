"""Scoring a verification-length policy that reads the request so far: each text's blocks walked in order.

A policy reading a history feature (:mod:`evolve.kinds.verify_length.history`) decides a block from what its own
choices did at the text's earlier blocks, so its values cannot be computed for all records at once. The walk
(:func:`program_walk`) takes the harvested blocks of every text in their order; before each block it writes the
text's history into the block's decision rows, runs the program on them (the fast path's register code,
:func:`evolve.eval.fastpath.kernels.run_code`, the same operators bit for bit), verifies the prefix L the values
choose exactly as :func:`evolve.kinds.verify_length.eval_policy.length_counts` does, and advances the history by
that call's outcome (:func:`evolve.kinds.verify_length.history.advance_history`).

The outcome of a call is the one the harvest's own random numbers give it (:func:`outcome_tables`): under a
per-token verifier (the standard rule, lossless, or a threshold rule) a draft is accepted iff its record's
``rand_value`` u < tau, the test the harvest ran with the same u, so the accepted count of the first L drafts is
exactly what that call would have accepted. Under block verification (relaxed or not) the records hold no such
draw, and the history advances by expectations from the prefix tables: E[accepted] = tokens(L) - 1, the first
draft's acceptance tokens(1) - 1 and the probability that all L are accepted tokens(L) - tokens(L - 1), clipped
to [0, 1] (an approximation: expectations in place of sampled outcomes).

What stays approximate, as for every feature of the record scorer: the block after a call is the one the
harvest's call led to (the harvest verified every drafted record), whatever the policy verified; calls that
drafted nothing leave no record (a prompt-lookup miss), so they do not reach the history; under position weighting
the history advances once per harvested block. ``tests/test_history_live.py`` checks the walk against live
decoding of the same texts.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from evolve.eval.evaluator import EvalData
from evolve.eval.fastpath.kernels import operand, run_code
from evolve.eval.fastpath.layouts import TILE, WIDTH, Instr
from evolve.eval.fastpath.lowering import DERIVED_BASE, Lowered
from evolve.gp.primitives import FEATURES, HISTORY_FEATURES
from evolve.kinds.verify_length.history import START, advance_history_jit

#: Indices of the history features in :data:`evolve.gp.primitives.FEATURES`.
HISTORY_INDEX: tuple[int, ...] = tuple(FEATURES.index(f) for f in HISTORY_FEATURES)


def history_rows(data: EvalData) -> np.ndarray:
    """int64 (N_HISTORY,): the row of ``data.X`` holding each history feature (-1 where it has none)."""
    return np.array([data.feature_rows[i] for i in HISTORY_INDEX], dtype=np.int64)


def text_starts(data: EvalData) -> np.ndarray:
    """bool (n,): True at the first record of every run of one text's records (:attr:`EvalData.text_runs`; the
    first record only when the split has no text ids: one text)."""
    out = np.zeros(data.n, dtype=np.bool_)
    if data.n:
        if data.text_runs is None:
            out[0] = True
        else:
            out[data.text_runs[0][:-1]] = True
    return out


def reads_rows(lowered: Lowered, rows: np.ndarray) -> bool:
    """Whether the register code of ``lowered`` reads any of the feature rows ``rows`` of X (int64; -1 ignored)."""
    wanted = {int(r) for r in rows if r >= 0}
    if not wanted:
        return False
    code = lowered.code.reshape(-1, WIDTH)
    operands = np.concatenate([code[:, Instr.ARG0:].ravel(), [lowered.result]])
    read = {-int(v) - 1 for v in operands if -DERIVED_BASE < v < 0}
    return bool(read & wanted)


def outcome_tables(data: EvalData, verifier) -> tuple[np.ndarray, np.ndarray, bool]:
    """(tau float64 (n,), u float64 (n,), sampled): the per-token test a call's outcome is drawn with (module doc):
    the verifier's thresholds (NaN/inf -> 0, clamped to [0, 1]; the standard rule's min(1, p/q) without a rule) and
    the records' ``rand_value``, sampled True; for a block verifier zeros and False (expectations instead).

    Raises: InputError when the verifier's rule reads a feature the split lacks."""
    if verifier.block:
        return np.zeros(data.n), np.zeros(data.n), False
    if verifier.rule is None:
        return data.r, data.u, True
    from evolve.eval.evaluator import thresholds
    tau = np.asarray(thresholds(verifier.rule, data), dtype=np.float64)
    return np.clip(np.where(np.isfinite(tau), tau, 0.0), 0.0, 1.0), data.u, True


@njit(cache=True)
def call_outcome(i, L, tau, u, sampled, tok):
    """(accepted, first_hit, all_accepted) of a call verifying the ``L`` drafts at records ``i..i+L-1`` (module doc):
    sampled with the records' u < tau, or expected from the prefix table ``tok``."""
    if L == 0:
        return 0.0, 0.0, 1.0
    if sampled:
        a = 0
        while a < L and u[i + a] < tau[i + a]:
            a += 1
        return float(a), 1.0 if a > 0 else 0.0, 1.0 if a == L else 0.0
    accepted = tok[i + L - 1] - 1.0
    first = min(max(tok[i] - 1.0, 0.0), 1.0)
    last = tok[i + L - 1] - (tok[i + L - 2] if L > 1 else 1.0)
    return accepted, first, min(max(last, 0.0), 1.0)


@njit(cache=True)
def write_history(X, hist_rows, state, i, j):
    """Write the history ``state`` into the rows ``hist_rows`` of X (-1: none) for records ``i..j-1``."""
    for h in range(hist_rows.size):
        if hist_rows[h] >= 0:
            for t in range(i, j):
                X[hist_rows[h], t] = state[h]


@njit(cache=True)
def block_end(depth, i):
    """Index one past the speculation block starting at record ``i``."""
    j = i + 1
    while j < depth.size and depth[j] != 0:
        j += 1
    return j


@njit(cache=True)
def add_call(tok, dmg, i, verified, drafted, forward, draft_s, cover, out):
    """Add one call verifying the first ``verified`` drafts of the block at record ``i`` and drafting ``drafted``
    tokens to ``out`` (the counts of :func:`evolve.kinds.verify_length.eval_policy.length_counts`): weighted by
    ``cover[i] / tokens`` calls (one call where ``cover[i]`` <= 0)."""
    tokens = tok[i + verified - 1] if verified > 0 else 1.0
    k = cover[i] / tokens if cover[i] > 0.0 else 1.0
    out[0] += k
    out[1] += k * tokens
    if verified > 0:
        out[5] += k * dmg[i + verified - 1]
    out[2] += k * (forward[verified] + drafted * draft_s)
    out[3] += k * verified
    out[4] += k * drafted


@njit(cache=True)
def program_walk(program, X, D, texts, outcomes, pricing, out, choices):
    """The walk of the module doc for one lowered program (``program``: (``code`` int32, ``consts`` float64,
    ``n_regs``, ``result``, ``rows``) as :class:`evolve.eval.fastpath.lowering.Lowered` holds them) over decision rows
    ``X`` float64 (k, n) and derived rows ``D``: adds every call to ``out`` float64 (6,) as :func:`add_call`, and
    writes each block's verified drafts to ``choices`` int64 (blocks,) when it is not empty. ``texts``:
    (``hist_rows`` int64 (N_HISTORY,), the history rows of ``X``, overwritten; ``depth``; ``starts`` bool (n,), a text
    starts here, :func:`text_starts`); ``outcomes``: (``tau``, ``u``, ``sampled``: :func:`outcome_tables`; ``tok``,
    ``dmg``: the verifier's prefix tables); ``pricing``: (``gamma``, ``forward``, ``draft_s``, ``cover``) as
    :func:`add_call` reads them."""
    code, consts, n_regs, result, rows = program
    hist_rows, depth, starts = texts
    tau, u, sampled, tok, dmg = outcomes
    gamma, forward, draft_s, cover = pricing
    buf = np.empty((max(rows, 1), TILE))
    for q in range(consts.size):
        buf[n_regs + q, :] = consts[q]
    state = np.empty(len(START))
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        if starts[i] or i == 0:
            for h in range(state.size):
                state[h] = START[h]
        write_history(X, hist_rows, state, i, j)
        g = min(j - i, gamma)
        L, going, s = 0, True, i
        while going and s < i + g:
            m = min(TILE, i + g - s)
            run_code(code, 0, code.size, X, D, buf, s, m)
            v = operand(result, X, D, buf, s, m)
            for t in range(m):
                if v[t] > 0.0:  # NaN stops
                    L += 1
                else:
                    going = False
                    break
            s += m
        add_call(tok, dmg, i, L, L, forward, draft_s, cover, out)
        if choices.size:
            choices[b] = L
        accepted, first, whole = call_outcome(i, L, tau, u, sampled, tok)
        advance_history_jit(state, float(L), accepted, first, whole)
        i, b = j, b + 1


@njit(cache=True)
def choice_counts(verified, drafted, depth, tok, dmg, forward, draft_s, cover, per_block):
    """Each block's call, given its verified and drafted tokens (int64 (blocks,) each), as :func:`add_call` into
    its row of ``per_block`` float64 (blocks, 6)."""
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        add_call(tok, dmg, i, verified[b], drafted[b], forward, draft_s, cover, per_block[b])
        i, b = j, b + 1


__all__ = ["HISTORY_INDEX", "history_rows", "text_starts", "reads_rows", "outcome_tables", "call_outcome",
           "write_history", "block_end", "add_call", "program_walk", "choice_counts"]
