"""Tokens per second in ``benchmark.py``: every row with block metrics priced under a cost file.

Under a cost file (``--costs FILE``, :mod:`evolve.eval.costs`) every row with block metrics gets
``tokens_per_second`` = tokens per call / seconds per call, the seconds of a fixed draft length
gamma being ``target_forward_s(gamma + 1) + gamma * draft_token_s``, and its ``speedup`` becomes
tokens per second times ``plain_token_s`` (the default cost model gives the evaluator's speedup
exactly). Rows that price themselves (a verification-length policy's, by its own expected seconds per call:
:mod:`evolve.kinds.verify_length.report_compare`) keep their figures.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData
from evolve.report.compare.rows import Row


def with_costs(row: Row, costs: Costs, blocks: int = 0, no_draft_calls: int = 0) -> Row:
    """``row`` with ``tokens_per_second`` and the cost file's ``speedup`` (rows scored at a fixed gamma; a
    verification-length row already has both). ``blocks``: the split's speculation blocks, ``no_draft_calls``:
    its target calls without a draft (:attr:`evolve.eval.evaluator.EvalData.no_draft_calls`), counted as plain
    decoding steps: tokens per second = (blocks * tokens per call + no_draft_calls) / (blocks * seconds of a
    gamma-draft call + no_draft_calls * plain_token_s)."""
    tpc = row.value("tokens_per_call")
    if tpc is None or row.gamma is None or row.value("tokens_per_second") is not None:
        return row
    if no_draft_calls and blocks:
        tps = (blocks * tpc + no_draft_calls) / (blocks * costs.fixed_gamma_seconds(row.gamma)
                                                 + no_draft_calls * costs.plain_token_s)
    else:
        tps = tpc / costs.fixed_gamma_seconds(row.gamma)
    return dataclasses.replace(row, tokens_per_second=tps, cost_speedup=tps * costs.plain_token_s)


def apply_costs(rows: Sequence[Row], costs: Costs, data: EvalData | None = None) -> list[Row]:
    """Every row :func:`with_costs` (with the blocks and calls without a draft of ``data``, the rows' split)."""
    blocks = int((data.depth == 0).sum()) if data is not None and data.depth is not None else 0
    no_draft = data.no_draft_calls if data is not None else 0
    return [with_costs(r, costs, blocks, no_draft) for r in rows]


def price_rows(rows: Sequence[Row], costs: Costs, data: EvalData | None = None) -> list[Row]:
    """The rows as the comparison prints them: under a cost file :func:`apply_costs`; under a flat cost ratio, whose
    time unit is a target step and not a second, every row marked ``in_seconds=False`` (no tokens per second)."""
    if costs.measured:
        return apply_costs(rows, costs, data)
    return [dataclasses.replace(r, in_seconds=False) for r in rows]


__all__ = ["with_costs", "apply_costs", "price_rows"]
