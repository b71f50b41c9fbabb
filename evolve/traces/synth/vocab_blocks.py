"""The vocabulary model's sequences and splits (``--model vocab``): speculation blocks emulated with the standard
rule over the per-position distributions of :mod:`evolve.traces.synth.vocab_model` (its module doc: the
distribution model and its knobs).

Block emulation (one sequence)
------------------------------
A sequence has ``avg_length//2 + U{0..avg_length-1}`` rows rounded to whole
blocks (at least one) of ``gamma`` rows, the same length rule as the
independent-features model (``position`` is the drafted token's index in the
text). A block starts at context position t; depth k drafts position t+k;
each row draws its own (p, q), x ~ q, rand_value u ~ U[0, 1) and
baseline_accepts = u < min(1, p(x)/q(x)). The standard rule's outcome on the
block decides how far the context advances: by the accepted prefix plus one
(the corrected or bonus token). All gamma drafts are recorded, including those
past the first rejection, consecutively with draft_index 0..gamma-1. So
``position`` values repeat inside a sequence when the positions after a
rejection are drafted again (by a new block, from a new context); the latent
difficulty belongs to the text position and is shared by such redrafts.
Each record also gets ``target_rank`` (rank of x under p),
``block_residual_mass`` (block verification's residual mass with the block
weight after x and the next depth's (p, q) of the same block, NaN at depth
gamma - 1) and ``block_residual_phi`` (phi of the next depth's (p, q) on a grid,
the residual masses of relaxed block verification, NaN at depth gamma - 1;
:mod:`evolve.verification.block`); they are computed without random draws, so
every other column is what it was before they existed.

Randomness and threads
----------------------
Each sequence has its own xoshiro256++ stream seeded with splitmix64 from
(seed, sequence index, stream id); normal variates come from a 256-layer
ziggurat on that stream. Sequences are generated in parallel with ``prange``,
so the output depends only on the seed, never on the thread count.

Python API: :func:`generate_split` (a DataFrame of the schema's required and
optional columns), :func:`block_distributions` (the whole distributions of one
block, for checks), :func:`measure_throughput`.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

import numba
import numpy as np
import pandas as pd
from numba import njit, prange

from evolve.errors import InputError
from evolve.traces.schema import RESIDUAL_PHI_POINTS
from evolve.traces.synth.rng import next_double, next_normal, sample_index, seed_state
from evolve.traces.synth.vocab_model import VocabModelConfig, difficulty_step, draw_pair, zipf_log_rank
from evolve.verification.block import block_weight, residual_mass, residual_phi, target_rank
from evolve.verification.tokenwise import acceptance_ratio

_STREAM_LENGTH = 0
_STREAM_CONTENT = 1


class VocabSetup(NamedTuple):
    """What every sequence of one split shares besides the :class:`VocabParams` (the kernels' model record):
    ``seed`` uint64, ``gamma`` the draft length, ``log_rank`` float64 (V,) (:func:`zipf_log_rank`).

    The parameters stay a separate argument: Numba's parallel loops cannot take a record nested in another.
    """

    seed: np.uint64
    gamma: int
    log_rank: np.ndarray


class VocabColumns(NamedTuple):
    """The output arrays of the generator, one per column of :func:`generate_split` (its names), n rows each:
    int64 ``seq_id``, ``position``, ``draft_index``, ``target_rank``; bool ``top_token_match``,
    ``baseline_accepts``; float64 the others; ``block_residual_phi`` float64 (n, K), or (0, K) for none."""

    seq_id: np.ndarray
    position: np.ndarray
    draft_prob: np.ndarray
    target_prob: np.ndarray
    draft_entropy: np.ndarray
    target_entropy: np.ndarray
    top_token_match: np.ndarray
    rand_value: np.ndarray
    baseline_accepts: np.ndarray
    draft_index: np.ndarray
    draft_top_prob: np.ndarray
    target_top_prob: np.ndarray
    overlap: np.ndarray
    block_residual_mass: np.ndarray
    target_rank: np.ndarray
    block_residual_phi: np.ndarray


class KeptBlock(NamedTuple):
    """Where :func:`_sequence` copies the (p, q) of every depth of block ``block`` (-1: none):
    ``p``, ``q`` float64 (gamma, V)."""

    block: int
    p: np.ndarray
    q: np.ndarray


@njit(cache=True)
def _block_counts(seed, sequences, avg_length, gamma):
    """Blocks per sequence: round((avg//2 + U{0..avg-1}) / gamma), at least 1. int64 (sequences,)."""
    out = np.empty(sequences, dtype=np.int64)
    for i in range(sequences):
        state = seed_state(seed, i, _STREAM_LENGTH)
        rows = avg_length // 2 + int(next_double(state) * avg_length)
        out[i] = max(1, (rows + gamma // 2) // gamma)
    return out


@njit(cache=True)
def _sequence(setup, params, i, blocks, row0, out, keep):
    """Rows of sequence ``i`` (``blocks`` blocks) from row ``row0`` of ``out`` (module doc, "Block emulation").

    ``setup`` a :class:`VocabSetup`, ``params`` the :class:`VocabParams`, ``out`` a :class:`VocabColumns`; its
    ``block_residual_mass``, ``target_rank`` and ``block_residual_phi`` take
    no random draws (:mod:`evolve.verification.block`). The (p, q) of
    every depth of block ``keep.block`` go to ``keep`` (a :class:`KeptBlock`).
    """
    seed, gamma, log_rank = setup.seed, setup.gamma, setup.log_rank
    seq_id, position, draft_index = out.seq_id, out.position, out.draft_index
    draft_prob, target_prob, draft_entropy, target_entropy = (out.draft_prob, out.target_prob, out.draft_entropy,
                                                              out.target_entropy)
    top_match, rand_value, baseline = out.top_token_match, out.rand_value, out.baseline_accepts
    draft_top, target_top, overlap_out = out.draft_top_prob, out.target_top_prob, out.overlap
    residual_out, rank_out, phi_out = out.block_residual_mass, out.target_rank, out.block_residual_phi
    keep_block, p_keep, q_keep = keep.block, keep.p, keep.q
    state = seed_state(seed, i, _STREAM_CONTENT)
    V = log_rank.shape[0]
    p = np.empty(V)
    q = np.empty(V)
    work = np.empty(V)
    horizon = blocks * (gamma + 1) + gamma + 1
    diff = np.empty(horizon)
    diff[0] = next_normal(state)
    filled = 1
    t = 0
    row = row0
    for b in range(blocks):
        prefix = 0
        rejected = False
        weight = 1.0
        for k in range(gamma):
            pos = t + k
            while filled <= pos:
                diff[filled] = difficulty_step(state, diff[filled - 1], params)
                filled += 1
            hp, hq, top_p, top_q, arg_p, arg_q, ov = draw_pair(state, diff[pos], k, pos, params, log_rank, p, q, work)
            if k > 0:  # the previous record's residual mass needs this depth's (p, q)
                residual_out[row - 1] = residual_mass(weight, p, q)
                if phi_out.shape[0]:
                    residual_phi(p, q, phi_out[row - 1])
            if b == keep_block:
                p_keep[k, :] = p
                q_keep[k, :] = q
            x = sample_index(state, q)
            u = next_double(state)
            r = acceptance_ratio(p[x], q[x])
            accept = u < r
            weight = block_weight(weight, p[x], q[x])
            seq_id[row] = i
            position[row] = pos
            draft_index[row] = k
            draft_prob[row] = q[x]
            target_prob[row] = p[x]
            draft_entropy[row] = hq
            target_entropy[row] = hp
            top_match[row] = arg_p == arg_q
            rand_value[row] = u
            baseline[row] = accept
            draft_top[row] = top_q
            target_top[row] = top_p
            overlap_out[row] = ov
            rank_out[row] = target_rank(p, x)
            residual_out[row] = np.nan  # stays NaN at the block's last depth
            if phi_out.shape[0]:
                phi_out[row, :] = np.nan
            row += 1
            if not rejected:
                if accept:
                    prefix += 1
                else:
                    rejected = True
        t += prefix + 1


@njit(cache=True, parallel=True)
def _generate(setup, params, blocks, offsets, out):
    """Every sequence into ``out`` (:class:`VocabColumns`): sequence i has ``blocks[i]`` blocks from row
    ``offsets[i]`` (int64 (sequences,) each); ``setup`` a :class:`VocabSetup`, ``params`` its :class:`VocabParams`."""
    none = np.empty((0, 0))
    keep = KeptBlock(-1, none, none)
    for i in prange(blocks.shape[0]):
        _sequence(setup, params, i, blocks[i], offsets[i], out, keep)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise InputError(f"must be an integer in [0, 2**64) (value {seed!r})", param="seed")
    return int(seed)


def generate_split(sequences: int, seed: int, config: VocabModelConfig = VocabModelConfig()) -> pd.DataFrame:
    """Draw ``sequences`` sequences of speculation blocks from the vocabulary model.

    Args:
        sequences: number of sequences (>= 1).
        seed: integer in [0, 2**64); the same seed and config give the same frame
            whatever the number of threads.
        config: model knobs (validated).

    Returns: DataFrame with every schema column, required and optional
    (seq_id, position, draft_prob, target_prob, draft_entropy, target_entropy,
    top_token_match, rand_value, baseline_accepts, draft_index, draft_top_prob,
    target_top_prob, overlap, block_residual_mass, target_rank, block_residual_phi), about
    ``sequences * avg_length`` rows. ``block_residual_mass``, ``target_rank`` and
    ``block_residual_phi`` (:mod:`evolve.verification.block`; a list of
    RESIDUAL_PHI_POINTS floats per row) take no random draws, so the other
    columns are those of a model without them.

    Raises: InputError for a bad size, seed or knob (naming the parameter).
    """
    if isinstance(sequences, bool) or not isinstance(sequences, (int, np.integer)) or sequences < 1:
        raise InputError(f"must be an integer >= 1 (value {sequences!r})", param="sequences")
    seed = _check_seed(seed)
    config.validate()
    gamma = int(config.gamma)
    blocks = _block_counts(np.uint64(seed), int(sequences), int(config.avg_length), gamma)
    rows = blocks * gamma
    offsets = np.concatenate(([0], np.cumsum(rows)[:-1])).astype(np.int64)
    n = int(rows.sum())
    cols = {
        "seq_id": np.empty(n, np.int64), "position": np.empty(n, np.int64),
        "draft_prob": np.empty(n), "target_prob": np.empty(n),
        "draft_entropy": np.empty(n), "target_entropy": np.empty(n),
        "top_token_match": np.empty(n, np.bool_), "rand_value": np.empty(n),
        "baseline_accepts": np.empty(n, np.bool_), "draft_index": np.empty(n, np.int64),
        "draft_top_prob": np.empty(n), "target_top_prob": np.empty(n), "overlap": np.empty(n),
        "block_residual_mass": np.empty(n), "target_rank": np.empty(n, np.int64),
    }
    phi = np.empty((n, RESIDUAL_PHI_POINTS))
    setup = VocabSetup(np.uint64(seed), gamma, zipf_log_rank(int(config.vocab_size)))
    _generate(setup, config.params(), blocks, offsets, VocabColumns(**cols, block_residual_phi=phi))
    frame = pd.DataFrame(cols)
    frame["block_residual_phi"] = list(phi)
    return frame


def block_distributions(seed: int, sequence: int, block: int,
                        config: VocabModelConfig = VocabModelConfig()) -> tuple[np.ndarray, np.ndarray]:
    """The target and draft distributions of one block of :func:`generate_split` (for checks and tests).

    Args: the split's ``seed`` and ``config``; ``sequence`` (its ``seq_id``, >= 0) and
    ``block`` (0-based index of the block in that sequence).
    Returns: (p, q) float64 (gamma, V): row k is the (p, q) the record at
    ``draft_index`` k of that block was drawn from. The sequence is regenerated
    from its own stream, so this does not depend on how many sequences the split has.
    Raises: InputError for a bad seed or config, a negative sequence, or a block
    index outside the sequence.
    """
    seed = _check_seed(seed)
    config.validate()
    gamma, V = int(config.gamma), int(config.vocab_size)
    if isinstance(sequence, bool) or not isinstance(sequence, (int, np.integer)) or sequence < 0:
        raise InputError(f"sequence: must be an integer >= 0 (value {sequence!r})")
    blocks = int(_block_counts(np.uint64(seed), int(sequence) + 1, int(config.avg_length), gamma)[sequence])
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or not 0 <= block < blocks:
        raise InputError(f"block: sequence {sequence} has blocks 0..{blocks - 1} (value {block!r})")
    n = blocks * gamma
    f, i, b = (lambda: np.empty(n)), (lambda: np.empty(n, np.int64)), (lambda: np.empty(n, np.bool_))
    out = VocabColumns(i(), i(), f(), f(), f(), f(), b(), f(), b(), i(), f(), f(), f(), f(), i(),
                       np.empty((0, RESIDUAL_PHI_POINTS)))
    keep = KeptBlock(int(block), np.empty((gamma, V)), np.empty((gamma, V)))
    _sequence(VocabSetup(np.uint64(seed), gamma, zipf_log_rank(V)), config.params(), int(sequence), blocks, 0, out,
              keep)
    return keep.p, keep.q


def measure_throughput(tokens: int = 1_000_000, seed: int = 0,
                       config: VocabModelConfig = VocabModelConfig()) -> dict:
    """Time :func:`generate_split` for the fewest sequences giving at least ``tokens`` rows.

    A small warm-up call first compiles or loads the cached machine code, so
    the timing covers generation only (with the current numba thread count).

    Returns: dict with tokens (rows generated), seconds (wall time),
    tokens_per_s, vocab_size, threads (numba threads) and cpus (os.cpu_count()).
    Raises: InputError for a bad seed or config.
    """
    config.validate()
    seed = _check_seed(seed)
    generate_split(2, seed, config)
    estimate = int(1.2 * max(1, tokens) / config.avg_length) + 2
    while True:
        blocks = _block_counts(np.uint64(seed), estimate, int(config.avg_length), int(config.gamma))
        rows = np.cumsum(blocks * config.gamma)
        if rows[-1] >= tokens:
            break
        estimate *= 2
    sequences = int(np.searchsorted(rows, tokens)) + 1  # rows of sequence i do not depend on the count
    start = time.perf_counter()
    df = generate_split(sequences, seed, config)
    seconds = time.perf_counter() - start
    return {"tokens": int(len(df)), "seconds": seconds, "tokens_per_s": len(df) / seconds,
            "vocab_size": int(config.vocab_size), "threads": int(numba.get_num_threads()),
            "cpus": os.cpu_count()}


__all__ = ["VocabSetup", "VocabColumns", "KeptBlock", "generate_split", "block_distributions", "measure_throughput"]
