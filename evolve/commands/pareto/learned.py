"""The ``learned`` curve of ``benchmark.py pareto``: a per-token rule fitted by gradient boosting.

Classifier verifiers learn when to accept a drafted token (Judge Decoding:
Gregor Bachmann, Sotiris Anagnostidis, Albert Pumarola, Markos Georgopoulos,
Artsiom Sanakoyeu, Yuming Du, Edgar Schönfeld, Ali Thabet, Jonas Kohler 2025,
arXiv 2501.19309; AutoJudge, arXiv 2504.20039). The ``learned`` curve asks
what such a learner reaches with the features a rule sees, so it estimates
what a per-token function of these features can reach (the oracle bound
knows the block's future and may lie far above):

* target (:mod:`evolve.eval.outright_gain`): accepting record d of a block
  outright, every other record standard, gains G_d = reach_d (1 - r_d)
  (1 + W_{d+1}) expected tokens per call and adds D_d = reach_d (1 - r_d) block
  TV, so G_d / D_d = 1 + W_{d+1} (the drafted tokens expected after d, plus one)
  is what the damage buys;
* model: scikit-learn's ``HistGradientBoostingRegressor`` fitted on the train
  split's records at depths < gamma (at most :data:`MAX_TRAIN_ROWS`, a seeded
  subsample), features = every feature column the split has (the terminals of
  a search with ``features="auto"``: :data:`evolve.gp.primitives.FEATURES` the
  split holds). With :data:`TARGET` ``"efficiency"`` (the default) it regresses
  1 + W_{d+1} with sample weights D_d, which estimates E[G | features] /
  E[D | features]; with ``"gain"`` it regresses G_d itself;
* rule: tau = 1 where the prediction exceeds a threshold t, else the standard
  min(1, p/q); t = +inf is the standard rule (lossless);
* thresholds: :data:`N_THRESHOLDS` quantiles of the predictions on the valid
  split's records at depths < gamma, plus +inf; every threshold is scored on
  the scored split like a family's grid (best tokens per call at each budget on
  that split), and the threshold the valid split would pick at each budget is
  reported beside it (``valid_choice``).

Fitting is deterministic: the subsample and the booster are seeded
(:data:`RANDOM_STATE`), and the booster runs a fixed :data:`MAX_ITER`
iterations without early stopping, on one thread (OpenMP threads that wait
for busy cores cost more than they gain on this small problem).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData, evaluate_thresholds
from evolve.eval.outright_gain import outright_gain
from evolve.kinds.registry import DEFAULT_KIND
from evolve.gp.primitives import FEATURES
from evolve.report.pareto.curves import LEARNED_CURVE as LEARNED
from evolve.report.pareto.curves import Curve, RulePoint, best_at_budget, budget_key, finish_curve
#: Regression target: ``"efficiency"`` (1 + W, weighted by D) or ``"gain"`` (G).
TARGET = "efficiency"
TARGETS = ("efficiency", "gain")
#: Training rows at most (a seeded subsample of the train split's records at depths < gamma).
MAX_TRAIN_ROWS = 200_000
#: Boosting iterations (no early stopping), leaves per tree, learning rate.
MAX_ITER = 40
MAX_LEAF_NODES = 31
LEARNING_RATE = 0.1
#: Seed of the subsample and of the booster.
RANDOM_STATE = 0
#: Thresholds swept: quantiles of the valid predictions (plus +inf).
N_THRESHOLDS = 150
#: Source of the curve.
SOURCE = ("per-token rule fitted by scikit-learn HistGradientBoostingRegressor on train (tau = 1 where the "
          "prediction exceeds t, else min(1, p/q)); classifier verifiers: Bachmann et al. 2025 (arXiv 2501.19309)")


def sklearn_available() -> bool:
    """Whether scikit-learn can be imported (the ``learned`` curve needs it)."""
    try:
        import sklearn.ensemble  # noqa: F401
    except ImportError:
        return False
    return True


def feature_matrix(data: EvalData, features: Sequence[str]) -> np.ndarray:
    """float64 (n, k): the columns ``features`` of ``data``, one row per record."""
    return np.ascontiguousarray(np.stack([data.feature(f) for f in features], axis=1))


class LearnedRule:
    """A fitted booster and the features it reads; :meth:`predict` gives one value per record.

    Built by :func:`fit_learned`. ``features`` are names of
    :data:`evolve.gp.primitives.FEATURES`; ``target`` one of :data:`TARGETS`;
    ``rows`` the number of training records.
    """

    def __init__(self, model, features: tuple[str, ...], target: str, rows: int) -> None:
        self.model = model
        self.features = features
        self.target = target
        self.rows = rows

    def predict(self, data: EvalData) -> np.ndarray:
        """float64 (n,): the prediction for every record of ``data`` (needs the same feature columns)."""
        from threadpoolctl import threadpool_limits
        missing = [f for f in self.features if f not in data.available]
        if missing:
            raise InputError(f"{data.source}: the learned rule needs column '{missing[0]}', which this split lacks")
        with threadpool_limits(1):
            return np.asarray(self.model.predict(feature_matrix(data, self.features)), dtype=np.float64)

    def thresholds(self, prediction: np.ndarray, r: np.ndarray, t: float) -> np.ndarray:
        """float64 (n,): tau = 1 where ``prediction`` > t, else ``r`` = min(1, p/q)."""
        return np.where(prediction > t, 1.0, r)


def fit_learned(train: EvalData, gamma: int, target: str = TARGET, max_rows: int = MAX_TRAIN_ROWS,
                max_iter: int = MAX_ITER, random_state: int = RANDOM_STATE) -> LearnedRule:
    """Fit the learned rule's booster on ``train`` (see the module doc).

    Args:
        train: the train split (needs ``draft_index``).
        gamma: draft length of the block formula (>= 1).
        target: ``"efficiency"`` or ``"gain"``.
        max_rows: training records at most (seeded subsample).
        max_iter: boosting iterations.
        random_state: seed of the subsample and the booster.

    Raises: InputError when scikit-learn is missing, the split has no
    ``draft_index`` or no usable record; ValueError for an unknown target.
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {', '.join(TARGETS)} (value {target!r})")
    if not sklearn_available():
        raise InputError("the learned curve needs scikit-learn (pip install scikit-learn)")
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    if train.depth is None:
        raise InputError(f"{train.source}: the learned rule needs column 'draft_index' (speculation blocks)")
    gain, damage, future = outright_gain(train.r, train.depth, gamma)
    if target == "gain":
        used = np.flatnonzero(np.isfinite(gain))
        y, weight = gain, None
    else:
        used = np.flatnonzero(np.isfinite(damage) & (damage > 0))
        y, weight = future, damage
    if used.size == 0:
        raise InputError(f"{train.source}: no record to fit the learned rule on (every block accepts surely)")
    if used.size > max_rows:
        used = np.sort(np.random.default_rng(random_state).choice(used, max_rows, replace=False))
    features = tuple(f for f in FEATURES if f in train.available and f not in DEFAULT_KIND.excluded_features)
    X = feature_matrix(train, features)[used]
    model = HistGradientBoostingRegressor(max_iter=max_iter, max_leaf_nodes=MAX_LEAF_NODES,
                                          learning_rate=LEARNING_RATE, early_stopping=False,
                                          random_state=random_state)
    with threadpool_limits(1):
        model.fit(X, y[used], sample_weight=None if weight is None else weight[used])
    return LearnedRule(model, features, target, int(used.size))


def threshold_grid(rule: LearnedRule, valid: EvalData, gamma: int, count: int = N_THRESHOLDS) -> np.ndarray:
    """Ascending thresholds: ``count`` quantiles of the predictions on ``valid``'s records at depths < gamma, then +inf."""
    pred = rule.predict(valid)
    used = pred[valid.depth < gamma] if valid.depth is not None else pred
    if used.size == 0:
        return np.array([math.inf])
    qs = np.unique(np.quantile(used, np.linspace(0.0, 1.0, count)))
    return np.append(qs, math.inf)


def _points(rule: LearnedRule, data: EvalData, gamma: int, grid: np.ndarray) -> list[RulePoint]:
    pred = rule.predict(data)
    points = []
    for t in grid:
        tau = rule.thresholds(pred, data.r, t)
        m = evaluate_thresholds(tau, data, gamma=gamma)
        bad = np.flatnonzero(tau > data.r)
        point = RulePoint(f"t={t:.6g}", float(m.tv_per_token), float(m.tokens_per_call),
                          lossless=bad.size == 0, violation=int(bad[0]) if bad.size else None)
        points.append(point)
    return points


def learned_curve(train: EvalData, valid: EvalData, data: EvalData, gamma: int, budgets: Sequence[float],
                  target: str = TARGET) -> Curve:
    """The ``learned`` curve on ``data`` (category ``learned``): fitted on ``train``, thresholds from ``valid``.

    ``extra`` of the curve holds the fit (target, features, training rows,
    iterations) and ``valid_choice`` {budget key: {"threshold", "valid_tokens_per_call",
    "tokens_per_call", "tv_per_token"}}: the threshold the valid split picks at
    each budget and its values on ``data`` (None where no threshold fits on valid).

    Raises: as :func:`fit_learned`.
    """
    rule = fit_learned(train, gamma, target)
    grid = threshold_grid(rule, valid, gamma)
    points = _points(rule, data, gamma, grid)
    on_valid = points if valid is data else _points(rule, valid, gamma, grid)
    choice: dict[str, Any] = {}
    for b in budgets:
        best = best_at_budget(on_valid, b)
        if best is None:
            choice[budget_key(b)] = None
            continue
        i = on_valid.index(best)
        choice[budget_key(b)] = {"threshold": float(grid[i]), "valid_tokens_per_call": best.tokens_per_call,
                                 "tokens_per_call": points[i].tokens_per_call,
                                 "tv_per_token": points[i].tv_per_token}
    curve = Curve(LEARNED, "learned", SOURCE, "threshold", points)
    curve.extra = {"target": target, "features": list(rule.features), "training_rows": rule.rows,
                   "max_iter": MAX_ITER, "random_state": RANDOM_STATE, "thresholds": len(grid),
                   "valid_choice": choice}
    return finish_curve(curve, budgets)


__all__ = ["TARGET", "TARGETS", "MAX_TRAIN_ROWS", "MAX_ITER", "RANDOM_STATE", "N_THRESHOLDS", "SOURCE",
           "LearnedRule", "sklearn_available", "feature_matrix", "fit_learned", "threshold_grid", "learned_curve"]
