"""Rendering the throughput of ``benchmark.py --costs FILE --concurrency 1,4,16``: speedup over plain decoding at R
concurrent requests (:func:`concurrency_lines`), and the per-batch-size schedule's ranges (:func:`schedule_lines`);
the rows are computed by :mod:`evolve.commands.compare.concurrency`."""
from __future__ import annotations

from typing import Sequence

from evolve.report.compare.rows import Comparison

#: Rows of the concurrency table: the plain decoding row, then every row with a policy's metrics.
PLAIN = "plain decoding"
#: The row of the per-batch-size schedule of fixed lengths.
SCHEDULE = "per-batch-size schedule"


def schedule_text(schedule: Sequence) -> str:
    """``R 1-3: 4, R 4-15: 2, R >= 16: 0`` (draft length per range of concurrent requests); ``schedule``: the ranges
    (:class:`evolve.kinds.verify_length.eval_schedule.ScheduleRange`: start, end, length)."""
    return ", ".join(f"R {s.start}-{s.end}: {s.length}" if s.end is not None and s.end > s.start else
                     f"R {s.start}: {s.length}" if s.end is not None else f"R >= {s.start}: {s.length}"
                     for s in schedule)


def schedule_lines(comparison: Comparison) -> list[str]:
    """One line per split with a schedule: its ranges and the split it was tuned on."""
    return [f"{SCHEDULE} ({split}, tuned on {found['tuned_on']}; draft length per batch size): "
            f"{schedule_text(found['schedule'])}" for split, found in comparison.schedules.items()]


def concurrency_lines(rows: list[dict], requests: Sequence[int]) -> list[str]:
    """A plain-text table: one line per row, speedup over plain decoding at every number of requests."""
    width = max(len(r["heuristic"]) for r in rows)
    head = "speedup at R requests".ljust(width) + "".join(f"{f'R={n}':>9}" for n in requests)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(r["heuristic"].ljust(width) + "".join(f"{r['speedup'][n]:>8.3f}x" for n in requests))
    return lines


__all__ = ["PLAIN", "SCHEDULE", "concurrency_lines", "schedule_lines", "schedule_text"]
