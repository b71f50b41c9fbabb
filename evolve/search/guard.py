"""The champion guard: an evolved champion replaces the best seeded competitor only when it is ahead on valid by
more than the noise of valid's texts.

A warm-started search seeds the competitors of its kind (the best fixed length and the confidence threshold of a
verification-length run, the published families' best members of a threshold run: :mod:`evolve.search.warm_start`),
and :func:`evolve.search.champion.choose` never returns a champion worse on valid than the best of them. On a
valid split of a few texts that is not enough: an evolved program ahead by a hair on valid is as likely to fall
behind on test. So when the choice is an evolved program and a seeded rule competes, :func:`guard` compares the
two on valid with a paired bootstrap over texts: every replicate draws valid's texts with replacement
(:func:`evolve.eval.bootstrap.group_draws`; texts are the resampling unit because the calls of one text are
correlated, as in ``benchmark.py trees --bootstrap``), scores both programs on that resample with the run's own
population scorer and objective, and takes the difference evolved - seeded. The evolved program stays champion
only when the lower end of the :data:`evolve.eval.bootstrap.COVERAGE` percentile interval of that difference is
above 0; otherwise the run returns the seeded rule and says so (``champion_source`` ``seeded:NAME``, and the
guard's figures in the run's provenance).

Scope: kinds whose population scorer reads the split's records alone (:attr:`evolve.kinds.base.ProgramKind.resamples`;
a tree shape and a relaxation weight are scored with tables read beside the records, and are not guarded yet); splits with text ids
(``seq_id``, every dataset's). With one text no resample differs from the sample, so the guard cannot measure the
noise and keeps the plain choice (``reason`` says so), as it does when fewer than
:data:`evolve.eval.bootstrap.MIN_REPLICATES` resamples score both programs finitely; with fewer than :data:`evolve.eval.bootstrap.MIN_GROUPS`
texts the interval is narrower than its nominal coverage (:func:`evolve.eval.bootstrap.interval_caveat`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from evolve.errors import counted
from evolve.eval.bootstrap import COVERAGE, MIN_REPLICATES, group_draws, interval_caveat, interval_text
from evolve.eval.evaluator import EvalData, Metrics
from evolve.gp.compiler import Node

#: Bootstrap replicates of the guard (the same for every run, so the same seed gives the same champion).
GUARD_REPLICATES = 100


@dataclass(frozen=True)
class GuardResult:
    """What the guard found: ``kept`` whether the evolved program stays champion; ``seeded`` the competitor's name;
    ``texts`` valid's texts; ``difference`` the objective's difference evolved - seeded on valid, with ``low`` and
    ``high`` its percentile interval over the replicates (NaN when not measured); ``reason`` one line saying why;
    ``cross_validation`` the folds' figures when it was measured out of fold (:mod:`evolve.search.crossval`; None:
    on valid)."""

    kept: bool
    seeded: str
    texts: int
    difference: float
    low: float
    high: float
    reason: str
    cross_validation: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (for the run's provenance; a figure not measured, NaN, is None: JSON has no
        NaN)."""
        return {k: None if isinstance(v, float) and v != v else v for k, v in asdict(self).items()}


def guard(valid: EvalData, make_scorer: Callable[[EvalData], Any], score: Callable[[Metrics], float],
          evolved: Sequence[Node], seeded: Sequence[Node], seeded_name: str,
          replicates: int = GUARD_REPLICATES) -> GuardResult:
    """The guard of the module doc for the evolved program ``evolved`` against the seeded rule ``seeded`` (prefix
    nodes of both), named ``seeded_name``.

    Args:
        valid: the valid split (with text ids, :attr:`EvalData.text_runs`).
        make_scorer: a population scorer of a split (the run's ``population`` hook with the run's settings and no
            cache), whose ``evaluate`` takes prefix node lists.
        score: the run's objective of a split's metrics (higher is better).
        replicates: bootstrap replicates (at least :data:`evolve.eval.bootstrap.MIN_REPLICATES`).

    Raises: InputError for too few replicates; whatever the scorer raises.
    """
    texts = valid.texts
    m_evolved, m_seeded = make_scorer(valid).evaluate([list(evolved), list(seeded)])
    point = score(m_evolved) - score(m_seeded)
    if texts <= 1:
        return GuardResult(True, seeded_name, texts, point, float("nan"), float("nan"),
                           f"valid has {texts} text: the noise of its texts cannot be measured, the plain choice stands")
    diffs = np.empty(replicates)
    for i, draw in enumerate(group_draws(texts, replicates)):
        scorer = make_scorer(valid.resample_texts(draw))
        m_evolved, m_seeded = scorer.evaluate([list(evolved), list(seeded)])
        diffs[i] = score(m_evolved) - score(m_seeded)
    tail = (1.0 - COVERAGE) / 2.0 * 100.0
    finite = diffs[np.isfinite(diffs)]
    if finite.size < MIN_REPLICATES or not np.isfinite(point):
        return GuardResult(True, seeded_name, texts, float(point), float("nan"), float("nan"),
                           f"evolved - {seeded_name} on valid: {point:.6g}, but only {finite.size} of {replicates} "
                           f"resamples scored both programs finitely: the noise cannot be measured, the plain choice "
                           f"stands")
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    kept = bool(low > 0.0)
    caveat = interval_caveat(np.arange(texts))
    verdict = ("ahead by more than the noise of valid's texts" if kept else
               f"not ahead by more than the noise of valid's texts: the seeded {seeded_name} is kept")
    reason = (f"evolved - {seeded_name} on valid: {point:.6g} ({COVERAGE:.0%} interval over {counted(texts, 'text')} "
              f"{interval_text(low, high, '.6g')}): {verdict}" + (f" ({caveat})" if caveat else ""))
    return GuardResult(kept, seeded_name, texts, float(point), float(low), float(high), reason)


__all__ = ["GUARD_REPLICATES", "GuardResult", "guard"]
