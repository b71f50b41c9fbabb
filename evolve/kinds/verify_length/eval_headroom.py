"""The headroom a verification-length champion captures on a split, and how it stands against every competitor.

:mod:`evolve.eval.headroom` defines the share, (champion - best fixed) / (bound - best fixed) in tokens per second,
with a paired bootstrap over texts. Here its three figures come from a split's rows: the champion's, the
``best_fixed_gamma`` row (its length tuned on valid) and the ``length_oracle`` bound, each as sums per text
(:func:`text_sums`: every block's call belongs to its text; the calls without a record, known only in total, are
shared among the texts by their records); in each replicate the bound is re-optimised on the draw
(:func:`evolve.eval.headroom.dinkelbach` over every block's options). :func:`standing` also compares the champion
with each competitor row (its tokens per second over the competitor's, with the same bootstrap), so a table says
which competitor, if any, is ahead of it and whether by more than the spread.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from evolve.eval.bootstrap import group_weights, ratio_interval
from evolve.eval.evaluator import EvalData
from evolve.eval.headroom import HEADROOM_REPLICATES, dinkelbach, headroom
from evolve.kinds.verify_length.eval_competitors import block_options
from evolve.kinds.verify_length.eval_rows import Scoring

#: The rows the share is measured between.
FIXED_ROW, BOUND_ROW = "best_fixed_gamma", "length_oracle"


def block_texts(data: EvalData) -> np.ndarray:
    """int64 (blocks,): the text id of every block (one text without text ids)."""
    starts = np.flatnonzero(data.depth == 0)
    if data.text_runs is None:
        return np.zeros(starts.size, dtype=np.int64)
    runs, ids = data.text_runs
    return ids[np.searchsorted(runs, starts, side="right") - 1]


def text_sums(data: EvalData, per_block: np.ndarray, plain_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(text ids int64 (T,), float64 (T, 2) each text's expected tokens and seconds): the blocks' calls
    ``per_block`` (blocks, 6) summed per text, and the split's calls without a record (1 token, ``plain_s`` seconds
    each) shared among the texts in proportion to their records."""
    texts = block_texts(data)
    ids, index = np.unique(texts, return_inverse=True)
    sums = np.zeros((ids.size, 2))
    np.add.at(sums, index, per_block[:, 1:3])
    if data.no_draft_calls and data.n:
        records = np.zeros(ids.size)
        if data.text_runs is None:
            records[:] = data.n
        else:
            runs, run_ids = data.text_runs
            np.add.at(records, np.searchsorted(ids, run_ids), np.diff(runs))
        share = data.no_draft_calls * records / data.n
        sums[:, 0] += share
        sums[:, 1] += share * plain_s
    return ids, sums


def oracle_of(s: Scoring):
    """The bound's tokens per second on a replicate, as a function of its text weights float64 (T,) (the texts in
    :func:`text_sums` order): every block's lengths re-chosen by Dinkelbach's iteration on the draw."""
    tokens, seconds = block_options(s)
    texts = block_texts(s.data)
    ids, index = np.unique(texts, return_inverse=True)
    _, extra = text_sums(s.data, np.zeros((texts.size, 6)), float(s.forward[0]))

    def bound(weights: np.ndarray) -> float:
        w = weights[index]
        return dinkelbach(tokens, seconds, w, (float(weights @ extra[:, 0]), float(weights @ extra[:, 1])))[0]

    return bound


def standing(rows: Sequence, s: Scoring, replicates: int = HEADROOM_REPLICATES) -> list[dict]:
    """For every champion row (role ``champion``) among ``rows`` (:class:`evolve.report.compare.rows.Row` of one split,
    with ``per_text``): ``{"champion", "split", "fixed_name", "bound_name", "headroom": Headroom.to_dict(), "text": the
    share in words,
    "rivals": [{"name", "ratio", "low", "high"}]}``, rivals being every competitor policy row (bounds left out), its
    ratio the champion's tokens per second over the rival's with the 95% interval over texts, and ``unit``: ``tok/s``,
    or ``tokens per target step`` when the rows were priced by a flat cost ratio (``in_seconds`` False). Empty without
    the fixed and bound rows."""
    by_name = {r.heuristic: r for r in rows}
    fixed, bound = by_name.get(FIXED_ROW), by_name.get(BOUND_ROW)
    if fixed is None or bound is None or fixed.per_text is None:
        return []
    ids = fixed.per_text[0]
    oracle = oracle_of(s)
    weights = group_weights(ids, replicates)
    out = []
    for r in rows:
        if r.role != "champion" or r.per_text is None:
            continue
        found = headroom(r.per_text[1], fixed.per_text[1], oracle, ids, replicates)
        rivals = []
        for c in rows:
            if c.role == "champion" or c.heuristic == BOUND_ROW or c.per_text is None:
                continue
            ratio, low, high = ratio_interval(weights, r.per_text[1], c.per_text[1])
            rivals.append({"name": c.heuristic, "ratio": ratio, "low": low, "high": high})
        out.append({"champion": r.heuristic, "split": r.split, "fixed_name": FIXED_ROW, "bound_name": BOUND_ROW,
                    "headroom": found.to_dict(), "text": found.text(),
                    "unit": "tok/s" if r.in_seconds else "tokens per target step",
                    "rivals": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in x.items()}
                               for x in rivals]})
    return out


__all__ = ["FIXED_ROW", "BOUND_ROW", "block_texts", "text_sums", "oracle_of", "standing"]
