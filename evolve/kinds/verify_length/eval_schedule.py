"""Per-batch-size draft-length schedules: the best fixed length for each range of concurrent requests.

Engines that batch many requests choose the draft length by batch size: vLLM's
``num_speculative_tokens_per_batch_size`` and TensorRT-LLM's ``draft_len_schedule`` (the exact names and forms
are in the engine targets, :mod:`evolve.export.engines`). With R requests decoded together, a step verifies every
request's drafts in one target call over R (L + 1) new tokens, so the length that pays at R = 1 can lose to plain
decoding at large R when the target becomes compute-bound (:func:`evolve.eval.costs.concurrent_tokens_per_second`
and the concurrency table of ``benchmark.py --costs FILE --concurrency R,...``, which prints these schedules).

:func:`fixed_length_table` scores every fixed length 0..gamma on a split (its :class:`LengthMetrics`, the policy's
exact expectations from the records); :func:`batch_schedule` picks, at each batch size of a list, the length with
the most tokens per second on the tuning split (ties to the shorter one), and merges neighbouring batch sizes that
pick the same length into ranges ``[start, end]`` (``end`` None: no upper end; the first range starts at one
request, below the smallest batch size listed, so every batch size has a length). Scope: the concurrency model's
(expectations per call stand for the per-request distributions; drafting batched at one request's cost), the batch
sizes given (a range is the batch sizes from one listed value up to the next), lossless fixed-length speculation.
A verification-length policy that does not read the batch size drafts the same at every R: its nearest schedule
(:func:`nearest_schedule`) is one range with the fixed length closest to its mean drafted tokens per call.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from evolve.eval.costs import Costs, concurrent_tokens_per_second
from evolve.eval.evaluator import EvalData
from evolve.kinds.verify_length.eval_policy import (LengthMetrics, block_cover, fixed_gamma_values, policy_metrics,
                                                    prefix_tables)
from evolve.kinds.verify_length.settings import DEFAULT_WEIGHTING, STANDARD_VERIFIER, LengthVerifier


class ScheduleRange(NamedTuple):
    """One range of a schedule: batch sizes ``start``..``end`` (inclusive; ``end`` None: no upper end) draft
    ``length`` tokens per step (0: plain decoding)."""

    start: int
    end: int | None
    length: int


def fixed_length_table(data: EvalData, gamma: int, costs: Costs, verifier: LengthVerifier = STANDARD_VERIFIER,
                       weighting: str = DEFAULT_WEIGHTING) -> list[LengthMetrics]:
    """The :class:`LengthMetrics` of every fixed draft length 0..``gamma`` on ``data`` (index = length), drafts
    verified by ``verifier`` and blocks weighted by ``weighting``, as the competitors of
    :func:`evolve.kinds.verify_length.eval_competitors.competitors` score ``best_fixed_gamma``."""
    tables = prefix_tables(data, verifier)
    cover = block_cover(data, weighting)
    return [policy_metrics(fixed_gamma_values(data, g), data, gamma, costs, verifier, tables, cover=cover)
            for g in range(gamma + 1)]


def length_throughput(metrics: LengthMetrics, requests: int, costs: Costs) -> float:
    """Tokens per second of a fixed length (its ``metrics``) at ``requests`` concurrent requests: its own tokens
    per second at one request (the exact expectation per call), else the concurrency model's."""
    if requests == 1:
        return metrics.tokens_per_second
    return concurrent_tokens_per_second(metrics.tokens_per_call, metrics.mean_verified, metrics.mean_drafted,
                                        requests, costs)


def batch_schedule(table: Sequence[LengthMetrics], requests: Sequence[int], costs: Costs) -> tuple[ScheduleRange, ...]:
    """The schedule of the module doc from ``table`` (:func:`fixed_length_table` of the tuning split) at the batch
    sizes ``requests`` (positive ints; sorted and deduplicated here). Raises: ValueError for no batch size."""
    sizes = sorted(set(int(r) for r in requests))
    if not sizes:
        raise ValueError("a schedule needs at least one batch size")
    best = [max(range(len(table)), key=lambda g: (length_throughput(table[g], r, costs), -g)) for r in sizes]
    ranges: list[ScheduleRange] = []
    for i, (r, g) in enumerate(zip(sizes, best)):
        end = sizes[i + 1] - 1 if i + 1 < len(sizes) else None
        if ranges and ranges[-1].length == g:
            ranges[-1] = ranges[-1]._replace(end=end)
        else:
            ranges.append(ScheduleRange(1 if not ranges else r, end, g))
    return tuple(ranges)


def schedule_length(schedule: Sequence[ScheduleRange], requests: int) -> int:
    """The draft length ``schedule`` gives at ``requests`` (>= 1) concurrent requests."""
    found = [s.length for s in schedule if s.start <= requests and (s.end is None or requests <= s.end)]
    return found[0] if found else 0


def nearest_schedule(metrics: LengthMetrics, gamma: int) -> tuple[ScheduleRange, ...]:
    """The nearest schedule of a policy that does not read the batch size (its ``metrics`` on the tuning split):
    one range from one request up with the fixed length closest to its mean drafted tokens per call, in
    0..``gamma`` (half-way rounds up)."""
    drafted = metrics.mean_drafted
    length = min(gamma, max(0, int(drafted + 0.5))) if drafted == drafted else 0  # NaN (no call): plain decoding
    return (ScheduleRange(1, None, length),)




def split_schedule(data: EvalData, tune: tuple[EvalData, str], gamma: int, requests: Sequence[int],
                   costs: Costs) -> dict:
    """The per-batch-size schedule of one split: ``{"schedule": ranges, "tuned_on": name, "tokens_per_second": {R:
    value}}``, the ranges (:class:`evolve.kinds.verify_length.eval_schedule.ScheduleRange`) tuned on ``tune`` (the
    tuning split's data and name) at the batch sizes ``requests``, and the throughput on ``data`` of the length the
    schedule gives at each R (fixed lengths 0..``gamma``, standard verification)."""
    schedule = batch_schedule(fixed_length_table(tune[0], gamma, costs), requests, costs)
    table = fixed_length_table(data, gamma, costs)
    return {"schedule": schedule, "tuned_on": tune[1],
            "tokens_per_second": {r: length_throughput(table[schedule_length(schedule, r)], r, costs)
                                  for r in requests}}


__all__ = ["split_schedule", "ScheduleRange", "batch_schedule", "fixed_length_table", "length_throughput",
           "nearest_schedule", "schedule_length"]
