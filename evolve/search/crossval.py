"""Selection by cross-validation over texts (``selection = "cv"``): the champion guard on out-of-fold scores.

A search evolves on train and picks its champion on valid; the champion guard (:mod:`evolve.search.guard`) keeps an
evolved champion only when it beats the best seeded competitor by more than the noise of valid's texts. With a
valid split of 8-16 texts that judge is weak. Cross-validation lets every text of train and valid judge:

1. the texts of train and valid are pooled (:func:`pooled`) and dealt into ``cv_folds`` folds (a permutation drawn
   with the run's seed);
2. for each fold k a search with the run's settings (one population, seed + 1 + k) evolves on the other folds; its
   evolved candidate E_k is the best hall-of-fame member by that training score that is not a seed, its seeded
   rival S_k the best seeded rule there (the procedures the run compares: evolving, and tuning the competitors);
3. both are scored on fold k, which neither saw: the out-of-fold difference d_k = objective(E_k) - objective(S_k);
4. the guard: the difference sum_k w_k d_k (w_k the fold's share of the texts) with a paired bootstrap
   (every replicate draws each fold's texts with replacement, :func:`evolve.eval.bootstrap.group_draws`); the
   run's evolved champion is kept only when the lower end of the :data:`evolve.eval.bootstrap.COVERAGE` interval is
   above 0, else the run returns its best seeded rule (``champion_source`` ``seeded:NAME``), as the valid-only guard
   would.

What it costs: ``cv_folds`` more searches, each on (K - 1) / K of train and valid (so about K (1 + valid/train)
(K - 1) / K times the search's own time), and the bootstraps; ``scripts/cv_cost.sh`` measures it on a dataset and
writes the figures to a file (docs/results/speed.md). Kinds scored from the records alone
(:attr:`evolve.kinds.base.ProgramKind.resamples`), with a warm start and text ids.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from evolve.errors import InputError, counted
from evolve.eval.bootstrap import COVERAGE, group_draws, interval_caveat, interval_text, percentile_interval
from evolve.eval.evaluator import EvalData
from evolve.kinds.base import KindContext
from evolve.search.config import RunConfig
from evolve.search.guard import GUARD_REPLICATES, GuardResult
from evolve.search.result import SearchResult


def pooled(train: EvalData, valid: EvalData) -> EvalData:
    """train's records then valid's as one split, valid's text ids shifted past train's (so no two texts share one).

    Raises: InputError when a split has no text ids or the two hold different features."""
    if train.text_runs is None or valid.text_runs is None:
        raise InputError(f"{train.source}: cross-validation over texts needs text ids (seq_id)", param="selection")
    if train.available != valid.available:
        raise InputError(f"{valid.source}: holds other features than {train.source}; they cannot be pooled",
                         param="selection")
    shift = int(train.text_runs[1].max()) + 1 if train.text_runs[1].size else 0
    runs = np.concatenate([train.text_runs[0][:-1], valid.text_runs[0] + train.n]).astype(np.int64)
    ids = np.concatenate([train.text_runs[1], valid.text_runs[1] + shift]).astype(np.int64)
    return EvalData(np.hstack([train.X, valid.X]), np.r_[train.r, valid.r], np.r_[train.u, valid.u],
                    np.r_[train.b, valid.b], train.available, train.source, "train+valid",
                    block_length=max(train.block_length or 0, valid.block_length or 0) or None,
                    no_draft_calls=train.no_draft_calls + valid.no_draft_calls, text_runs=(runs, ids))


def folds(data: EvalData, k: int, seed: int) -> list[np.ndarray]:
    """The ``k`` folds of ``data``'s texts: int64 arrays of indices into its sorted distinct text ids (each sorted),
    dealt from a permutation drawn with ``seed``. Raises: InputError for fewer texts than folds."""
    count = data.texts
    if count < k:
        raise InputError(f"{data.source}: {count} texts in train and valid, fewer than cv_folds = {k}",
                         param="cv_folds")
    order = np.random.default_rng(seed).permutation(count)
    return [np.sort(order[i::k]) for i in range(k)]


def _scorer_maker(cfg: RunConfig, gamma: int | None) -> Callable[[EvalData], Any]:
    """A population scorer of a split with the run's settings and no cache (the kind's ``population`` hook)."""
    make = cfg.program_kind.hook("population", "python -m evolve run", f"kind '{cfg.evolve}'")
    context = KindContext(fitness=cfg.acceptance_quality_fitness(), gamma=gamma, costs=cfg.cost_model,
                          settings=cfg.settings)
    return lambda data: make(replace(context, data=data))


def _fold_pair(result: SearchResult, score) -> tuple[Any, Any, str, str]:
    """(E_k nodes, S_k nodes, E_k expression, S_k name) of one fold's search (module doc, step 2)."""
    warm = result.warm_start
    seeded = max(range(len(result.seeded)), key=lambda i: (score(result.seeded[i].train), -i))
    rival = result.seeded[seeded]
    name = warm.seeds[seeded].name
    evolved = [e for e in result.hall_of_fame if warm.name_of(e.expression) is None]
    best = max(evolved, key=lambda e: score(e.train)) if evolved else rival
    return best.nodes, rival.nodes, best.expression, name


def cross_validate(result: SearchResult, cfg: RunConfig, train: EvalData, valid: EvalData,
                   features: tuple[str, ...], replicates: int = GUARD_REPLICATES,
                   say: Callable[[str], None] | None = None) -> SearchResult:
    """The run's result with its champion guard measured by cross-validation (module doc): its champion replaced by
    its best seeded rule (on valid) when evolution is not ahead out of fold by more than the noise. A run whose
    champion is already a seeded rule (the best on valid) is returned as it is: there is no evolved champion to
    judge. ``say`` gets a line as each fold's search starts and ends; the fold searches' programs and seconds are
    added to the result's.

    Raises: InputError as :func:`pooled` and :func:`folds`; whatever the searches raise.
    """
    from evolve.search.algorithms import search

    if result.champion_source != "evolved":
        return result
    say = say or (lambda line: None)
    t0 = time.perf_counter()
    score = result.config.objective_spec.score
    objective = lambda m: score(m, cfg)  # noqa: E731
    data = pooled(train, valid)
    parts = folds(data, cfg.cv_folds, cfg.seed)
    everything = np.arange(data.texts)
    gamma = cfg.gamma if cfg.objective_spec.needs_blocks and cfg.program_kind.reads_gamma else None
    make = _scorer_maker(cfg, gamma)
    inner = replace(cfg, selection="valid", islands=1)
    pairs, shares, diffs, programs = [], [], [], 0
    for k, fold in enumerate(parts):
        say(f"cross-validation: fold {k + 1}/{len(parts)}: a search of {cfg.generations} generations on the other "
            f"{data.texts - fold.size} texts, scored on these {fold.size}")
        held = data.resample_texts(fold)
        rest = data.resample_texts(np.setdiff1d(everything, fold))
        found = search(replace(inner, seed=cfg.seed + 1 + k), rest, held, features)
        programs += found.programs
        pair = _fold_pair(found, objective)
        m_e, m_s = make(held).evaluate([list(pair[0]), list(pair[1])])
        pairs.append(pair)
        shares.append(fold.size / data.texts)
        diffs.append(objective(m_e) - objective(m_s))
        say(f"cross-validation: fold {k + 1}/{len(parts)}: evolved - seeded out of fold {diffs[-1]:.6g} "
            f"({time.perf_counter() - t0:.0f} s)")
    point = float(np.dot(shares, diffs))
    reps = np.zeros(replicates)
    for k, (fold, pair) in enumerate(zip(parts, pairs)):
        held = data.resample_texts(fold)
        for r, draw in enumerate(group_draws(fold.size, replicates, seed=k)):
            m_e, m_s = make(held.resample_texts(draw)).evaluate([list(pair[0]), list(pair[1])])
            reps[r] += shares[k] * (objective(m_e) - objective(m_s))
    low, high = percentile_interval(reps)
    seconds = time.perf_counter() - t0
    detail = {"folds": cfg.cv_folds, "texts": data.texts, "seconds": round(seconds, 3), "programs": programs,
              "per_fold": [{"texts": int(f.size), "evolved": p[2], "seeded": p[3], "difference": d}
                           for f, p, d in zip(parts, pairs, diffs)]}
    decided = _decide(result, cfg, float(point), float(low), float(high), data, detail)
    return replace(decided, programs=decided.programs + programs, seconds=decided.seconds + seconds)


def _decide(result: SearchResult, cfg: RunConfig, point: float, low: float, high: float, data: EvalData,
            detail: dict) -> SearchResult:
    """The result with the cross-validated guard's verdict (module doc, step 4)."""
    score = lambda m: result.config.objective_spec.score(m, cfg)  # noqa: E731
    names = [s.name for s in result.warm_start.seeds]
    rival = max(range(len(result.seeded)), key=lambda i: (score(result.seeded[i].valid), -i))
    kept = bool(np.isfinite(low) and low > 0.0)
    caveat = interval_caveat(data.text_runs[1])
    verdict = ("evolution is ahead out of fold by more than the noise" if kept else
               f"evolution is not ahead out of fold by more than the noise: the seeded {names[rival]} is the "
               f"champion")
    reason = (f"cross-validation over {counted(data.texts, 'text')} of train and valid in {cfg.cv_folds} folds: evolved - "
              f"seeded out of fold {point:.6g} ({COVERAGE:.0%} interval {interval_text(low, high, '.6g')}): {verdict}"
              + (f" ({caveat})" if caveat else ""))
    guard = GuardResult(kept, names[rival], data.texts, point, low, high, reason, cross_validation=detail)
    if result.champion_source == "evolved" and not kept:
        return replace(result, champion=result.seeded[rival], champion_source=f"seeded:{names[rival]}", guard=guard)
    return replace(result, guard=guard)


__all__ = ["pooled", "folds", "cross_validate"]
