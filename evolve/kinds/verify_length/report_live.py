"""The headroom a verification-length champion captures live (``benchmark.py live --costs FILE --data DIR``).

The bound cannot be decoded: it knows each call's outcome. So the live share compares the live rows with the bound
the records of the same split give (:func:`evolve.kinds.verify_length.eval_competitors.length_oracle`, under the
champion's own verifier and block weighting and the cost file), in two ways, point estimates both:

* priced: each live row's tokens over the cost file's seconds of the calls it made (its predicted tokens per
  second, :meth:`evolve.live.decoding.LiveCounts.predicted_seconds`), the share (champion - best fixed) / (bound -
  best fixed) in those figures: the decisions' worth, free of timing noise;
* measured: the same with the wall-clock tokens per second, the bound scaled by the best fixed row's measured /
  predicted ratio (the cost file's error on this machine, taken to be the same for the bound).

The best fixed row is the best (priced) of the live rows that draft a fixed number of tokens (a
``fixed_gamma:gamma=G`` policy, or a lossless per-token rule at the run's gamma): give the length tuned on valid as a rule.
"""
from __future__ import annotations

import math
from typing import Sequence

from evolve.eval.costs import Costs
from evolve.eval.evaluator import EvalData
from evolve.eval.headroom import headroom_share
from evolve.kinds.verify_length import KIND
from evolve.kinds.verify_length.eval_competitors import length_oracle
from evolve.kinds.verify_length.report_compare import check_policy_settings
from heuristics.length_policies import fixed_gamma


def _fixed(rule, gamma: int) -> bool:
    """Whether ``rule`` drafts a fixed number of tokens: a ``fixed_gamma`` policy's expression, or a rule of another
    kind that drafts every block at the run's gamma (a per-token verifier)."""
    if getattr(rule, "program_kind", None) is not KIND:
        return getattr(rule, "program_kind", None) is not None and bool(getattr(rule, "lossless", False))
    return any(rule.expression == fixed_gamma(g).expression for g in range(gamma + 1))


def live_headroom(rules: Sequence, rows: Sequence[dict], counts: Sequence, champions: int, data: EvalData, gamma: int,
                  costs: Costs) -> list[dict]:
    """For each of the last ``champions`` rules (champion files) of this kind: ``{"champion", "bound_tokens_per_s",
    "fixed": the best fixed row's name, "priced": share, "measured": share}`` (module doc), its live ``rows`` and
    ``counts`` in the order of ``rules``; empty without a fixed row or a champion of this kind."""
    priced = [c.tokens / c.predicted_seconds(costs) if c.target_calls else math.nan for c in counts]
    fixed = [i for i, rule in enumerate(rules) if _fixed(rule, gamma) and math.isfinite(priced[i])]
    if not fixed:
        return []
    f = max(fixed, key=lambda i: priced[i])
    out = []
    for i in range(len(rules) - champions, len(rules)):
        rule = rules[i]
        if getattr(rule, "program_kind", None) is not KIND:
            continue
        verifier, weighting = check_policy_settings(rule)
        bound = length_oracle(data, gamma, costs, verifier, weighting).tokens_per_second
        scale = rows[f]["tokens_per_s"] / priced[f] if priced[f] else math.nan
        out.append({"champion": rule.name, "fixed": rules[f].name, "bound_tokens_per_s": bound,
                    "priced": headroom_share(priced[i], priced[f], bound),
                    "measured": headroom_share(rows[i]["tokens_per_s"], rows[f]["tokens_per_s"], bound * scale)})
    return out


__all__ = ["live_headroom"]
