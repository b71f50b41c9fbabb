"""A learned stopping rule: an acceptance predictor trained on train, drafting on while its predicted survival pays.

The published learned stopping rules train a predictor of the drafts' acceptance and stop drafting on its predicted
survival: SpecDec++ (Huang et al. 2024, arXiv 2405.19715) stops when the predicted probability that a draft of the
block has been rejected exceeds a threshold; DISCO (Mamou et al. 2024, arXiv 2405.04304) trains a classifier to
decide whether to draft on. Here, on the decision rows of a verification-length policy
(:func:`evolve.kinds.verify_length.eval_policy.decision_data`: what is known before drafting a block's token j,
the history features included), the predictor estimates s_j = P(drafts 0..j are all accepted), the probability
that drafting and verifying token j adds a token to the call. Drafting token j costs a drafter step and a
longer verification, so the cost-optimal myopic stop drafts on while s_j exceeds a threshold h, tuned on the
tuning split by tokens per second: the policy v_j = s_j - h.

* ``learned_logistic``: logistic regression (scikit-learn ``LogisticRegression``, L2, C = 1) on the standardised
  features and the logs of the probability features; s_j > h is the linear formula w . x + b - logit(h) > 0, a
  program of the primitive set (:func:`logistic_expression`), scored as any policy (the history walk included),
  exported like one and seeded into a verification-length search
  (:mod:`evolve.kinds.verify_length.search_seeds`);
* ``learned_gbm``: gradient-boosted trees (scikit-learn ``GradientBoostingClassifier``, 100 trees of depth 3,
  learning rate 0.1, at most :data:`MAX_TRAIN_ROWS` rows drawn with :data:`SEED`) on the raw features, scored by
  walking each text's blocks in order with the trees evaluated in compiled code (:func:`trees_walk`; checked
  against scikit-learn's ``decision_function``).

Training: every decision row of a train block at depth < gamma, labelled by the expected survival prod_(i<=j) tau_i
(the verifier's acceptance probabilities; a soft label entered as two weighted rows, 1 with weight s and 0 with
weight 1 - s, so the fit maximises the expected log-likelihood); the history features along the harvest's own
calls (every drafted record verified: the policy's own choices are not known before it is trained), an
approximation the tuning on valid and the scoring (both with the policy's own history) do not make.
"""
from __future__ import annotations

import math
import weakref

import numpy as np
from numba import njit

from evolve.eval.evaluator import EvalData
from evolve.eval.fastpath.layouts import TILE
from evolve.gp.primitives import FEATURES, HISTORY_FEATURES, _np_log
from evolve.kinds.verify_length.eval_history import (add_call, block_end, call_outcome, history_rows,
                                                     write_history)
from evolve.kinds.verify_length.eval_policy import POLICY_FEATURES
from evolve.kinds.verify_length.eval_rows import Scoring, tuned
from evolve.kinds.verify_length.history import START, advance_history_jit

#: Features whose log the logistic model also reads (probabilities: their log is the natural scale).
LOG_FEATURES: tuple[str, ...] = ("draft_prob", "draft_top_prob", "draft_cumprob")
#: Grid of the survival threshold h of the learned rows.
SURVIVAL_GRID: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 20))
#: Most training rows of the gradient-boosted model (a seeded draw of the train rows beyond it).
MAX_TRAIN_ROWS = 20_000
#: Random seed of the models (the row draw, the trees).
SEED = 0
#: The models fitted on the last training split (by its id and the scoring's settings), kept while it lives.
_FITTED: dict = {}


def model_features(decisions: EvalData) -> tuple[str, ...]:
    """The features the predictor reads: the policy features the decision rows hold with more than one value."""
    out = []
    for f in POLICY_FEATURES:
        if f in decisions.available:
            x = decisions.feature(f)
            if np.isfinite(x).all() and np.ptp(x) > 0 or f in HISTORY_FEATURES:
                out.append(f)
    return tuple(out)


@njit(cache=True)
def history_of_choices(depth, starts, tau, u, sampled, tok, verified, X, hist_rows):
    """Write into the history rows of ``X`` (``hist_rows``) the history each block starts with when every block
    verifies ``verified[b]`` drafts (int64 (blocks,)): the features along a fixed sequence of choices."""
    state = np.empty(len(START))
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        if starts[i] or i == 0:
            for h in range(state.size):
                state[h] = START[h]
        write_history(X, hist_rows, state, i, j)
        L = verified[b]
        accepted, first, whole = call_outcome(i, L, tau, u, sampled, tok)
        advance_history_jit(state, float(L), accepted, first, whole)
        i, b = j, b + 1


def training_rows(s, features: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(X float64 (m, len(features)), s float64 (m,)): the decision rows of a prepared split (:class:`Scoring`) at
    depth < gamma with the history of the harvest's own calls, and each row's expected survival (module doc)."""
    X = s.decisions.X.copy()
    history_of_choices(s.depth, s.text_start, s.tau, s.u, s.sampled, s.tok, s.lengths.astype(np.int64), X,
                       history_rows(s.decisions))
    keep = s.depth < s.gamma
    survival = np.empty(s.data.n)
    acc = 1.0
    for i in range(s.data.n):
        acc = (1.0 if s.depth[i] == 0 else acc) * min(max(float(s.tau[i] if s.sampled else s.data.r[i]), 0.0), 1.0)
        survival[i] = acc
    rows = [s.decisions.feature_rows[FEATURES.index(f)] for f in features]
    return np.stack([X[r][keep] for r in rows], axis=1), survival[keep]


def _soft(X: np.ndarray, s: np.ndarray, rows: int | None = None):
    """Rows doubled with labels 1 and 0 weighted s and 1 - s (at most ``rows`` source rows, a seeded draw)."""
    if rows is not None and X.shape[0] > rows:
        pick = np.sort(np.random.default_rng(SEED).choice(X.shape[0], rows, replace=False))
        X, s = X[pick], s[pick]
    return np.vstack([X, X]), np.r_[np.ones(len(s)), np.zeros(len(s))], np.r_[s, 1.0 - s]


def logistic_columns(X: np.ndarray, features: tuple[str, ...]) -> tuple[np.ndarray, list[tuple[str, bool]]]:
    """The logistic model's inputs: each feature, and the protected log (:mod:`evolve.gp.primitives`) of those of
    :data:`LOG_FEATURES`; returns (Z float64 (m, k), the (feature, logged) of each column)."""
    cols, names = [], []
    for i, f in enumerate(features):
        cols.append(X[:, i])
        names.append((f, False))
        if f in LOG_FEATURES:
            cols.append(_np_log(X[:, i]))
            names.append((f, True))
    return np.stack(cols, axis=1), names


def fit_logistic(s, features: tuple[str, ...]) -> tuple[list[tuple[str, bool, float]], float]:
    """Train the logistic model on a prepared split: ([(feature, logged, weight)], intercept) of the logit of the
    survival in the features' own units (standardisation folded in). Columns that do not vary are left out."""
    from sklearn.linear_model import LogisticRegression

    X, surv = training_rows(s, features)
    Z, names = logistic_columns(X, features)
    mean, std = Z.mean(axis=0), Z.std(axis=0)
    live = std > 0
    Zs = (Z[:, live] - mean[live]) / std[live]
    Xd, y, w = _soft(Zs, surv)
    model = LogisticRegression(C=1.0, max_iter=2000).fit(Xd, y, sample_weight=w)
    coef = model.coef_[0] / std[live]
    intercept = float(model.intercept_[0] - (coef * mean[live]).sum())
    kept = [n for n, ok in zip(names, live) if ok]
    return [(f, logged, float(c)) for (f, logged), c in zip(kept, coef)], intercept


def logistic_expression(terms: list[tuple[str, bool, float]], intercept: float, h: float) -> str:
    """The policy w . x + b - logit(h) (draft on iff the predicted survival exceeds ``h``) as a program."""
    total = f"{intercept - math.log(h / (1.0 - h))!r}"
    for f, logged, c in terms:
        x = f"log({f})" if logged else f
        total = f"add({total}, mul({c!r}, {x}))"
    return total


class TreeModel:
    """A fitted ``GradientBoostingClassifier``'s trees as flat arrays for :func:`trees_walk`: ``left``, ``right``,
    ``feature`` int64 and ``threshold``, ``value`` float64 (nodes,) of all trees, ``roots`` int64 (trees,), the
    ``scale`` (learning rate) and ``base`` (the raw score before the trees), ``features`` the inputs' names and
    ``model`` the scikit-learn model itself."""

    def __init__(self, model, features: tuple[str, ...], probe: np.ndarray):
        self.model = model
        trees = [e[0].tree_ for e in model.estimators_]
        offsets = np.cumsum([0] + [t.node_count for t in trees])
        self.roots = offsets[:-1].astype(np.int64)
        self.left = np.concatenate([np.where(t.children_left >= 0, t.children_left + o, -1)
                                    for t, o in zip(trees, offsets)]).astype(np.int64)
        self.right = np.concatenate([np.where(t.children_right >= 0, t.children_right + o, -1)
                                     for t, o in zip(trees, offsets)]).astype(np.int64)
        self.feature = np.concatenate([t.feature for t in trees]).astype(np.int64)
        self.threshold = np.concatenate([t.threshold for t in trees]).astype(np.float64)
        self.value = np.concatenate([t.value[:, 0, 0] for t in trees]).astype(np.float64)
        self.scale = float(model.learning_rate)
        self.features = features
        raw = np.empty(probe.shape[0])
        tree_scores(probe, self.roots, self.left, self.right, self.feature, self.threshold, self.value, 0.0,
                    self.scale, raw)
        self.base = float(np.median(model.decision_function(probe) - raw))


@njit(cache=True)
def tree_score(x, roots, left, right, feature, threshold, value, base, scale):
    """The raw score (log-odds) of one input row ``x`` float64 (k,): ``base`` + ``scale`` * sum of the trees' leaves
    (a node goes left iff x[feature] <= threshold, as scikit-learn's trees)."""
    total = 0.0
    for r in roots:
        node = r
        while left[node] >= 0:
            node = left[node] if x[feature[node]] <= threshold[node] else right[node]
        total += value[node]
    return base + scale * total


@njit(cache=True)
def tree_scores(X, roots, left, right, feature, threshold, value, base, scale, out):
    """:func:`tree_score` of every row of ``X`` float64 (m, k) into ``out`` float64 (m,)."""
    for i in range(X.shape[0]):
        out[i] = tree_score(X[i], roots, left, right, feature, threshold, value, base, scale)


@njit(cache=True)
def trees_walk(X, rows, texts, outcomes, pricing, model, out, choices):
    """The history walk of :func:`evolve.kinds.verify_length.eval_history.program_walk` (``texts``, ``outcomes``,
    ``pricing`` as it takes them) for the tree model: a block drafts token j while the trees' log-odds of the decision
    row (the X rows ``rows`` int64 (k,)) exceed ``logit_h``; adds every call to ``out`` and writes the blocks'
    verified drafts to ``choices``. ``model``: (roots, left, right, feature, threshold, value, base, scale, logit_h),
    the :class:`TreeModel`'s arrays and the threshold's log-odds."""
    hist_rows, depth, starts = texts
    tau, u, sampled, tok, dmg = outcomes
    gamma, forward, draft_s, cover = pricing
    roots, left, right, feature, threshold, value, base, scale, logit_h = model
    state = np.empty(len(START))
    x = np.empty(rows.size)
    i, b = 0, 0
    while i < depth.size:
        j = block_end(depth, i)
        if starts[i] or i == 0:
            for h in range(state.size):
                state[h] = START[h]
        write_history(X, hist_rows, state, i, j)
        g = min(j - i, gamma, TILE)
        L = 0
        while L < g:
            for k in range(rows.size):
                x[k] = X[rows[k], i + L]
            if not tree_score(x, roots, left, right, feature, threshold, value, base, scale) > logit_h:
                break
            L += 1
        add_call(tok, dmg, i, L, L, forward, draft_s, cover, out)
        choices[b] = L
        accepted, first, whole = call_outcome(i, L, tau, u, sampled, tok)
        advance_history_jit(state, float(L), accepted, first, whole)
        i, b = j, b + 1


def fit_trees(s, features: tuple[str, ...]) -> TreeModel:
    """Train the gradient-boosted model on a prepared split (module doc)."""
    from sklearn.ensemble import GradientBoostingClassifier

    X, surv = training_rows(s, features)
    Xd, y, w = _soft(X, surv, MAX_TRAIN_ROWS)
    model = GradientBoostingClassifier(n_estimators=100, max_depth=3, learning_rate=0.1, random_state=SEED)
    model.fit(Xd, y, sample_weight=w)
    return TreeModel(model, features, X[:min(len(X), 64)])


def tree_choices(s, model: TreeModel, h: float) -> tuple[np.ndarray, None]:
    """Each block's verified drafts under the tree model at threshold ``h`` on a prepared split (its history
    rows rewritten)."""
    X = s.decisions.X
    rows = np.array([s.decisions.feature_rows[FEATURES.index(f)] for f in model.features], dtype=np.int64)
    out = np.zeros(6)
    choices = np.zeros(s.starts.size, dtype=np.int64)
    trees_walk(X, rows, (history_rows(s.decisions), s.depth, s.text_start), (s.tau, s.u, s.sampled, s.tok, s.dmg),
               (s.gamma, s.forward, float(s.costs.draft_token_s), s.cover),
               (model.roots, model.left, model.right, model.feature, model.threshold, model.value, model.base,
                model.scale, math.log(h / (1.0 - h))), out, choices)
    return choices, None


def logistic_choices(s, expression: str) -> tuple[np.ndarray, None]:
    """Each block's verified drafts under a policy expression on a prepared split (the policy scorer's walk)."""
    from evolve.gp.compiler import compile_expression
    from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator

    scorer = LengthPopulationEvaluator(s.data, gamma=s.gamma, costs=s.costs, verifier=s.verifier,
                                       weighting=s.weighting)
    return scorer.choices(compile_expression(expression)), None


def logistic_seed(s, allowed: tuple[str, ...], score) -> tuple[str, float] | None:
    """(expression, h) of the logistic rule trained on the prepared split ``s`` (:class:`Scoring`) over the features
    among ``allowed`` (a run's terminals), h tuned on ``s`` itself by ``score(metrics)``: a seed of a search (None
    when no predictor can be trained over the allowed features, :func:`nothing_to_learn`)."""
    features = tuple(f for f in model_features(s.decisions) if f in allowed)
    if nothing_to_learn(s, features) is not None:
        return None
    terms, intercept = fit_logistic(s, features)
    row = tuned(s, s, SURVIVAL_GRID, lambda sc, h: logistic_choices(sc, logistic_expression(terms, intercept, h)),
                lambda h: repr(h), score)
    h = float(row.setting)
    return logistic_expression(terms, intercept, h), h


def nothing_to_learn(s, features: tuple[str, ...]) -> str | None:
    """Why no acceptance predictor can be trained on the prepared split ``s`` (:class:`Scoring`) over ``features``, or
    None when one can: no feature that varies, no decision row, or one class only (every row's expected survival is
    1, every draft accepted, or 0, none accepted: the soft labels of :func:`_soft` then weigh one class alone, and a
    classifier of one class predicts nothing)."""
    if not features:
        return f"no policy feature varies on {s.data.split or 'the training split'}"
    _, surv = training_rows(s, features)
    if surv.size == 0:
        return f"{s.data.split or 'the training split'} has no decision row below gamma {s.gamma}"
    if surv.min() >= 1.0:
        return f"every draft of {s.data.split or 'the training split'} is accepted (one class: nothing to learn)"
    if surv.max() <= 0.0:
        return f"no draft of {s.data.split or 'the training split'} is accepted (one class: nothing to learn)"
    return None


def learned_rows(train: EvalData, tune, data, score) -> tuple[dict, str | None]:
    """``learned_logistic`` and ``learned_gbm`` (module doc): trained on ``train``, their threshold tuned on the
    prepared split ``tune`` by ``score(metrics)``, scored on ``data`` (:class:`Scoring` both): ({name: Scored}, None),
    or ({}, why) when no predictor can be trained there (:func:`nothing_to_learn`)."""
    key = (id(train), tune.gamma, tune.verifier.name)
    hit = _FITTED.get(key)
    if hit is None or hit[0]() is not train:
        s = tune if train is tune.data else Scoring(train, tune.gamma, tune.costs, tune.verifier, tune.weighting)
        features = model_features(s.decisions)
        why = nothing_to_learn(s, features)
        fitted = (fit_logistic(s, features), fit_trees(s, features)) if why is None else why
        _FITTED.clear()  # one training split at a time (a command's)
        _FITTED[key] = hit = (weakref.ref(train), fitted)
    if isinstance(hit[1], str):
        return {}, hit[1]
    (terms, intercept), model = hit[1]
    rows = {"learned_logistic": tuned(
        tune, data, SURVIVAL_GRID, lambda sc, h: logistic_choices(sc, logistic_expression(terms, intercept, h)),
        lambda h: f"h={h:g}: {logistic_expression(terms, intercept, h)}", score)}
    rows["learned_gbm"] = tuned(tune, data, SURVIVAL_GRID, lambda sc, h: tree_choices(sc, model, h),
                                lambda h: f"h={h:g} (100 trees of depth 3)", score)
    return rows, None


__all__ = ["LOG_FEATURES", "SURVIVAL_GRID", "MAX_TRAIN_ROWS", "SEED", "model_features", "history_of_choices",
           "training_rows", "logistic_columns", "fit_logistic", "logistic_expression", "TreeModel", "tree_score",
           "tree_scores", "trees_walk", "fit_trees", "tree_choices", "logistic_choices", "logistic_seed", "nothing_to_learn",
           "learned_rows"]
