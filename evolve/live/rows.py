"""The rows of ``benchmark.py live`` as measured: each row's results per (repeat, text) (:class:`Entry`) and the
statistics taken from them (:func:`spread` against the row's engine's plain decoding; :func:`fastest_over` the
fastest row against each, :func:`engine_fastest_over` the fastest of the row's own engine), with the paired bootstrap intervals over texts of :mod:`evolve.eval.bootstrap`. The
command that decodes the rows is :mod:`evolve.commands.live`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from evolve.eval.bootstrap import group_weights, ratio_interval
from evolve.live.decoding import LiveCounts


@dataclass
class Entry:
    """One row decoded in the interleaved loop: its name, engine, ``run(text index) -> (ids, LiveCounts)``, whether it
    is plain decoding, ``fresh()`` (a peer row's cache across texts started again for each repeat:
    :attr:`evolve.live.peers.PeerRow.fresh`) and per (repeat, text) the results."""

    name: str
    engine: str
    run: Callable[[int], tuple[list[int], LiveCounts]]
    plain: bool = False
    fresh: Callable[[], None] | None = None
    results: dict = field(default_factory=dict)


def total(entry: Entry) -> LiveCounts:
    """An entry's counts summed over every repeat and text."""
    out = LiveCounts()
    for _, c in entry.results.values():
        out.add(c)
    return out


def per(entry: Entry, key: Callable) -> dict:
    """An entry's counts summed by ``key((repeat, text))``."""
    out: dict = {}
    for rt, (_, c) in entry.results.items():
        out.setdefault(key(rt), LiveCounts()).add(c)
    return out


def per_text(entry: Entry, texts: Sequence[int]) -> np.ndarray:
    """float64 (len(texts), 2): per text (tokens, seconds) of ``entry``, every repeat's decodes summed."""
    by_text = per(entry, lambda rt: rt[1])
    return np.array([[by_text[i].tokens, by_text[i].seconds] for i in texts], dtype=np.float64)


def spread(entry: Entry, ref: Entry, texts: Sequence[int], groups: np.ndarray, replicates: int) -> dict:
    """The measured keys of a row against its engine's plain decoding ``ref``: the median over repeats of each
    repeat's tokens/s (tokens / seconds of that repeat's prompts) and of the speedups (each repeat's own ratio),
    their min and max, the median absolute deviation of tokens/s, the paired bootstrap interval of the speedup over
    questions (``groups`` int64 (len(texts),): the question of each text, so a later turn, whose context holds the
    earlier turn's answer, is resampled with it; every repeat's decodes of a text resampled together; ``replicates``
    of the bootstrap) and the share of texts equal to ``ref``'s."""
    mine, base = per(entry, lambda rt: rt[0]), per(ref, lambda rt: rt[0])
    rates = np.array([mine[r].tokens_per_s for r in sorted(mine)])
    ref_rates = np.array([base[r].tokens_per_s for r in sorted(base)])
    speedups = rates / ref_rates
    rate = float(np.median(rates))
    _, low, high = ratio_interval(group_weights(groups, replicates), per_text(entry, texts), per_text(ref, texts))
    same = np.mean([entry.results[rt][0] == ref.results[rt][0] for rt in entry.results])
    return {"tokens_per_s": rate, "ar_tokens_per_s": float(np.median(ref_rates)),
            "speedup": float(np.median(speedups)), "repeats": int(rates.size),
            "tokens_per_s_min": float(rates.min()), "tokens_per_s_max": float(rates.max()),
            "tokens_per_s_mad": float(np.median(np.abs(rates - rate))),
            "speedup_min": float(speedups.min()), "speedup_max": float(speedups.max()),
            "speedup_low": low, "speedup_high": high, "same_text": float(same)}


def rate(entry: Entry) -> float:
    """An entry's tokens/s: the median over repeats of each repeat's tokens / seconds (NaN when a repeat took no
    time)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.median([c.tokens_per_s for c in per(entry, lambda rt: rt[0]).values()]))


def fastest(entries: Sequence[Entry]) -> int:
    """The index of the entry of the highest :func:`rate` (a NaN rate counts as the slowest; the first on a tie)."""
    rates = [rate(e) for e in entries]
    return max(range(len(rates)), key=lambda k: -np.inf if np.isnan(rates[k]) else rates[k])


def fastest_over(rows: list[dict], entries: Sequence[Entry], texts: Sequence[int], groups: np.ndarray,
                 replicates: int) -> None:
    """Add to each row ``fastest_over``: the tokens/s of the fastest configuration over this row's, every repeat's
    decodes of a text summed, with ``fastest_over_low`` and ``_high`` its paired bootstrap interval over questions
    (:func:`evolve.eval.bootstrap.ratio_interval`, as the speedups': both decoded the same texts, so the interval
    says whether the fastest is ahead of this row beyond the spread of the texts, which two rows' separate intervals
    over plain decoding do not). ``entries``: this project's plain decoding, then the rows' entries in the rows'
    order; the fastest is :func:`fastest` of them, this project's plain decoding included (then every row gets a
    ratio); the fastest row's own three are None."""
    best = fastest(entries)
    _over(rows, entries, lambda k: best, "fastest_over", texts, groups, replicates)


def engine_fastest_over(rows: list[dict], entries: Sequence[Entry], texts: Sequence[int], groups: np.ndarray,
                        replicates: int) -> None:
    """Add to each row ``engine_fastest_over`` (with ``_low`` and ``_high``): as :func:`fastest_over`, but the fastest
    configuration of the row's own engine (its plain decoding among them) over this row, so an engine's exported policy
    is compared, paired over texts, with that engine's own speculation (None for each engine's fastest row)."""
    best = {}
    for engine in dict.fromkeys(e.engine for e in entries):
        mine = [k for k, e in enumerate(entries) if e.engine == engine]
        best[engine] = mine[fastest([entries[k] for k in mine])]
    _over(rows, entries, lambda k: best[entries[k].engine], "engine_fastest_over", texts, groups, replicates)


def _over(rows: list[dict], entries: Sequence[Entry], best_of: Callable[[int], int], key: str, texts: Sequence[int],
          groups: np.ndarray, replicates: int) -> None:
    """Set ``key``, ``key_low`` and ``key_high`` of each row (entry k + 1 of ``entries``): entry ``best_of(k)``'s
    tokens/s over the row's with its paired bootstrap interval over questions (None where the row is that entry)."""
    weights = group_weights(groups, replicates)
    for k, (row, entry) in enumerate(zip(rows, entries[1:]), 1):
        b = best_of(k)
        point, low, high = (None, None, None) if k == b else ratio_interval(weights, per_text(entries[b], texts),
                                                                             per_text(entry, texts))
        row.update({key: point, f"{key}_low": low, f"{key}_high": high})


__all__ = ["Entry", "engine_fastest_over", "fastest", "fastest_over", "per", "per_text", "rate", "spread", "total"]
