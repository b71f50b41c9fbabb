"""The deployed rows of ``benchmark.py live --costs FILE``: when the cost file was timed inside an engine's own loop
(``benchmark.py perf --write-costs FILE --engine NAME``, :mod:`evolve.perf.engine_loop`), it predicts that engine's
speed, so its predictions go to the rows that run in that engine, not to this project's backend.

The rows of an exported policy inside llama-cpp-python (``llama-cpp-python NAME (exported)``,
:mod:`evolve.live.peers`) make, under greedy decoding, the same calls as this project's row of the policy ``NAME``
(the same text, the same drafts kept: the module's policy decides on the same columns), so their prediction is that
row's calls priced under the engine's file (:meth:`evolve.live.decoding.LiveCounts.predicted_seconds`); the engine's
plain row is predicted at the file's plain decoding. This project's rows get no prediction (their backend is not the
engine the file timed), and the file's plain decoding is checked against the engine's own plain row
(:func:`evolve.eval.costs.check_plain_rate`).
"""
from __future__ import annotations

from typing import Sequence

from evolve.errors import InputError
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


def predict_engine_rows(rows: list[dict], counts: Sequence, costs, engine: str) -> float | None:
    """Set ``predicted_tokens_per_s`` and ``predicted_speedup`` of ``rows`` (the live report's, this project's first,
    aligned with ``counts``, their :class:`evolve.live.decoding.LiveCounts`) for a file timed in ``engine``'s loop
    (module doc). Returns the engine's plain row's measured tokens/s (None when the run has none)."""
    ours = {exported_row_name(engine, row["rule"]): c for row, c in zip(rows, counts)}  # by their exported row
    plain = None
    for row in rows:
        row["predicted_tokens_per_s"] = row["predicted_speedup"] = None
        if row["engine"] != engine:
            continue
        name = row["rule"]
        if name == f"{engine} plain":
            plain = row["tokens_per_s"]
            predicted = 1.0 / costs.plain_token_s
        elif name in ours:
            predicted = ours[name].tokens / ours[name].predicted_seconds(costs)
        else:
            continue
        row["predicted_tokens_per_s"] = predicted
        row["predicted_speedup"] = predicted * costs.plain_token_s
    return plain


__all__ = ["check_engine_run", "predict_engine_rows"]
