"""Verification-length policies in ``benchmark.py``: a policy's row, and the competitor policies a comparison adds.

A verification-length policy (kind ``verify-length``, :mod:`evolve.kinds.verify_length.eval_policy`) is scored by
its own expected seconds per call, and the competitors follow the rules of a split with ``draft_index`` (rows of
role ``policy``, :mod:`evolve.kinds.verify_length.eval_competitors`): ``best_fixed_gamma`` and
``confidence_threshold``, ``survival_prefix``, the engines' controllers (``llama_cpp_p_min``, ``sglang_adaptive``,
``dynamic_sd_goodput``, ``acceptance_band``) and the learned stopping rules (``learned_logistic``,
``learned_gbm``, trained on the train split), every setting tuned on the valid split when the dataset has one, else
on the scored split (the setting is in the row's ``expression``), then the bound ``length_oracle`` (not a policy:
the best lengths knowing each block's outcome). Every row keeps its calls summed per text, from which
:func:`split_headroom` measures the share of the headroom each champion captures and how it stands against each
competitor (:mod:`evolve.kinds.verify_length.eval_headroom`). A policy's drafts are verified by the
verifier its run used (its champion's ``verify_with``: :func:`length_verifier_of`); the competitors use the
verifier and the block weighting (``length_weighting``) of the first policy compared (the standard rule and
call weighting without one), and with a lossy verifier they are tuned for tokens per second within the default
TV budget (0.01 per token). The comparison reaches them through the kind's ``compare`` hook
(:class:`evolve.commands.compare.table.KindScorer`: ``competitors``, ``note``, ``bounds``).
"""
from __future__ import annotations

import time
from typing import Sequence

from evolve.errors import InputError
from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData
from evolve.eval.objectives import DEFAULT_BUDGET, tokens_per_second_at_tv
from evolve.kinds.verify_length import KIND
from evolve.kinds.verify_length.eval_competitors import competitors
from evolve.kinds.verify_length.eval_rows import Scoring
from evolve.kinds.verify_length.eval_headroom import standing, text_sums
from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator
from evolve.kinds.verify_length.settings import (DEFAULT_WEIGHTING, STANDARD_VERIFIER, WEIGHTINGS, LengthVerifier,
                                                 verifier_from_parts)
from evolve.report.compare.rows import Row
from heuristics.contract import Rule
from heuristics.verifiers import verifier_parts

#: Kind of the competitor rows.
POLICY = "policy"
#: The competitor rows, in order.
COMPETITORS: tuple[str, ...] = ("best_fixed_gamma", "confidence_threshold", "survival_prefix", "llama_cpp_p_min",
                                "sglang_adaptive", "dynamic_sd_goodput", "acceptance_band", "suffix_vllm_default",
                                "suffix_tuned", "learned_logistic", "learned_gbm", "length_oracle")
#: The competitors whose setting is tuned (on valid when the dataset has it).
TUNED: tuple[str, ...] = ("best_fixed_gamma", "confidence_threshold", "llama_cpp_p_min", "sglang_adaptive",
                          "dynamic_sd_goodput", "acceptance_band", "suffix_tuned", "learned_logistic", "learned_gbm")
#: Row expressions of the rows without a setting.
NOTES = {"length_oracle": "bound: the best lengths knowing each block's outcome (reads the target)"}


def length_verifier_of(rule: Rule | None) -> LengthVerifier:
    """The :class:`evolve.kinds.verify_length.eval_policy.LengthVerifier` of a verification-length rule's ``verifier``
    setting ``verify_with`` (none or no rule: the standard rule). Raises InputError naming the rule's source (its champion file) and
    ``provenance.config.verify_with`` for a verifier that does not resolve here."""
    spec = None if rule is None else rule.setting("verify_with")
    if spec is None:
        return STANDARD_VERIFIER
    try:
        return verifier_from_parts(*verifier_parts(spec))
    except InputError as exc:
        raise InputError(f"{rule.source or rule.name}: key 'provenance.config.verify_with' is {spec!r}: "
                         f"{exc.message}") from None


def check_policy_settings(rule: Rule) -> tuple[LengthVerifier, str]:
    """Check the run settings a verification-length rule carries (its champion's ``provenance.config``) and
    return them, (verifier, block weighting): its ``verify_with`` resolves here (:func:`length_verifier_of`) and
    its ``length_weighting`` is one of :data:`evolve.kinds.verify_length.eval_policy.WEIGHTINGS` (None: ``call``).
    The kind's ``check`` hook; the scorers take the settings from here, so a champion file is resolved once.

    Raises: InputError naming the rule's source (its champion file), the key and the value.
    """
    weighting = rule.setting("length_weighting")
    if weighting is not None and weighting not in WEIGHTINGS:
        raise InputError(f"{rule.source or rule.name}: key 'provenance.config.length_weighting' is "
                         f"{weighting!r}, not a block weighting (choose from {', '.join(WEIGHTINGS)})")
    return length_verifier_of(rule), weighting or DEFAULT_WEIGHTING


def length_scores(rule: Rule, data: EvalData, repeats: int, gamma: int, costs: Costs) -> tuple[dict, float]:
    """A verification-length policy's row fields (its :class:`evolve.kinds.verify_length.eval_policy.LengthMetrics` as the
    row's block metrics, its drafts verified by :func:`length_verifier_of`) and best time of ``repeats``
    scorings in ms."""
    verifier, weighting = check_policy_settings(rule)
    scorer = LengthPopulationEvaluator(data, gamma=gamma, cache_size=0, costs=costs, verifier=verifier,
                                       weighting=weighting)
    metrics = scorer.evaluate([rule.program])[0]
    per_text = text_sums(data, scorer.block_counts(rule.program), costs.verify_seconds(0))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        LengthPopulationEvaluator(data, gamma=gamma, cache_size=0, costs=costs, verifier=verifier,
                                  weighting=weighting).evaluate([rule.program])
        best = min(best, time.perf_counter() - t0)
    return {"metrics": None, "verifier": metrics, "records": data.n, "per_text": per_text}, best * 1e3


def competitor_rows(data: EvalData, gamma: int | None, costs: Costs, tuned_on: EvalData | None,
                    tuned_name: str, verifier: LengthVerifier = STANDARD_VERIFIER,
                    weighting: str = DEFAULT_WEIGHTING, train: EvalData | None = None) -> tuple[list[Row], list[str]]:
    """(rows, notes): the competitor rows of one split (none without block metrics), their drafts verified by
    ``verifier``, the blocks weighted by ``weighting`` (:func:`evolve.kinds.verify_length.eval_policy.block_cover`),
    the learned rows trained on ``train`` (default: the tuning split); each row with its calls summed per text; a
    note for each row that could not be computed there, saying why."""
    if gamma is None or data.depth is None:
        return [], []
    t0 = time.perf_counter()
    score = None if verifier.lossless else (
        lambda m: tokens_per_second_at_tv(m.tokens_per_second, m.tv_per_token, costs.plain_token_s, DEFAULT_BUDGET))
    per_block: dict = {}
    left_out: dict[str, str] = {}
    found = competitors(data, gamma, costs, tuned_on, verifier, score, weighting, per_block=per_block, train=train,
                        left_out=left_out)
    ms = (time.perf_counter() - t0) * 1e3
    rows = []
    for name in COMPETITORS:
        if name not in found:
            continue
        setting, metrics = found[name]
        text = f"{setting} (tuned on {tuned_name})" if name in TUNED else (setting or NOTES.get(name))
        rows.append(Row(name, POLICY, data.split, data.source, None, ms, expression=text,
                        gamma=gamma, verifier=metrics, records=data.n, program_kind=KIND.name,
                        per_text=text_sums(data, per_block[name], costs.verify_seconds(0))))
    reasons: dict[str, list[str]] = {}
    for name, why in left_out.items():
        reasons.setdefault(why, []).append(name)
    notes = [f"left out {' and '.join(names)} on {data.split or 'the split'}: {why}" for why, names in reasons.items()]
    return rows, notes


def first_settings(rules: Sequence[Rule]) -> tuple[LengthVerifier, str]:
    """The competitors' (verifier, block weighting): the first policy's in ``rules`` (the standard rule and
    ``call`` without one). Raises: InputError (:func:`check_policy_settings`) when its settings do not hold."""
    return check_policy_settings(rules[0]) if rules else (STANDARD_VERIFIER, DEFAULT_WEIGHTING)


def comparison_competitors(rules: Sequence[Rule], data: EvalData, gamma: int | None, costs: Costs,
                           tuned_on: EvalData | None, tuned_name: str, train=None) -> tuple[list[Row], list[str]]:
    """(rows, notes): the competitor rows a comparison adds for one split (the ``competitors`` of the kind's
    ``compare`` hook):
    :func:`competitor_rows` with the verifier and the block weighting of the first policy in ``rules`` (the
    verification-length rules compared, in order); ``train``: a function giving the train split (the learned rows'
    training data; None, or a function giving None: the tuning split)."""
    verifier, weighting = first_settings(rules)
    return competitor_rows(data, gamma, costs, tuned_on, tuned_name, verifier=verifier, weighting=weighting,
                           train=train() if train is not None else None)


def split_headroom(rules: Sequence[Rule], rows: Sequence[Row], data: EvalData, gamma: int | None,
                   costs: Costs) -> list[dict]:
    """The ``headroom`` of the kind's ``compare`` hook: for each verification-length champion row of one split, the
    share of the headroom it captures and its standing against each competitor
    (:func:`evolve.kinds.verify_length.eval_headroom.standing`); empty without block metrics."""
    if gamma is None or data.depth is None:
        return []
    verifier, weighting = first_settings(rules)
    mine = [r for r in rows if r.program_kind == KIND.name]
    return standing(mine, Scoring(data, gamma, costs, verifier, weighting))


def weighting_note(rules: Sequence[Rule]) -> str | None:
    """What the caption says when the competitors weight the blocks otherwise than per call (None: nothing)."""
    _, weighting = first_settings(rules)
    if weighting == DEFAULT_WEIGHTING:
        return None
    return (f"The competitor rows weight each harvested block as {WEIGHTINGS[weighting]} (the first policy's"
            f" length_weighting, {weighting}); each champion row by its own run's.")


__all__ = ["POLICY", "COMPETITORS", "TUNED", "NOTES", "length_verifier_of", "check_policy_settings", "length_scores",
           "competitor_rows", "first_settings", "comparison_competitors", "split_headroom", "weighting_note"]
