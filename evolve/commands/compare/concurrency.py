"""Throughput against the number of concurrent requests (``benchmark.py --costs FILE --concurrency 1,4,16``).

With R requests decoded together, one engine step drafts for every request and runs the target once
over all their new tokens. With a policy's expected tokens per call t and expected drafts verified per
call L (from the records), a step covers R (L + 1) new target tokens,
and the throughput is

    tokens_per_second(R) = R t / (batch_seconds(R (L + 1)) + D * draft_token_s)

with ``batch_seconds`` the cost file's batch curve (:meth:`evolve.eval.costs.Costs.batch_seconds`) and D
the drafts made per call (L for the policies that draft only what they verify, gamma for
``survival_prefix``); plain decoding gives R / batch_seconds(R). Scope: the expectations replace the
per-request distributions (a batch sums many requests), and drafting is assumed batched across the
requests at the cost of one request's drafting (optimistic for the drafter). This is the regime
confidence-scheduled verification targets (DSpark, Cheng et al. 2026, arXiv 2607.05147): when the
target is compute-bound, verifying long blocks for every request costs more than it emits, and
fixed-length speculation falls below plain decoding. ``python -m evolve run --evolve verify-length
--concurrency R`` evolves a policy for that regime.

On splits with block metrics the table also has the row ``per-batch-size schedule``, the schedule of the kind whose
compare hook gives one (:attr:`evolve.commands.compare.table.KindScorer.schedule`: the verification-length kind's,
at each R the fixed draft length with the most tokens per second on the tuning split, merged into the batch-size
ranges vLLM's and TensorRT-LLM's per-batch-size settings take, :mod:`evolve.kinds.verify_length.eval_schedule`),
scored on the split; the ranges are printed under the table
(:func:`evolve.report.compare.concurrency.schedule_lines`).
"""
from __future__ import annotations

from typing import Sequence

from evolve.eval.costs import Costs, concurrent_tokens_per_second
from evolve.report.compare.concurrency import PLAIN, SCHEDULE
from evolve.report.compare.rows import Comparison
from evolve.kinds.registry import program_kind


def concurrency_rows(comparison: Comparison, requests: Sequence[int], costs: Costs) -> list[dict]:
    """``[{"heuristic", "split", "tokens_per_second": {R: value}, "speedup": {R: value}}]``: plain decoding and every
    row with verification-length metrics (``mean_verified``, ``mean_drafted``) or a fixed gamma (drafting and
    verifying gamma tokens). At R = 1 a row's own tokens per second is used (the exact per-call expectation
    of its table), so the R = 1 column is the table's speedup."""
    out = []
    for split in comparison.splits:
        plain = {r: (1.0 / costs.plain_token_s if r == 1 else r / costs.batch_seconds(r)) for r in requests}
        out.append({"heuristic": PLAIN, "split": split, "tokens_per_second": plain,
                    "speedup": {r: 1.0 for r in requests}})
        for row in comparison.rows:
            if row.split != split or row.value("tokens_per_call") is None or row.gamma is None:
                continue
            kind = None if row.program_kind is None else program_kind(row.program_kind)  # None: block_verification
            if kind is not None and row.heuristic in getattr(kind.hooks().compare, "bounds", ()):
                continue  # a bound for one request's costs says nothing at R requests
            verified = getattr(row.verifier, "mean_verified", float(row.gamma))
            drafted = getattr(row.verifier, "mean_drafted", float(row.gamma))
            tps = {r: (row.value("tokens_per_second") if r == 1 and row.value("tokens_per_second") is not None else
                       concurrent_tokens_per_second(row.value("tokens_per_call"), verified, drafted, r, costs))
                   for r in requests}
            out.append({"heuristic": row.heuristic, "split": split, "tokens_per_second": tps,
                        "speedup": {r: tps[r] / plain[r] for r in requests}})
        found = comparison.schedules.get(split)
        if found is not None:
            tps = found["tokens_per_second"]
            out.append({"heuristic": SCHEDULE, "split": split, "tokens_per_second": tps,
                        "speedup": {r: tps[r] / plain[r] for r in requests}})
    return out


__all__ = ["concurrency_rows"]
