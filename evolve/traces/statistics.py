"""The ``statistics`` of a dataset's ``metadata.json`` checked for meaning: counts are integers >= 0, rates are
fractions, entropies and tokens per call non-negative (:func:`check_statistics`), and a split's statistics agree with
its records (:func:`check_split_statistics`)."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from evolve.errors import InputError, json_type, printable


#: Statistics of a split that count something: integers >= 0.
COUNT_STATISTICS = ("tokens", "sequences", "texts", "generated_tokens", "target_calls", "eos_finished")


#: Statistics of a split that are fractions: numbers in [0, 1].
RATE_STATISTICS = ("standard_acceptance", "expected_standard_acceptance", "top_token_match", "mean_overlap")


#: Statistics of a split that are non-negative numbers (entropies in nats, tokens per target call).
NONNEGATIVE_STATISTICS = ("mean_draft_entropy", "mean_target_entropy", "median_target_entropy",
                          "tokens_per_target_call")


def check_statistics(stats: Any, path: str | os.PathLike) -> None:
    """Check the ``statistics`` of a ``metadata.json`` (``path``) for meaning: None (absent) or an object of
    {split: object}; in each split, :data:`COUNT_STATISTICS` are integers >= 0 (not booleans, not 12.7),
    :data:`RATE_STATISTICS` numbers in [0, 1], :data:`NONNEGATIVE_STATISTICS` finite numbers >= 0 (a rate or a
    mean may be NaN/null for a split of 0 tokens), ``acceptance_by_depth`` a list of rates (or null). Other keys
    are kept as written.

    Raises: InputError naming ``path``, the key path (``statistics.train.target_calls``) and the value.
    """
    if stats is None:
        return
    if not isinstance(stats, dict):
        raise InputError(f"{path}: key 'statistics' must be a JSON object of {{split: statistics}}, found "
                         f"{json_type(stats)} (value {printable(repr(stats))[:80]})")
    for split, values in stats.items():
        where = f"statistics.{printable(str(split))}"
        if not isinstance(values, dict):
            raise InputError(f"{path}: key '{where}' must be a JSON object, found {json_type(values)} "
                             f"(value {printable(repr(values))[:80]})")
        empty = values.get("tokens") == 0
        for key in COUNT_STATISTICS:
            v = values.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"{path}: key '{where}.{key}' must be an integer >= 0 (value {v!r})")
        for key in RATE_STATISTICS + NONNEGATIVE_STATISTICS:
            if key not in values or (empty and (values[key] is None or values[key] != values[key])):
                continue
            v, top = values[key], (1.0 if key in RATE_STATISTICS else float("inf"))
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= top or v == float("inf"):
                raise InputError(f"{path}: key '{where}.{key}' must be a "
                                 f"{'number in [0, 1]' if top == 1.0 else 'finite number >= 0'} (value {v!r})")
        depth = values.get("acceptance_by_depth")
        if depth is not None:
            ok = isinstance(depth, list) and all(
                x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and (x != x or 0 <= x <= 1))
                for x in depth)
            if not ok:
                raise InputError(f"{path}: key '{where}.acceptance_by_depth' must be a list of numbers in [0, 1] "
                                 f"(value {printable(repr(depth))[:80]})")


def check_split_statistics(traces: Any, path: str | os.PathLike) -> None:
    """Check a split's statistics (``traces``, its :class:`evolve.traces.io.Traces`) (``metadata.json`` at ``path``) against its records: ``tokens`` is its number
    of records and ``sequences`` its number of distinct ``seq_id`` (where given), and ``target_calls`` is at least
    its block count: a target call verifies at most one speculation block, so with ``draft_index`` the split has
    at least as many target calls as blocks (records of ``draft_index`` 0).

    Raises: InputError naming ``path``, the key, its value and what the records hold.
    """
    stats = ((traces.metadata or {}).get("statistics") or {}).get(traces.split) or {}
    where = f"{path}: key 'statistics.{traces.split}"
    tokens, sequences = stats.get("tokens"), stats.get("sequences")
    if tokens is not None and tokens != traces.n:
        raise InputError(f"{where}.tokens' is {tokens!r}, but {traces.source} holds {traces.n} records")
    if sequences is not None and "seq_id" in traces.columns:
        found = int(np.unique(traces.columns["seq_id"]).size)
        if sequences != found:
            raise InputError(f"{where}.sequences' is {sequences!r}, but {traces.source} holds {found} sequences "
                             f"(distinct seq_id)")
    calls = stats.get("target_calls")
    if calls is None or "draft_index" not in traces.columns:
        return
    blocks = int(np.count_nonzero(traces.columns["draft_index"] == 0))
    if calls < blocks:
        raise InputError(f"{where}.target_calls' is {calls!r}, fewer than the "
                         f"{blocks} speculation blocks of {traces.source} (one target call verifies at most one block)")


__all__ = ["COUNT_STATISTICS", "RATE_STATISTICS", "NONNEGATIVE_STATISTICS", "check_statistics",
           "check_split_statistics"]
