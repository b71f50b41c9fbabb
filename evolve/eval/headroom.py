"""The headroom a champion captures: how much of the room between the best fixed setting and the bound it takes.

On a split, three tokens-per-second figures describe a verification-length or tree-shape table: the best fixed
setting F (the best fixed draft length, or the best fixed tree, tuned on valid), the bound B (the oracle that knows
each call's outcome: ``length_oracle``, ``shape_oracle``) and a champion C. The *headroom share* is

    share = (C - F) / (B - F)

0 when the champion ties the fixed setting, 1 when it reaches the bound, negative when it is behind the fixed
setting; it is undefined (NaN) when the bound does not exceed the fixed setting (no headroom: no policy can beat
the fixed setting on that split). Its interval is a paired bootstrap over texts (:mod:`evolve.eval.bootstrap`):
every replicate draws the split's texts with replacement and recomputes C, F and B on the same draw (the bound
re-optimised on the draw where its per-call options are given, :func:`dinkelbach`; else its per-call choices on the
whole split kept, which can only understate the draw's bound), and the interval is the
:data:`evolve.eval.bootstrap.COVERAGE` percentile interval of the replicates' shares (replicates without headroom
left out). Defined once here; the tables of ``benchmark.py``, ``benchmark.py trees``, ``benchmark.py groups`` and
``benchmark.py live`` print it (docs/reference/glossary.md, docs/reference/math.md).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from evolve.eval.bootstrap import BOOTSTRAP_SEED, group_weights, interval_caveat, percentile_interval

#: Replicates of a headroom interval.
HEADROOM_REPLICATES = 200
#: Relative margin below which the bound does not exceed the fixed setting (no headroom).
NO_HEADROOM = 1e-9


def headroom_share(champion: float, fixed: float, bound: float) -> float:
    """(champion - fixed) / (bound - fixed), tokens per second each; NaN when bound <= fixed (to a relative
    :data:`NO_HEADROOM`) or a figure is not finite."""
    if not all(math.isfinite(x) for x in (champion, fixed, bound)) or bound - fixed <= NO_HEADROOM * abs(fixed):
        return math.nan
    return (champion - fixed) / (bound - fixed)


@dataclass(frozen=True)
class Headroom:
    """A champion's headroom share on one split: ``share`` with its interval ``low``/``high`` (NaN where undefined),
    the three figures it comes from (``champion``, ``fixed``, ``bound``: tokens per second), the ``texts`` resampled,
    the bootstrap ``replicates`` and the interval's ``caveat`` (:func:`evolve.eval.bootstrap.interval_caveat`; None
    when the split has texts enough)."""

    share: float
    low: float
    high: float
    champion: float
    fixed: float
    bound: float
    texts: int
    replicates: int
    caveat: str | None = None

    def to_dict(self) -> dict:
        """Plain dict (NaN as None: JSON has no NaN)."""
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in asdict(self).items()}

    def text(self) -> str:
        """``0.42 [0.10, 0.71]`` (:func:`share_text`)."""
        return share_text(self.to_dict())


def share_text(h: dict[str, Any]) -> str:
    """``0.42 [0.10, 0.71]`` of a headroom dict (:meth:`Headroom.to_dict`, or a benchmark's JSON record): the share
    alone when its interval was not estimated, ``n/a (no headroom)`` when the share is undefined (None or not
    finite)."""
    def finite(x) -> bool:
        return isinstance(x, (int, float)) and math.isfinite(x)

    if not finite(h.get("share")):
        return "n/a (no headroom)"
    if not (finite(h.get("low")) and finite(h.get("high"))):
        return f"{h['share']:.2f}"
    return f"{h['share']:.2f} [{h['low']:.2f}, {h['high']:.2f}]"


def dinkelbach(tokens: np.ndarray, seconds: np.ndarray, weights: np.ndarray | None = None,
               extra: tuple[float, float] = (0.0, 0.0)) -> tuple[float, np.ndarray]:
    """The largest (sum_b w_b T[b, c_b] + t0) / (sum_b w_b S[b, c_b] + s0) over one option c_b per row, and the
    options that give it (Dinkelbach 1967: at rate lam each row takes the option maximising T - lam S, lam becomes
    the resulting ratio, until it stops rising; finitely many steps).

    Args: ``tokens``, ``seconds`` float64 (B, K): each row's options (NaN: not an option; option 0 must be one);
    ``weights`` float64 (B,) (default 1); ``extra`` (t0, s0) added to both sums (calls no choice changes).
    Returns (ratio, choice int64 (B,)); the first of equal options is taken.
    """
    w = np.ones(tokens.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    T = np.where(np.isnan(tokens), -np.inf, tokens)
    S = np.where(np.isnan(seconds), 0.0, seconds)
    rows = np.arange(T.shape[0])
    choice = np.zeros(T.shape[0], dtype=np.int64)

    def ratio(c: np.ndarray) -> float:
        return float((w @ T[rows, c] + extra[0]) / (w @ S[rows, c] + extra[1]))

    lam = ratio(choice)
    for _ in range(100):
        with np.errstate(invalid="ignore"):
            found = np.argmax(T - lam * S, axis=1)
        value = ratio(found)
        if not value > lam * (1.0 + 1e-12):
            if value >= lam:
                choice = found
            break
        lam, choice = value, found
    return ratio(choice), choice


def _ratio(weights: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """sum(w tokens) / sum(w seconds) per replicate: ``weights`` (R, T), ``calls`` (T, 2)."""
    return (weights @ calls[:, 0]) / (weights @ calls[:, 1])


def headroom(champion: np.ndarray, fixed: np.ndarray, bound: np.ndarray | Callable[[np.ndarray], float],
             texts: np.ndarray, replicates: int = HEADROOM_REPLICATES, seed: int = BOOTSTRAP_SEED) -> Headroom:
    """The :class:`Headroom` of a champion from per-text sums (module doc).

    Args: ``champion``, ``fixed`` float64 (T, 2): each text's (expected tokens, seconds) under the champion and the
    best fixed setting; ``bound``: the same for the bound's calls, or a function of a replicate's text weights
    float64 (T,) returning the bound's tokens per second on that draw (it re-optimises, e.g. :func:`dinkelbach`);
    ``texts`` int64 (T,): the text id of each row (rows of one id are drawn together). ``replicates`` at least
    :data:`evolve.eval.bootstrap.MIN_REPLICATES`.
    Raises: InputError for too few replicates.
    """
    one = np.ones((1, champion.shape[0]))
    weights = group_weights(texts, replicates, seed)
    if callable(bound):
        point_b = float(bound(one[0]))
        rep_b = np.array([bound(w) for w in weights])
    else:
        point_b = float(_ratio(one, bound)[0])
        rep_b = _ratio(weights, bound)
    c, f = float(_ratio(one, champion)[0]), float(_ratio(one, fixed)[0])
    share = headroom_share(c, f, point_b)
    rep_c, rep_f = _ratio(weights, champion), _ratio(weights, fixed)
    shares = np.array([headroom_share(a, b, d) for a, b, d in zip(rep_c, rep_f, rep_b)])
    low, high = percentile_interval(shares) if math.isfinite(share) else (math.nan, math.nan)
    return Headroom(share, low, high, c, f, point_b, int(np.unique(texts).size), replicates, interval_caveat(texts))


__all__ = ["HEADROOM_REPLICATES", "NO_HEADROOM", "Headroom", "headroom_share", "dinkelbach", "headroom", "share_text"]
