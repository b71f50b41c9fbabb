"""The deployed rows of ``benchmark.py live --costs FILE``: when the cost file was timed inside an engine's own loop
(``benchmark.py perf --write-costs FILE --engine NAME``, :mod:`evolve.perf.engine_loop`), it predicts that engine's
speed, so its predictions go to the rows that run in that engine, not to this project's backend.

Every speculative row of that engine (its own prompt lookup at each K, an exported policy's module: ``llama-cpp-python
NAME (exported)``) is predicted from the calls it made there (:mod:`evolve.live.peers` logs how many drafted tokens
each call verified), priced under the engine's file (:meth:`evolve.live.decoding.LiveCounts.predicted_seconds`); so
an exported configuration, such as transformers' ``prompt_lookup_num_tokens`` decoded with ``--peer-k``, is checked
against its own prediction. A row whose calls were not logged falls back, for an exported policy, on the calls of this
project's row of the same policy (under greedy decoding the same text and the same drafts kept). The engine's plain
row is predicted at the file's plain decoding. This project's rows get no prediction (their backend is not the
engine the file timed), and the file's plain decoding is checked against the engine's own plain row
(:func:`evolve.eval.costs.check_plain_rate`).
"""
from __future__ import annotations

import warnings
from typing import Sequence

from evolve.errors import InputError, InputWarning
from evolve.eval.costs import loop_engine
from evolve.live.peers import exported_row_name


def check_engine_run(path, costs, peers: Sequence[str], backend: str) -> str | None:
    """The engine of ``costs`` (:func:`loop_engine`), checked to be decoded in this run.

    Raises: InputError (one line naming the file and both engines) for a file timed in an engine's loop when that
    engine is not among the ``peers`` decoded (the run's rows would be priced by another engine's costs).
    :func:`evolve.eval.costs.loop_engine` says which engine timed a file."""
    engine = loop_engine(costs)
    if engine is not None and engine not in peers:
        raise InputError(f"{path}: timed inside {engine}'s loop, so it predicts {engine}'s speed, but this run decodes "
                         f"on backend {backend} without peer {engine}: decode with peer {engine} (its plain and "
                         f"exported rows are then predicted) or give a cost file timed on backend {backend}",
                         param="costs")
    return engine


def _beyond(costs, row: str, longest: int) -> None:
    """Warn (InputWarning, one line naming the cost file) when ``row``'s longest call (``longest`` tokens verified) is
    longer than the calls ``costs`` timed: its prediction then extrapolates the file's forward times linearly
    (:meth:`evolve.eval.costs.Costs.forward_seconds`)."""
    timed = len(costs.target_forward_s)
    if longest > timed:
        warnings.warn(InputWarning(
            f"{costs.source}: timed calls of at most T = {timed} tokens, but row '{row}' verified up to {longest} in "
            f"one call: its prediction extrapolates the file's forward times; time calls of up to T = {longest} in the "
            f"engine's loop (benchmark.py perf, gamma_max {longest - 1})"), stacklevel=3)


def predict_engine_rows(report, costs, engine: str) -> float | None:
    """Set ``predicted_tokens_per_s`` and ``predicted_speedup`` of the rows of ``report`` (a
    :class:`evolve.report.live.LiveReport`: this project's rows first, aligned with its ``counts``, then the peers',
    aligned with its ``peer_counts``) for a file timed in ``engine``'s loop (module doc). Returns the engine's plain
    row's measured tokens/s (None when the run has none)."""
    rows = report.rows
    ours = {exported_row_name(engine, row["rule"]): c for row, c in zip(rows, report.counts)}  # by their exported row
    own = dict(zip((row["rule"] for row in rows[len(report.counts):]), report.peer_counts))
    plain = None
    for row in rows:
        row["predicted_tokens_per_s"] = row["predicted_speedup"] = None
        if row["engine"] != engine:
            continue
        name = row["rule"]
        calls = own.get(name)
        if name == f"{engine} plain":
            plain = row["tokens_per_s"]
            predicted = 1.0 / costs.plain_token_s
        elif calls is not None and calls.tokens and sum(calls.drafted.values()) == calls.target_calls > 0:
            predicted = calls.tokens / calls.predicted_seconds(costs)
            _beyond(costs, name, max(calls.drafted) + 1)
        elif name in ours:
            predicted = ours[name].tokens / ours[name].predicted_seconds(costs)
            _beyond(costs, name, max(ours[name].drafted, default=0) + 1)
        else:
            continue
        row["predicted_tokens_per_s"] = predicted
        row["predicted_speedup"] = predicted * costs.plain_token_s
    return plain


__all__ = ["check_engine_run", "predict_engine_rows"]
